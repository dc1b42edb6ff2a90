"""c2cuda family `transpose`: transposes and layout changes: 2-D transpose, batched transpose, the
3-D permutations that move the innermost axis (021, 120, 201, 210), NCHW<->NHWC; for float32,
float64, int64, int32, int16, int8 and uint8 elements and square, tall or wide shapes.

Every kind is a batched (b, i, j) -> (b, j, i) move where j is unit-stride in the input and i is
unit-stride in the output. Implementations: naive (one thread per output element: coalesced writes,
strided reads; baseline), read_coalesced (one thread per input element), smem_tiled (32x32 tile with
+1 padding against bank conflicts, 32x8 threads), smem_tiled_nopad (same without padding). Negative:
the tiled kernel without its barrier.
"""
from __future__ import annotations

import random

from kernels_harness.datasets import base as B

# kind -> (scalar symbols, in shape, out shape, batch, I, J, in offset, out offset) as C over scalars
KINDS = {
    "transpose2d": (("R", "C"), ["R", "C"], ["C", "R"], "1", "r", "c", "i * c + j", "j * r + i"),
    "batched": (("BT", "R", "C"), ["BT", "R", "C"], ["BT", "C", "R"], "bt", "r", "c",
                "(b * r + i) * c + j", "(b * c + j) * r + i"),
    "permute_021": (("A", "BD", "C"), ["A", "BD", "C"], ["A", "C", "BD"], "a", "bd", "c",
                    "(b * bd + i) * c + j", "(b * c + j) * bd + i"),
    "permute_120": (("A", "BD", "C"), ["A", "BD", "C"], ["BD", "C", "A"], "1", "a", "bd * c",
                    "i * ((long long)bd * c) + j", "j * a + i"),
    "permute_201": (("A", "BD", "C"), ["A", "BD", "C"], ["C", "A", "BD"], "1", "a * bd", "c",
                    "i * c + j", "j * ((long long)a * bd) + i"),
    "permute_210": (("A", "BD", "C"), ["A", "BD", "C"], ["C", "BD", "A"], "bd", "a", "c",
                    "(i * bd + b) * c + j", "(j * bd + b) * a + i"),
    "nchw_to_nhwc": (("N", "C", "HW"), ["N", "C", "HW"], ["N", "HW", "C"], "n", "c", "hw",
                     "(b * c + i) * hw + j", "(b * hw + j) * c + i"),
    "nhwc_to_nchw": (("N", "HW", "C"), ["N", "HW", "C"], ["N", "C", "HW"], "n", "hw", "c",
                     "(b * hw + i) * c + j", "(b * c + j) * hw + i"),
}
DTYPES = ("float32", "float64", "int32", "int64", "int16", "int8", "uint8")


def variants(rng: random.Random) -> list[dict]:
    out = []
    for kind in KINDS:
        for dt in DTYPES:
            for shape in ("square", "tall", "wide"):
                out.append({"kind": kind, "dtype": dt, "shape": shape, "odd": rng.randrange(1, 31),
                            "wrong": rng.random() < 0.2})
    for i, v in enumerate(out):
        v["name"] = B.slug("layout", i, v["kind"], v["shape"], v["dtype"])
    return out


def _sizes(kind: str, shape: str, o: int):
    """Three configs of the kind's symbols, small / medium / large."""
    syms = KINDS[kind][0]
    if len(syms) == 2:
        base = {"square": ((30, 40), (2048, 2048), (8192, 8192)), "tall": ((100, 7), (65536, 64), (1 << 20, 64)),
                "wide": ((7, 100), (64, 65536), (64, 1 << 20))}[shape]
    else:
        base = {"square": ((3, 20, 30), (16, 256, 256), (64, 1024, 1024)),
                "tall": ((2, 60, 9), (8, 8192, 32), (32, 32768, 64)),
                "wide": ((2, 9, 60), (8, 32, 8192), (32, 64, 32768))}[shape]
    out = []
    for vals in base:
        out.append({s: v + (o if k == len(syms) - 1 else 0) for k, (s, v) in enumerate(zip(syms, vals))})
    return out


def build(p: dict):
    kind, dt = p["kind"], p["dtype"]
    T = B.ctype(dt)
    syms, in_shape, out_shape, nb_e, ni_e, nj_e, in_off, out_off = KINDS[kind]
    cnames = [s.lower() for s in syms]
    entry = kind if kind != "batched" else "batched_transpose"
    sig = [B.scalar(c, "int32", s) for c, s in zip(cnames, syms)]
    init = "randint(0, 100)" if dt != "float32" and dt != "float64" else None
    sig += [B.inp("x", dt, in_shape, init=init), B.out("y", dt, out_shape)]
    decl = f"long long nb = {nb_e}, ni = {ni_e}, nj = {nj_e};"
    c_body = f"""
{decl}
for (long long b = 0; b < nb; ++b)
  for (long long i = 0; i < ni; ++i)
    for (long long j = 0; j < nj; ++j)
      y[{out_off}] = x[{in_off}];"""
    source = B.c_function(entry, sig, c_body)
    kargs = B.params_list(sig)
    call = ", ".join(a.name for a in sig)
    decl_k = decl.replace("long long", "const long long") + " (void)nb;"

    def flat(order_out: bool, name: str):
        # output order: i fastest (coalesced writes); input order: j fastest (coalesced reads)
        dec = ("long long i = e % ni, j = (e / ni) % nj, b = e / (ni * nj);" if order_out
               else "long long j = e % nj, i = (e / nj) % ni, b = e / (ni * nj);")
        return lambda proto: B.cuda_unit(proto, f"""
__global__ void {name}({kargs}) {{
  {decl_k}
  long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= nb * ni * nj) return;
  {dec}
  (void)b;
  y[{out_off}] = x[{in_off}];
}}""", f"{decl}\nif (nb * ni * nj > 0) {name}<<<(int)((nb * ni * nj + 255) / 256), 256, 0, stream>>>({call});")

    def tiled(pad: int, barrier: bool = True):
        sync = "__syncthreads();" if barrier else ""
        return lambda proto: B.cuda_unit(proto, f"""
__global__ void transpose_tiled({kargs}) {{
  __shared__ {T} tile[32][32 + {pad}];
  {decl_k}
  long long b = blockIdx.z;
  (void)b;
  long long i0 = (long long)blockIdx.y * 32, j0 = (long long)blockIdx.x * 32;
  for (int row = threadIdx.y; row < 32; row += 8) {{
    long long i = i0 + row, j = j0 + threadIdx.x;
    if (i < ni && j < nj) tile[row][threadIdx.x] = x[{in_off}];
  }}
  {sync}
  for (int row = threadIdx.y; row < 32; row += 8) {{
    long long j = j0 + row, i = i0 + threadIdx.x;
    if (i < ni && j < nj) y[{out_off}] = tile[threadIdx.x][row];
  }}
}}""", f"{decl}\nif (nb * ni * nj > 0) transpose_tiled<<<dim3((unsigned)((nj + 31) / 32), (unsigned)((ni + 31) / 32), "
            f"(unsigned)nb), dim3(32, 8), 0, stream>>>({call});")

    impls = [("naive", ["naive"], flat(True, "move_by_output"), {"baseline": True}),
             ("read_coalesced", ["coalesced"], flat(False, "move_by_input")),
             ("smem_tiled", ["smem_tiled", "coalesced", "unrolled"], tiled(1)),
             ("smem_tiled_nopad", ["smem_tiled", "coalesced"], tiled(0))]
    if p["wrong"]:
        impls.append(("smem_tiled_nosync", ["smem_tiled"], tiled(1, False), {"defect": "missing_barrier"}))
    sizes = _sizes(kind, p["shape"], p["odd"])
    configs = B.configs3(*sizes)
    total = "*".join(in_shape)
    nb = B.DTYPES_BYTES[dt]
    tol = {"atol": 0, "rtol": 0}
    return B.make_task(tid=p["name"], track="c2cuda", entry=entry, source=source, signature=sig,
                       configs=configs, tol=tol, flops=0, min_bytes=f"{2 * nb}*{total}",
                       family="transpose", impls=impls)
