"""c2cuda family `stencil`: one step of a 1-D/2-D/3-D Jacobi average, heat-equation update or
Laplacian, with four boundary treatments (copy the boundary cells, zero padding, clamp to the edge,
periodic) and radius 1 or 2 (1-D, fourth-order), float32/float64, square or elongated grids.

Implementations: naive (one thread per point, baseline), grid_stride (flattened), smem_tiled
(1-D/2-D: a tile with halo in shared memory), register_blocked (3-D: each thread marches along z
keeping the z-neighbours in registers). Negatives: the interior test of the copy boundary is off by
one; the shared-memory tile is read without a barrier.
"""
from __future__ import annotations

import random

from kernels_harness.datasets import base as B

BOUNDARIES = ("copy", "zero", "clamp", "periodic")
KINDS = ("jacobi", "heat", "laplacian")
COORDS = {1: ["x"], 2: ["y", "x"], 3: ["z", "y", "x"]}
DIMS = {1: ["nx"], 2: ["ny", "nx"], 3: ["nz", "ny", "nx"]}
SYMS = {1: ["NX"], 2: ["NY", "NX"], 3: ["NZ", "NY", "NX"]}


def variants(rng: random.Random) -> list[dict]:
    out = []
    for dim in (1, 2, 3):
        for kind in KINDS:
            for bnd in BOUNDARIES:
                for dt in B.FLOAT_DTYPES:
                    shapes = ("line",) if dim == 1 else ("square", "elongated")
                    for shape in shapes:
                        for radius in ((1, 2) if dim < 3 else (1,)):
                            out.append({"dim": dim, "kind": kind, "boundary": bnd, "dtype": dt,
                                        "radius": radius, "shape": shape, "odd": rng.randrange(1, 13),
                                        "wrong": rng.random() < 0.3})
    for i, v in enumerate(out):
        v["name"] = B.slug("stencil", i, f"{v['dim']}d", v["kind"], v["boundary"], f"r{v['radius']}",
                           v["shape"], v["dtype"])
    return out


def _points(dim: int, radius: int):
    """[(offset tuple, coefficient in the neighbour sum)], centre coefficient k, number of points."""
    pts = []
    for a in range(dim):
        for r in range(1, radius + 1):
            coef = 1.0 if radius == 1 else (4.0 / 3.0 if r == 1 else -1.0 / 12.0)
            for s in (-r, r):
                off = [0] * dim
                off[a] = s
                pts.append((tuple(off), coef))
    k = 2.0 * dim if radius == 1 else 2.5 * dim
    return pts, k, len(pts) + 1


def build(p: dict):
    dim, kind, bnd, dt, R = p["dim"], p["kind"], p["boundary"], p["dtype"], p["radius"]
    T = B.ctype(dt)
    co, dims, syms = COORDS[dim], DIMS[dim], SYMS[dim]
    entry = f"{kind}_{dim}d"
    sig = [B.scalar(d, "int32", s) for d, s in zip(dims, syms)]
    if kind == "heat":
        sig.append(B.scalar("alpha", dt, 0.1))
    sig += [B.inp("u", dt, syms), B.out("v", dt, syms)]
    dparams = ", ".join(f"int {d}" for d in dims)
    cparams = ", ".join(f"int {c}" for c in co)

    def lin(cs):
        e = cs[0]
        for d, c in zip(dims[1:], cs[1:]):
            e = f"({e}) * (long long){d} + {c}" if e == cs[0] else f"({e}) * {d} + {c}"
        return f"(long long)({e})" if dim == 1 else e

    wrap = []
    for c, d in zip(co, dims):
        if bnd == "zero":
            wrap.append(f"if ({c} < 0 || {c} >= {d}) return {B.lit(0, dt)};")
        elif bnd == "periodic":
            wrap.append(f"{c} = ({c} % {d} + {d}) % {d};")
        else:  # clamp, and copy (whose fetches are only used in range; clamp keeps them safe)
            wrap.append(f"{c} = {c} < 0 ? 0 : ({c} >= {d} ? {d} - 1 : {c});")

    def at_fn(qual):
        return (f"{qual}{T} at(const {T}* u, {dparams}, {cparams}) {{\n  " + "\n  ".join(wrap)
                + f"\n  return u[{lin(co)}];\n}}")

    pts, k, npts = _points(dim, R)
    dnames = ", ".join(dims)

    def fetch(off, src="global"):
        cs = ", ".join((f"{c} + {o}" if o > 0 else f"{c} - {-o}") if o else c for c, o in zip(co, off))
        return f"at(u, {dnames}, {cs})"

    def stencil_expr(get):
        """The update as C, with get(offset) giving a neighbour's value; centre is `c`."""
        if kind == "jacobi":
            terms = " + ".join(["c"] + [get(o) for o, _ in pts])
            return f"({terms}) / {B.lit(npts, dt)}"
        terms = []
        for o, w in pts:
            terms.append(get(o) if w == 1.0 else f"{B.lit(w, dt)} * {get(o)}")
        lap = f"({' + '.join(terms)} - {B.lit(k, dt)} * c)"
        return lap if kind == "laplacian" else f"c + alpha * {lap}"

    def interior(bug=False):
        conds = []
        for c, d in zip(co, dims):
            hi = f"{d} - {R} - 1" if bug and c == "x" else f"{d} - {R}"
            conds.append(f"{c} >= {R} && {c} < {hi}")
        return " && ".join(conds)

    def point_stmt(get, center, bug=False):
        upd = stencil_expr(get)
        if bnd == "copy":
            return f"{{ {T} c = {center}; v[{lin(co)}] = ({interior(bug)}) ? {upd} : c; }}"
        return f"{{ {T} c = {center}; v[{lin(co)}] = {upd}; }}"

    loops_c = ""
    for c, d in zip(co, dims):
        loops_c += f"for (int {c} = 0; {c} < {d}; ++{c})\n"
    c_body = loops_c + "  " + point_stmt(fetch, f"u[{lin(co)}]")
    source = B.c_function(entry, sig, c_body, helpers=at_fn("static inline "))
    kargs = B.params_list(sig)
    call = ", ".join(a.name for a in sig)
    dev_at = at_fn("__device__ __forceinline__ ")
    total = " * ".join(f"(long long){d}" for d in dims)

    # naive: one thread per point
    if dim == 1:
        idx_n, launch_n = "int x = blockIdx.x * blockDim.x + threadIdx.x;\n  if (x >= nx) return;", \
            f"{B.grid1d('nx')}, 256"
    elif dim == 2:
        idx_n = ("int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;\n"
                 "  if (x >= nx || y >= ny) return;")
        launch_n = "dim3((nx + 31) / 32, (ny + 7) / 8), dim3(32, 8)"
    else:
        idx_n = ("int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;\n"
                 "  int z = blockIdx.z;\n  if (x >= nx || y >= ny) return;")
        launch_n = "dim3((nx + 31) / 32, (ny + 7) / 8, nz), dim3(32, 8)"

    def naive(bug=False):
        return lambda proto: B.cuda_unit(proto, f"""
{dev_at}
__global__ void stencil_naive({kargs}) {{
  {idx_n}
  {point_stmt(fetch, f"u[{lin(co)}]", bug)}
}}""", f"stencil_naive<<<{launch_n}, 0, stream>>>({call});")

    decode = {1: "int x = (int)e;", 2: "int x = (int)(e % nx), y = (int)(e / nx);",
              3: "int x = (int)(e % nx), y = (int)((e / nx) % ny), z = (int)(e / ((long long)nx * ny));"}[dim]

    def grid(proto):
        return B.cuda_unit(proto, f"""
{dev_at}
__global__ void stencil_grid({kargs}) {{
  long long total = {total};
  for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total;
       e += (long long)gridDim.x * blockDim.x) {{
    {decode}
    {point_stmt(fetch, f"u[{lin(co)}]")}
  }}
}}""", f"stencil_grid<<<{B.grid1d(total, 256, '2048')}, 256, 0, stream>>>({call});")

    impls = [("naive", ["naive", "coalesced"], naive(), {"baseline": True}),
             ("grid_stride", ["grid_stride", "coalesced"], grid)]
    if dim in (1, 2):
        def tiled(barrier=True):
            sync = "__syncthreads();" if barrier else ""
            if dim == 1:
                kern = f"""
{dev_at}
__global__ void stencil_tiled({kargs}) {{
  __shared__ {T} tile[256 + 2 * {R}];
  int x0 = blockIdx.x * 256;
  for (int l = threadIdx.x; l < 256 + 2 * {R}; l += 256) tile[l] = at(u, nx, x0 + l - {R});
  {sync}
  int tx = threadIdx.x, x = x0 + tx;
  if (x >= nx) return;
  {point_stmt(lambda o: f"tile[tx + {R + o[0]}]", f"tile[tx + {R}]")}
}}"""
                launch = f"{B.grid1d('nx')}, 256"
            else:
                kern = f"""
{dev_at}
__global__ void stencil_tiled({kargs}) {{
  __shared__ {T} tile[8 + 2 * {R}][32 + 2 * {R}];
  int x0 = blockIdx.x * 32, y0 = blockIdx.y * 8;
  for (int ly = threadIdx.y; ly < 8 + 2 * {R}; ly += 8)
    for (int lx = threadIdx.x; lx < 32 + 2 * {R}; lx += 32)
      tile[ly][lx] = at(u, ny, nx, y0 + ly - {R}, x0 + lx - {R});
  {sync}
  int tx = threadIdx.x, ty = threadIdx.y, x = x0 + tx, y = y0 + ty;
  if (x >= nx || y >= ny) return;
  {point_stmt(lambda o: f"tile[ty + {R + o[0]}][tx + {R + o[1]}]", f"tile[ty + {R}][tx + {R}]")}
}}"""
                launch = "dim3((nx + 31) / 32, (ny + 7) / 8), dim3(32, 8)"
            return lambda proto: B.cuda_unit(proto, kern, f"stencil_tiled<<<{launch}, 0, stream>>>({call});")
        impls.append(("smem_tiled", ["smem_tiled", "coalesced"], tiled()))
        if p["wrong"] and bnd != "copy":
            impls.append(("smem_tiled_nosync", ["smem_tiled"], tiled(False), {"defect": "missing_barrier"}))
    else:
        def zget(o):
            if o[0] == -1:
                return "below"
            if o[0] == 1:
                return "above"
            return fetch(o)

        impls.append(("z_march", ["register_blocked", "coalesced"], lambda proto: B.cuda_unit(proto, f"""
{dev_at}
__global__ void stencil_zmarch({kargs}) {{
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= nx || y >= ny) return;
  {T} below = at(u, nz, ny, nx, -1, y, x);
  {T} cur = at(u, nz, ny, nx, 0, y, x);
  for (int z = 0; z < nz; ++z) {{
    {T} above = at(u, nz, ny, nx, z + 1, y, x);
    {point_stmt(zget, "cur")}
    below = cur;
    cur = above;
  }}
}}""", f"stencil_zmarch<<<dim3((nx + 31) / 32, (ny + 7) / 8), dim3(32, 8), 0, stream>>>({call});")))
    if p["wrong"] and bnd == "copy":
        impls.append(("naive_interior_off_by_one", ["naive"], naive(True), {"defect": "off_by_one"}))
    o = p["odd"]
    if dim == 1:
        cfg = ({"NX": 1000 + o}, {"NX": (1 << 20) + o}, {"NX": (1 << 25) + o})
    elif dim == 2:
        sq = p["shape"] == "square"
        cfg = ({"NY": 40 + o, "NX": 50 + o}, {"NY": 1024 + o if sq else 64 + o, "NX": 1024 + o if sq else 16384 + o},
               {"NY": 4096 + o if sq else 512 + o, "NX": 4096 + o if sq else 32768 + o})
    else:
        sq = p["shape"] == "square"
        cfg = ({"NZ": 8 + o, "NY": 10 + o, "NX": 12 + o},
               {"NZ": 64 + o if sq else 8 + o, "NY": 64 + o, "NX": 64 + o if sq else 512 + o},
               {"NZ": 256 + o if sq else 32 + o, "NY": 256 + o, "NX": 256 + o if sq else 2048 + o})
    configs = B.configs3(*cfg)
    pts_total = " * ".join(syms)
    nb = B.DTYPES_BYTES[dt]
    return B.make_task(tid=p["name"], track="c2cuda", entry=entry, source=source, signature=sig,
                       configs=configs, tol=B.tolerance(dt, 10), flops=f"{2 * npts}*{pts_total}",
                       min_bytes=f"{2 * nb}*{pts_total}", family="stencil", impls=impls)
