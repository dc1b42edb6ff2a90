"""c2cuda family `reduction`: sum, max, min, argmax, argmin, L1/L2 norms, sum of squares, mean of a
[R, C] row-major matrix along rows (out[R]) or columns (out[C]), optionally of |x| or x^2 first.

Implementations along rows: naive (one thread per row, baseline), warp_shuffle (one warp per row),
smem_tiled (one block per row, shared-memory tree); along columns: naive (one thread per column,
coalesced), smem_tiled (32x8 block: partial sums over row slices, then a tree in shared memory),
unrolled (one thread per column, 4 rows per step). Negatives: a missing barrier in the tree, an
off-by-one in the row loop.
"""
from __future__ import annotations

import math
import random

from kernels_harness.datasets import base as B

# op -> (init(T) as C, combine(acc, v), finalize(acc, count), is_arg)
OPS = ("sum", "max", "min", "argmax", "argmin", "l1", "l2", "sumsq", "mean")
PRE = {"none": "v", "abs": "@fabs(v)", "square": "(v * v)", "exp": "@exp(v)", "relu": "(v > 0 ? v : 0)"}
# rms of a summed term after each pre-op, for x ~ uniform(-1, 1) (the default init of the summing ops)
TERM_RMS = {"none": 3 ** -0.5, "abs": 3 ** -0.5, "square": 5 ** -0.5, "exp": math.sqrt(math.sinh(2) / 2),
            "relu": 6 ** -0.5}


def _m(name, dt):
    return B.mathfn(name, dt)


def _init(op, dt):
    big = "FLT_MAX" if dt == "float32" else "DBL_MAX"
    return {"max": f"-{big}", "argmax": f"-{big}", "min": big, "argmin": big}.get(op, B.lit(0, dt))


def _acc(op, dt):
    """C statement folding value v (index j) into acc (and best index bi)."""
    return {"sum": "acc += v;", "mean": "acc += v;", "l1": f"acc += {_m('fabs', dt)}(v);",
            "l2": "acc += v * v;", "sumsq": "acc += v * v;", "max": f"acc = {_m('fmax', dt)}(acc, v);",
            "min": f"acc = {_m('fmin', dt)}(acc, v);", "argmax": "if (v > acc) { acc = v; bi = j; }",
            "argmin": "if (v < acc) { acc = v; bi = j; }"}[op]


def _merge(op, dt):
    """C statement merging (acc2, bi2) into (acc, bi): associative, ties -> lower index."""
    if op in ("max", "min"):
        return f"acc = {_m('f' + op, dt)}(acc, acc2); (void)bi2;"
    if op == "argmax":
        return "if (acc2 > acc || (acc2 == acc && bi2 < bi)) { acc = acc2; bi = bi2; }"
    if op == "argmin":
        return "if (acc2 < acc || (acc2 == acc && bi2 < bi)) { acc = acc2; bi = bi2; }"
    return "acc += acc2; (void)bi2;"


def _final(op, dt, count):
    if op == "l2":
        return f"{_m('sqrt', dt)}(acc)"
    if op == "mean":
        return f"acc / ({B.ctype(dt)})({count})"
    if op in ("argmax", "argmin"):
        return "bi"
    return "acc"


def variants(rng: random.Random) -> list[dict]:
    out = []
    for op in OPS:
        for axis in (0, 1):
            for dt in B.FLOAT_DTYPES:
                for pre in PRE:
                    if op in ("l1", "l2", "sumsq") and pre != "none":
                        continue
                    if op in ("min", "argmin") and pre in ("relu", "abs", "square"):
                        continue  # min of non-negative values over thousands: 0 (or ~0) everywhere, no signal
                    for regime in ("tall", "wide"):
                        out.append({"op": op, "axis": axis, "dtype": dt, "pre": pre, "regime": regime,
                                    "pad": rng.choice((0, 0, 1, 3)),
                                    "odd": list(rng.choice(((1, 1), (3, 7), (7, 3), (1, 33), (13, 5)))),
                                    "wrong": rng.random() < 0.2})
    for i, v in enumerate(out):
        v["name"] = B.slug("reduce", i, v["op"], f"axis{v['axis']}", v["pre"], v["dtype"], v["regime"],
                            f"ld{v['pad']}")
    return out


def build(p: dict):
    op, axis, dt, pre = p["op"], p["axis"], p["dtype"], p["pre"]
    T = B.ctype(dt)
    is_arg = op.startswith("arg")
    out_dt = "int32" if is_arg else dt
    n_out = "R" if axis == 1 else "C"
    entry = f"reduce_{op}_axis{axis}"
    sig = [B.scalar("rows", "int32", "R"), B.scalar("cols", "int32", "C"), B.scalar("ld", "int32", "C+P"),
           B.inp("x", dt, ["R", "C+P"], init="normal(0, 1)" if op in ("max", "min", "argmax", "argmin") else None),
           B.out("y", out_dt, [n_out])]
    pre_e = PRE[pre].replace("@fabs", _m("fabs", dt)).replace("@exp", _m("exp", dt))
    # x index of output o, reduced position j
    xi = "(long long)o * ld + j" if axis == 1 else "(long long)j * ld + o"
    n_out_c, n_red_c = ("rows", "cols") if axis == 1 else ("cols", "rows")
    init = _init(op, dt)
    bi_decl = "int bi = 0;" if is_arg else ""
    acc = _acc(op, dt)
    fin = _final(op, dt, n_red_c)
    c_body = f"""
for (int o = 0; o < {n_out_c}; ++o) {{
  {T} acc = {init}; {bi_decl}
  for (int j = 0; j < {n_red_c}; ++j) {{
    {T} v = x[{xi}];
    v = {pre_e};
    {acc}
  }}
  y[o] = {fin};
}}"""
    source = B.c_function(entry, sig, c_body)
    kargs = B.params_list(sig)
    call = ", ".join(a.name for a in sig)
    merge = _merge(op, dt)

    def naive(bound):
        return lambda proto: B.cuda_unit(proto, f"""
__global__ void reduce_naive({kargs}) {{
  int o = blockIdx.x * blockDim.x + threadIdx.x;
  if (o >= {n_out_c}) return;
  {T} acc = {init}; {bi_decl}
  for (int j = 0; j < {bound}; ++j) {{
    {T} v = x[{xi}];
    v = {pre_e};
    {acc}
  }}
  y[o] = {fin};
}}""", f"reduce_naive<<<{B.grid1d(n_out_c, 128)}, 128, 0, stream>>>({call});")

    impls = [("naive", ["naive"] + (["coalesced"] if axis == 0 else []), naive(n_red_c), {"baseline": True})]
    shfl_bi = "int bi2 = __shfl_down_sync(0xffffffffu, bi, off);" if is_arg else "int bi2 = 0;"
    if axis == 1:
        impls.append(("warp_per_row", ["warp_shuffle", "coalesced"], lambda proto: B.cuda_unit(proto, f"""
__global__ void reduce_warp({kargs}) {{
  int o = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  int lane = threadIdx.x % 32;
  if (o >= rows) return;
  {T} acc = {init}; {"int bi = cols;" if is_arg else ""}
  for (int j = lane; j < cols; j += 32) {{
    {T} v = x[{xi}];
    v = {pre_e};
    {acc}
  }}
  for (int off = 16; off > 0; off /= 2) {{
    {T} acc2 = __shfl_down_sync(0xffffffffu, acc, off);
    {shfl_bi}
    {merge}
  }}
  if (lane == 0) y[o] = {fin};
}}""", f"reduce_warp<<<{B.grid1d('rows * 32', 256)}, 256, 0, stream>>>({call});")))

        def block_tree(barrier: bool):
            sync = "__syncthreads();" if barrier else ""
            return lambda proto: B.cuda_unit(proto, f"""
__global__ void reduce_block({kargs}) {{
  __shared__ {T} s_acc[256];
  __shared__ int s_bi[256];
  int o = blockIdx.x;
  int t = threadIdx.x;
  {T} acc = {init}; int bi = cols;
  for (int j = t; j < cols; j += blockDim.x) {{
    {T} v = x[{xi}];
    v = {pre_e};
    {acc}
  }}
  s_acc[t] = acc; s_bi[t] = bi;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {{
    if (t < s) {{
      {T} acc2 = s_acc[t + s]; int bi2 = s_bi[t + s];
      acc = s_acc[t]; bi = s_bi[t];
      {merge}
      s_acc[t] = acc; s_bi[t] = bi;
    }}
    {sync}
  }}
  if (t == 0) {{ acc = s_acc[0]; bi = s_bi[0]; y[o] = {fin}; }}
}}""", f"if (rows > 0) reduce_block<<<rows, 256, 0, stream>>>({call});")
        impls.append(("block_per_row", ["smem_tiled", "coalesced"], block_tree(True)))
        if p["wrong"]:
            impls.append(("block_per_row_nosync", ["smem_tiled"], block_tree(False), {"defect": "missing_barrier"}))
        if p["wrong"] and op in ("sum", "mean", "l1", "l2", "sumsq"):
            # the legacy "warp-synchronous" last steps: no barrier, no volatile, no __syncwarp: a data race
            last = "\n    ".join(f"s_acc[t] = s_acc[t] + s_acc[t + {k}];" for k in (32, 16, 8, 4, 2, 1))
            impls.append(("block_per_row_warp_race", ["smem_tiled", "unrolled"], lambda proto: B.cuda_unit(proto, f"""
__global__ void reduce_block_race({kargs}) {{
  __shared__ {T} s_acc[256];
  int o = blockIdx.x;
  int t = threadIdx.x;
  {T} acc = {init}; int bi = cols; (void)bi;
  for (int j = t; j < cols; j += blockDim.x) {{
    {T} v = x[{xi}];
    v = {pre_e};
    {acc}
  }}
  s_acc[t] = acc;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 32; s /= 2) {{
    if (t < s) s_acc[t] = s_acc[t] + s_acc[t + s];
    __syncthreads();
  }}
  if (t < 32) {{
    {last}
  }}
  if (t == 0) {{ acc = s_acc[0]; y[o] = {fin}; }}
}}""", f"if (rows > 0) reduce_block_race<<<rows, 256, 0, stream>>>({call});"), {"defect": "race"}))
    else:
        impls.append(("tiled_32x8", ["smem_tiled", "coalesced"], lambda proto: B.cuda_unit(proto, f"""
__global__ void reduce_cols({kargs}) {{
  __shared__ {T} s_acc[8][33];
  __shared__ int s_bi[8][33];
  int o = blockIdx.x * 32 + threadIdx.x;
  {T} acc = {init}; int bi = rows;
  if (o < cols) {{
    for (int j = threadIdx.y; j < rows; j += 8) {{
      {T} v = x[{xi}];
      v = {pre_e};
      {acc}
    }}
  }}
  s_acc[threadIdx.y][threadIdx.x] = acc; s_bi[threadIdx.y][threadIdx.x] = bi;
  __syncthreads();
  if (threadIdx.y == 0 && o < cols) {{
    for (int r = 1; r < 8; ++r) {{
      {T} acc2 = s_acc[r][threadIdx.x]; int bi2 = s_bi[r][threadIdx.x];
      {merge}
    }}
    y[o] = {fin};
  }}
}}""", "reduce_cols<<<(cols + 31) / 32, dim3(32, 8), 0, stream>>>(" + call + ");")))
        impls.append(("unrolled4", ["unrolled", "coalesced"], lambda proto: B.cuda_unit(proto, f"""
__global__ void reduce_cols_unrolled({kargs}) {{
  int o = blockIdx.x * blockDim.x + threadIdx.x;
  if (o >= cols) return;
  {T} acc = {init}; {bi_decl}
  int j = 0;
  for (; j + 3 < rows; j += 4) {{
#pragma unroll
    for (int u = 0; u < 4; ++u) {{
      {T} v = x[(long long)(j + u) * ld + o];
      v = {pre_e};
      {acc.replace("bi = j", "bi = j + u")}
    }}
  }}
  for (; j < rows; ++j) {{
    {T} v = x[{xi}];
    v = {pre_e};
    {acc}
  }}
  y[o] = {fin};
}}""", f"reduce_cols_unrolled<<<{B.grid1d('cols', 128)}, 128, 0, stream>>>({call});")))
        if p["wrong"]:
            # the last output column is never written (dropping the last row would go unseen for max/min)
            impls.append(B.mutant(impls[0], "if (o >= cols) return;", "if (o >= cols - 1) return;", "off_by_one",
                                  name="naive_off_by_one"))
    r_, c_ = p["odd"]
    P = p["pad"]
    if p["regime"] == "tall":
        configs = B.configs3({"R": 64 + r_, "C": 16 + c_, "P": P}, {"R": 16384 + r_, "C": 64 + c_, "P": P},
                             {"R": 262144 + r_, "C": 128 + c_, "P": P})
    else:
        configs = B.configs3({"R": 8 + r_, "C": 256 + c_, "P": P}, {"R": 256 + r_, "C": 8192 + c_, "P": P},
                             {"R": 2048 + r_, "C": 16384 + c_, "P": P})
    if op in ("sum", "l1", "sumsq"):  # the output is a sum of R (axis 0) or C (axis 1) terms
        rms = TERM_RMS[{"l1": "abs", "sumsq": "square"}.get(op, pre)]
        tol = B.sum_tolerance(dt, 10, "R" if axis == 0 else "C", rms)
    else:  # max/min/arg: exact; mean, l2: a sum's rounding error divided by R or under a square root
        tol = B.tolerance(dt, 1 if op in ("max", "min") else 10)
    return B.make_task(tid=p["name"], track="c2cuda", entry=entry, source=source, signature=sig,
                       configs=configs, tol=tol, flops="2*R*C",
                       min_bytes=f"{B.DTYPES_BYTES[dt]}*R*C", family="reduction", impls=impls)
