"""c2cuda family `gather_scatter`: indexing kernels over rows of width D.

Kinds: gather rows (out[i,:] = x[idx[i],:], an embedding lookup), scatter rows through a permutation
(out[idx[i],:] = x[i,:]), index_add (out[idx[i],:] += x[i,:] with repeated indices, float atomics),
masked copy (out[i,:] = mask[i] ? x[i,:] : fill), and gather with clamped (out-of-range -> edge)
or wrapped indices. dtypes float32, float64, int32; D from 1 to 512.

Implementations: naive (one thread per output element, baseline), row_per_warp (a warp walks one row:
coalesced), grid_stride, unrolled (4 elements per thread). Negative: clamp off by one.
"""
from __future__ import annotations

import random

from kernels_harness.datasets import base as B

KINDS = ("gather", "scatter_perm", "index_add", "masked_copy", "gather_clamp", "gather_wrap")


def variants(rng: random.Random) -> list[dict]:
    out = []
    for kind in KINDS:
        for dt in ("float32", "float64", "int32"):
            if kind == "index_add" and dt == "int32":
                continue
            for d in (1, 2, 3, 8, 16, 32, 64, 127, 256, 512):
                out.append({"kind": kind, "dtype": dt, "D": d, "odd": rng.randrange(1, 50),
                            "wrong": kind == "gather_clamp" and rng.random() < 0.5})
    for i, v in enumerate(out):
        v["name"] = B.slug("index", i, v["kind"], v["dtype"], f"d{v['D']}")
    return out


def build(p: dict):
    kind, dt, D = p["kind"], p["dtype"], p["D"]
    T = B.ctype(dt)
    entry = kind
    sig = [B.scalar("n", "int32", "N"), B.scalar("m", "int32", "M")]  # the row width is a constant, DIM
    if kind == "gather":
        sig += [B.inp("idx", "int32", ["N"], init="randint(0, M)"), B.inp("x", dt, ["M", "D"])]
    elif kind in ("gather_clamp", "gather_wrap"):
        sig += [B.inp("idx", "int32", ["N"], init="randint(-5, M+5)"), B.inp("x", dt, ["M", "D"])]
    elif kind == "scatter_perm":
        sig += [B.inp("idx", "int32", ["N"], init="permutation"), B.inp("x", dt, ["N", "D"])]
    elif kind == "index_add":
        sig += [B.inp("idx", "int32", ["N"], init="randint(0, M)"), B.inp("x", dt, ["N", "D"]),
                B.inp("base", dt, ["M", "D"])]
    else:  # masked_copy
        sig += [B.inp("mask", "uint8", ["N"], init="bernoulli(0.5)"), B.inp("x", dt, ["N", "D"]),
                B.scalar("fill", dt, -1)]
    out_rows = "M" if kind == "index_add" else "N"
    sig.append(B.out("y", dt, [out_rows, "D"]))

    def elem(row: str, bug=False):
        """C statement for element (i = row, k) of the operation."""
        hi = "m - 2" if bug else "m - 1"
        if kind == "gather":
            return f"y[(long long){row} * d + k] = x[(long long)idx[{row}] * d + k];"
        if kind == "gather_clamp":
            return (f"{{ int s = idx[{row}]; s = s < 0 ? 0 : (s > {hi} ? {hi} : s); "
                    f"y[(long long){row} * d + k] = x[(long long)s * d + k]; }}")
        if kind == "gather_wrap":
            return (f"{{ int s = idx[{row}] % m; if (s < 0) s += m; "
                    f"y[(long long){row} * d + k] = x[(long long)s * d + k]; }}")
        if kind == "scatter_perm":
            return f"y[(long long)idx[{row}] * d + k] = x[(long long){row} * d + k];"
        if kind == "masked_copy":
            return f"y[(long long){row} * d + k] = mask[{row}] ? x[(long long){row} * d + k] : fill;"
        raise AssertionError(kind)

    if kind == "index_add":
        c_body = """
for (long long e = 0; e < (long long)m * d; ++e) y[e] = base[e];
for (int i = 0; i < n; ++i)
  for (int k = 0; k < d; ++k)
    y[(long long)idx[i] * d + k] += x[(long long)i * d + k];"""
        gpu_elem = "atomicAdd(&y[(long long)idx[i] * d + k], x[(long long)i * d + k]);"
        pre = f"cudaMemcpyAsync(y, base, sizeof({T}) * (size_t)m * d, cudaMemcpyDeviceToDevice, stream);\n"
    else:
        c_body = f"for (int i = 0; i < n; ++i)\n  for (int k = 0; k < d; ++k)\n    {elem('i')}"
        gpu_elem = elem("i")
        pre = ""
    source = B.c_function(entry, sig, c_body)
    kargs = B.params_list(sig)
    call = ", ".join(a.name for a in sig)

    def naive(stmt):
        return lambda proto: B.cuda_unit(proto, f"""
__global__ void index_naive({kargs}) {{
  long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= (long long)n * d) return;
  int i = (int)(e / d), k = (int)(e % d);
  {stmt}
}}""", f"{pre}if (n > 0) index_naive<<<{B.grid1d('(long long)n * d')}, 256, 0, stream>>>({call});")

    def warp(proto):
        return B.cuda_unit(proto, f"""
__global__ void index_warp({kargs}) {{
  int i = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  int lane = threadIdx.x % 32;
  if (i >= n) return;
  for (int k = lane; k < d; k += 32) {{
    {gpu_elem}
  }}
}}""", f"{pre}if (n > 0) index_warp<<<{B.grid1d('(long long)n * 32', 256)}, 256, 0, stream>>>({call});")

    def grid(proto):
        return B.cuda_unit(proto, f"""
__global__ void index_grid({kargs}) {{
  long long total = (long long)n * d;
  for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total;
       e += (long long)gridDim.x * blockDim.x) {{
    int i = (int)(e / d), k = (int)(e % d);
    {gpu_elem}
  }}
}}""", f"{pre}if (n > 0) index_grid<<<{B.grid1d('(long long)n * d', 256, '2048')}, 256, 0, stream>>>({call});")

    def unrolled(proto):
        return B.cuda_unit(proto, f"""
__global__ void index_unrolled({kargs}) {{
  long long total = (long long)n * d;
  long long first = (long long)blockIdx.x * blockDim.x * 4 + threadIdx.x;
#pragma unroll
  for (int u = 0; u < 4; ++u) {{
    long long e = first + (long long)u * blockDim.x;
    if (e < total) {{
      int i = (int)(e / d), k = (int)(e % d);
      {gpu_elem}
    }}
  }}
}}""", f"{pre}if (n > 0) index_unrolled<<<{B.grid1d('(long long)n * d', 1024)}, 256, 0, stream>>>({call});")

    impls = [("naive", ["naive"], naive(gpu_elem), {"baseline": True}),
             ("row_per_warp", ["coalesced"], warp),
             ("grid_stride", ["grid_stride"], grid),
             ("unrolled", ["unrolled"], unrolled)]
    if p["wrong"]:
        impls.append(("naive_clamp_off_by_one", ["naive"], naive(elem("i", bug=True)), {"defect": "off_by_one"}))
    consts = {"d": ("DIM", D)}
    source = B.bake(source, consts)
    impls = [(spec[0], spec[1], B.baked(spec[2], consts), *spec[3:]) for spec in impls]
    o = p["odd"]
    big_rows = max(1, (1 << 24) // D)
    configs = B.configs3({"N": 40 + o, "M": 30 + o, "D": D}, {"N": max(64, 262144 // D) + o, "M": 5000, "D": D},
                         {"N": big_rows + o, "M": 100000, "D": D})
    tol = B.tolerance(dt, 10) if dt != "int32" else {"atol": 0, "rtol": 0}
    nb = B.DTYPES_BYTES[dt]
    return B.make_task(tid=p["name"], track="c2cuda", entry=entry, source=source, signature=sig,
                       configs=configs, tol=tol, flops="N*D" if kind == "index_add" else 0,
                       min_bytes=f"{2 * nb}*N*D+4*N", family="gather_scatter", impls=impls)
