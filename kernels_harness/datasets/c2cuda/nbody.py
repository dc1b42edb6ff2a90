"""c2cuda family `nbody`: all-pairs interactions.

Kinds: softened gravitational acceleration (bodies as AoS [N,4] = x,y,z,m or SoA arrays),
softened potential, Gaussian kernel density sums of N queries against M points in D dimensions,
and distance matrices (euclidean, squared euclidean, manhattan) between two point sets.
Implementations: naive (one thread per body / output, baseline), smem_tiled (tiles of the
interacting points staged in shared memory), unrolled (4 interactions per step), grid_stride
(distance matrices).
"""
from __future__ import annotations

import random

from kernels_harness.datasets import base as B


def variants(rng: random.Random) -> list[dict]:
    out = []
    for kind in ("accel", "potential"):
        for layout in ("aos", "soa"):
            for dt in B.FLOAT_DTYPES:
                for eps in (0.05, 0.2):
                    out.append({"kind": kind, "layout": layout, "dtype": dt, "eps": eps, "D": 3,
                                "odd": rng.randrange(1, 60)})
    for dims in (1, 2, 3, 8, 32):
        for dt in B.FLOAT_DTYPES:
            for h in (0.25, 1.0):
                for self_ in (False, True):
                    out.append({"kind": "kde", "layout": "self" if self_ else "cross", "dtype": dt, "eps": h,
                                "D": dims, "odd": rng.randrange(1, 60)})
    for metric in ("euclidean", "sqeuclidean", "manhattan"):
        for dims in (1, 2, 3, 4, 8, 16, 32, 64):
            for dt in B.FLOAT_DTYPES:
                for shape in ("square", "rect"):
                    out.append({"kind": "cdist_" + metric, "layout": shape, "dtype": dt, "eps": 0, "D": dims,
                                "odd": rng.randrange(1, 60)})
    for i, v in enumerate(out):
        v["name"] = B.slug("pairs", i, v["kind"], v["layout"], f"d{v['D']}", v["dtype"])
    return out


def build(p: dict):
    kind = p["kind"]
    if kind.startswith("cdist"):
        return _cdist(p)
    return _pairsum(p)


def _pairsum(p: dict):
    """accel / potential / kde: out_i = sum_j f(i, j)."""
    kind, layout, dt, D = p["kind"], p["layout"], p["dtype"], p["D"]
    T = B.ctype(dt)
    L = lambda v: B.lit(v, dt)
    sq = B.mathfn("sqrt", dt)
    ex = B.mathfn("exp", dt)
    if kind == "kde":
        entry = "kde_sum"
        sig = [B.scalar("n", "int32", "N")]
        if layout == "cross":
            sig.append(B.scalar("m", "int32", "M"))
        sig += [B.scalar("inv2h2", dt, 1.0 / (2 * p["eps"] ** 2 * D)), B.inp("q", dt, ["N", D])]
        if layout == "cross":
            sig.append(B.inp("pts", dt, ["M", D]))
        sig.append(B.out("dens", dt, ["N"]))
        src, cnt = ("q", "n") if layout == "self" else ("pts", "m")
        # the interacting point j is staged as D values: pj[d]
        load_j = lambda arr, j: [f"{arr}[(long long)({j}) * {D} + {d}]" for d in range(D)]
        mine = [f"q[(long long)i * {D} + {d}]" for d in range(D)]

        def inter(pj, acc="acc", i_=None):
            terms = " + ".join(f"(qi[{d}] - {pj[d]}) * (qi[{d}] - {pj[d]})" for d in range(D))
            return f"{acc} += {ex}(-({terms}) * inv2h2);"
        decl_i = f"{T} qi[{D}];\n  for (int d = 0; d < {D}; ++d) qi[d] = q[(long long)i * {D} + d];"
        store = "dens[i] = acc;"
        stride_j = D
    else:
        entry = "nbody_" + kind + "_" + layout
        sig = [B.scalar("n", "int32", "N"), B.scalar("eps2", dt, p["eps"] ** 2)]
        if layout == "aos":
            sig.append(B.inp("body", dt, ["N", 4], init="uniform(0.1, 1)"))
        else:
            sig += [B.inp(c, dt, ["N"]) for c in ("px", "py", "pz")] + [B.inp("mass", dt, ["N"], init="uniform(0.1, 1)")]
        sig += [B.out("acc", dt, ["N", 3])] if kind == "accel" else [B.out("phi", dt, ["N"])]
        src, cnt = ("body" if layout == "aos" else "soa", "n")
        if layout == "aos":
            load_j = lambda arr, j: [f"body[(long long)({j}) * 4 + {d}]" for d in range(4)]
        else:
            load_j = lambda arr, j: [f"{c}[{j}]" for c in ("px", "py", "pz", "mass")]
        mine = load_j(None, "i")
        decl_i = f"{T} qi[3];\n  " + " ".join(f"qi[{d}] = {mine[d]};" for d in range(3))
        stride_j = 4

        def inter(pj, acc="acc", i_=None):
            s = (f"{{ {T} dx = {pj[0]} - qi[0], dy = {pj[1]} - qi[1], dz = {pj[2]} - qi[2];\n"
                 f"    {T} r2 = dx * dx + dy * dy + dz * dz + eps2;\n")
            if kind == "accel":
                s += (f"    {T} inv = {L(1)} / {sq}(r2); {T} w = {pj[3]} * inv * inv * inv;\n"
                      f"    ax += w * dx; ay += w * dy; az += w * dz; }}")
            else:
                s += f"    if (j != i) {acc} -= {pj[3]} / {sq}(r2); }}"
            return s
        store = ("acc[(long long)i * 3 + 0] = ax; acc[(long long)i * 3 + 1] = ay; acc[(long long)i * 3 + 2] = az;"
                 if kind == "accel" else "phi[i] = acc;")
    acc_decl = f"{T} ax = 0, ay = 0, az = 0;" if kind == "accel" else f"{T} acc = 0;"
    c_body = f"""
for (int i = 0; i < n; ++i) {{
  {decl_i}
  {acc_decl}
  for (int j = 0; j < {cnt}; ++j)
    {inter(load_j(src, "j"))}
  {store}
}}"""
    source = B.c_function(entry, sig, c_body)
    kargs = B.params_list(sig)
    call = ", ".join(a.name for a in sig)
    head = "int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i >= n) return;"
    naive = lambda proto: B.cuda_unit(proto, f"""
__global__ void pairs_naive({kargs}) {{
  {head}
  {decl_i}
  {acc_decl}
  for (int j = 0; j < {cnt}; ++j)
    {inter(load_j(src, "j"))}
  {store}
}}""", f"pairs_naive<<<{B.grid1d('n', 128)}, 128, 0, stream>>>({call});")
    # shared-memory tiles of 128 interacting points, each as stride_j values
    width = stride_j
    tile_vals = [f"tile[(jj) * {width} + {d}]" for d in range(width)]
    loads = load_j(src, "j0 + t")
    tiled = lambda proto: B.cuda_unit(proto, f"""
__global__ void pairs_tiled({kargs}) {{
  __shared__ {T} tile[128 * {width}];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  bool live = i < n;
  int ii = live ? i : 0;
  {decl_i.replace("(long long)i", "(long long)ii").replace("[i]", "[ii]").replace("(i)", "(ii)")}
  {acc_decl}
  for (int j0 = 0; j0 < {cnt}; j0 += 128) {{
    int t = threadIdx.x;
    if (j0 + t < {cnt}) {{
      {" ".join(f"tile[t * {width} + {d}] = {loads[d]};" for d in range(width))}
    }}
    __syncthreads();
    int len = {cnt} - j0 < 128 ? {cnt} - j0 : 128;
    for (int jj = 0; jj < len; ++jj) {{
      int j = j0 + jj; (void)j;
      {inter(tile_vals)}
    }}
    __syncthreads();
  }}
  if (live) {{ {store} }}
}}""", f"pairs_tiled<<<{B.grid1d('n', 128)}, 128, 0, stream>>>({call});")
    unrolled = lambda proto: B.cuda_unit(proto, f"""
__global__ void pairs_unrolled({kargs}) {{
  {head}
  {decl_i}
  {acc_decl}
  int j = 0;
  for (; j + 3 < {cnt}; j += 4) {{
    int j0 = j;
#pragma unroll
    for (int u = 0; u < 4; ++u) {{
      j = j0 + u;
      {inter(load_j(src, "j"))}
    }}
    j = j0;
  }}
  for (; j < {cnt}; ++j)
    {inter(load_j(src, "j"))}
  {store}
}}""", f"pairs_unrolled<<<{B.grid1d('n', 128)}, 128, 0, stream>>>({call});")
    impls = [("naive", ["naive"], naive, {"baseline": True}), ("smem_tiled", ["smem_tiled"], tiled),
             ("unrolled", ["unrolled"], unrolled)]
    if B.wrong_for(p["name"]):  # the last output is never written (a dropped far-away pair could go unseen)
        impls.append(B.mutant(impls[0], "if (i >= n) return;", "if (i >= n - 1) return;", "off_by_one"))
    o = p["odd"]
    if kind == "kde" and layout == "cross":
        cfg = ({"N": 50 + o, "M": 70 + o}, {"N": 4096 + o, "M": 8192 + o}, {"N": 32768 + o, "M": 65536 // max(1, D // 4) + o})
    else:
        cfg = ({"N": 64 + o}, {"N": 8192 + o}, {"N": 65536 // max(1, D // 8) + o})
    configs = B.configs3(*cfg)
    pairs = "N*M" if (kind == "kde" and layout == "cross") else "N*N"
    nb = B.DTYPES_BYTES[dt]
    return B.make_task(tid=p["name"], track="c2cuda", entry=entry, source=source, signature=sig,
                       configs=configs, tol=B.tolerance(dt, 10), flops=f"{3 * D + 10}*{pairs}",
                       min_bytes=f"{nb * (stride_j + 3)}*N", family="nbody", impls=impls)


def _cdist(p: dict):
    metric = p["kind"].split("_", 1)[1]
    dt, D = p["dtype"], p["D"]
    T = B.ctype(dt)
    entry = "cdist_" + metric
    # the point dimension is a compile-time constant, DIM
    sig = [B.scalar("n", "int32", "N"), B.scalar("m", "int32", "M"),
           B.inp("a", dt, ["N", "D"]), B.inp("b", dt, ["M", "D"]), B.out("dist", dt, ["N", "M"])]
    term = {"manhattan": f"{B.mathfn('fabs', dt)}(t)"}.get(metric, "t * t")
    fin = f"{B.mathfn('sqrt', dt)}(s)" if metric == "euclidean" else "s"
    c_body = f"""
for (int i = 0; i < n; ++i)
  for (int j = 0; j < m; ++j) {{
    {T} s = 0;
    for (int k = 0; k < d; ++k) {{ {T} t = a[(long long)i * d + k] - b[(long long)j * d + k]; s += {term}; }}
    dist[(long long)i * m + j] = {fin};
  }}"""
    source = B.c_function(entry, sig, c_body)
    kargs = B.params_list(sig)
    call = ", ".join(a.name for a in sig)
    point = (f"{T} s = 0;\n    for (int k = 0; k < d; ++k) {{ {T} t = a[(long long)i * d + k] - b[(long long)j * d + k]; "
             f"s += {term}; }}\n    dist[(long long)i * m + j] = {fin};")
    naive = lambda proto: B.cuda_unit(proto, f"""
__global__ void cdist_naive({kargs}) {{
  int j = blockIdx.x * blockDim.x + threadIdx.x, i = blockIdx.y * blockDim.y + threadIdx.y;
  if (i >= n || j >= m) return;
  {point}
}}""", f"if (n > 0 && m > 0) cdist_naive<<<dim3((m + 31) / 32, (n + 7) / 8), dim3(32, 8), 0, stream>>>({call});")
    grid = lambda proto: B.cuda_unit(proto, f"""
__global__ void cdist_grid({kargs}) {{
  long long total = (long long)n * m;
  for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (long long)gridDim.x * blockDim.x) {{
    int i = (int)(e / m), j = (int)(e % m);
    {point}
  }}
}}""", f"cdist_grid<<<{B.grid1d('(long long)n * m', 256, '4096')}, 256, 0, stream>>>({call});")
    tiled = lambda proto: B.cuda_unit(proto, f"""
__global__ void cdist_tiled({kargs}) {{
  __shared__ {T} as[16][17];
  __shared__ {T} bs[16][17];
  int tx = threadIdx.x, ty = threadIdx.y;
  int i = blockIdx.y * 16 + ty, j = blockIdx.x * 16 + tx;
  {T} s = 0;
  for (int k0 = 0; k0 < d; k0 += 16) {{
    int ia = blockIdx.y * 16 + ty, jb = blockIdx.x * 16 + ty;
    as[ty][tx] = (ia < n && k0 + tx < d) ? a[(long long)ia * d + k0 + tx] : ({T})0;
    bs[ty][tx] = (jb < m && k0 + tx < d) ? b[(long long)jb * d + k0 + tx] : ({T})0;
    __syncthreads();
    int len = d - k0 < 16 ? d - k0 : 16;
    for (int kk = 0; kk < len; ++kk) {{ {T} t = as[ty][kk] - bs[tx][kk]; s += {term}; }}
    __syncthreads();
  }}
  if (i < n && j < m) dist[(long long)i * m + j] = {fin};
}}""", f"if (n > 0 && m > 0) cdist_tiled<<<dim3((m + 15) / 16, (n + 15) / 16), dim3(16, 16), 0, stream>>>({call});")
    impls = [("naive", ["naive", "coalesced"], naive, {"baseline": True}), ("grid_stride", ["grid_stride"], grid),
             ("smem_tiled", ["smem_tiled"], tiled)]
    if B.wrong_for(p["name"]):
        impls.append(B.mutant(impls[0], "k < d; ++k)", "k < d - 1; ++k)", "off_by_one"))
    consts = {"d": ("DIM", D)}
    source = B.bake(source, consts)
    impls = [(spec[0], spec[1], B.baked(spec[2], consts), *spec[3:]) for spec in impls]
    o = p["odd"]
    sqr = p["layout"] == "square"
    cfg = ({"N": 30 + o, "M": 40 + o if sqr else 7, "D": D},
           {"N": 2048 + o, "M": 2048 + o if sqr else 64, "D": D},
           {"N": 8192 + o, "M": 8192 + o if sqr else 512, "D": D})
    configs = B.configs3(*cfg)
    nb = B.DTYPES_BYTES[dt]
    return B.make_task(tid=p["name"], track="c2cuda", entry=entry, source=source, signature=sig,
                       configs=configs, tol=B.tolerance(dt, 30), flops="3*N*M*D",
                       min_bytes=f"{nb}*(N*D+M*D+N*M)", family="nbody", impls=impls)
