"""Row-wise CUDA kernels for the torch2cuda families (reductions, softmax, normalisations over the
last axis of a [rows, cols] float32 tensor), in three strategies from one description.

A row program is a list of reduction passes [(name, op, expr)] (op in sum|max|min; expr a float
expression of `v`, the pre-chain value of the element at column j, and of earlier names) and a final
step: ("row", expr) writes out[r] = expr, ("elem", expr) writes out[r, j] = expr for every column.
Strategies: naive (one thread per row), warp (one warp per row, xor-shuffle reductions), block
(256 threads per row, shuffle + shared-memory reductions).
"""
from __future__ import annotations

_INIT = {"sum": "0.0f", "max": "-INFINITY", "min": "INFINITY"}
_COMB = {"sum": "{a} + {b}", "max": "fmaxf({a}, {b})", "min": "fminf({a}, {b})"}

HELPERS = """
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_min(float v) {
  for (int o = 16; o > 0; o /= 2) v = fminf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
"""

BLOCK_HELPERS = """
template <int OP>
__device__ float block_reduce(float v, float* red) {
  int lane = threadIdx.x % 32, wid = threadIdx.x / 32, nw = (blockDim.x + 31) / 32;
  v = OP == 0 ? warp_sum(v) : (OP == 1 ? warp_max(v) : warp_min(v));
  if (lane == 0) red[wid] = v;
  __syncthreads();
  if (wid == 0) {
    float t = lane < nw ? red[lane] : (OP == 0 ? 0.0f : (OP == 1 ? -INFINITY : INFINITY));
    t = OP == 0 ? warp_sum(t) : (OP == 1 ? warp_max(t) : warp_min(t));
    if (lane == 0) red[32] = t;
  }
  __syncthreads();
  float r = red[32];
  __syncthreads();
  return r;
}
"""
_OPID = {"sum": 0, "max": 1, "min": 2}


def row_kernel(strategy: str, kargs: str, load: str, passes, final, rows: str = "rows",
               cols: str = "cols", out: str = "out") -> tuple[str, str]:
    """(kernel source, launch statement) of `row_<strategy>`.

    load: C expression of the element value v at (xr, j) (e.g. the pre-chain applied to xr[j]).
    """
    red_lines, write = [], ""
    if strategy == "naive":
        head = f"int r = blockIdx.x * blockDim.x + threadIdx.x;\n  if (r >= {rows}) return;"
        for name, op, expr in passes:
            red_lines.append(f"float {name} = {_INIT[op]};\n  for (int j = 0; j < {cols}; ++j) {{ float v = {load}; "
                             f"{name} = {_COMB[op].format(a=name, b=expr)}; }}")
        jloop, guard = f"for (int j = 0; j < {cols}; ++j)", ""
        launch = f"row_naive<<<({rows} + 127) / 128, 128, 0, stream>>>"
    elif strategy == "warp":
        head = (f"int r = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;\n"
                f"  if (r >= {rows}) return;")
        for name, op, expr in passes:
            red_lines.append(f"float {name} = {_INIT[op]};\n  for (int j = lane; j < {cols}; j += 32) {{ float v = {load}; "
                             f"{name} = {_COMB[op].format(a=name, b=expr)}; }}\n  {name} = warp_{op}({name});")
        jloop, guard = f"for (int j = lane; j < {cols}; j += 32)", "if (lane == 0) "
        launch = f"row_warp<<<(int)(((long long){rows} * 32 + 255) / 256), 256, 0, stream>>>"
    elif strategy == "block":
        head = "__shared__ float red[33];\n  int r = blockIdx.x;"
        for name, op, expr in passes:
            red_lines.append(f"float {name} = {_INIT[op]};\n  for (int j = threadIdx.x; j < {cols}; j += blockDim.x) "
                             f"{{ float v = {load}; {name} = {_COMB[op].format(a=name, b=expr)}; }}\n"
                             f"  {name} = block_reduce<{_OPID[op]}>({name}, red);")
        jloop, guard = f"for (int j = threadIdx.x; j < {cols}; j += blockDim.x)", "if (threadIdx.x == 0) "
        launch = f"if ({rows} > 0) row_block<<<{rows}, 256, 0, stream>>>"
    else:
        raise ValueError(strategy)
    kind, expr = final
    if kind == "row":
        write = f"{guard}{out}[r] = {expr};"
    else:
        write = f"{jloop} {{ float v = {load}; {out}[(long long)r * {cols} + j] = {expr}; }}"
    helpers = HELPERS + (BLOCK_HELPERS if strategy == "block" else "")
    reds = "\n  ".join(red_lines)
    kernel = f"""{helpers}
__global__ void row_{strategy}({kargs}) {{
  {head}
  const float* xr = x + (long long)r * {cols};
  {reds}
  {write}
}}"""
    return kernel, launch
