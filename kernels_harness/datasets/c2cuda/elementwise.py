"""c2cuda family `elementwise`: maps and their compositions, y[i] = f_k(...f_1(x[i*S])) (op z[i]).

Variety: the op chain (1-3 of 20 unary ops), the form (map, map with a second input, in place),
dtype (float32, float64), input stride S (1, 2, 3) and odd lengths (tails at every boundary).
Implementations: naive (baseline), grid_stride, unrolled (4 per thread, coalesced), vectorized
(stride 1 float32 only: float4 with a scalar tail), and labelled off-by-one negatives.
"""
from __future__ import annotations

import random
import re

from kernels_harness.datasets import base as B

# name -> expression of v (and alpha) with {f}(...) for math functions of the dtype and {c}(x) literals
UNARY = {
    "relu": "(v > {c0} ? v : {c0})",
    "abs": "{f}fabs(v)",
    "square": "(v * v)",
    "cube": "(v * v * v)",
    "sigmoid": "({c1} / ({c1} + {f}exp(-v)))",
    "tanh": "{f}tanh(v)",
    "exp": "{f}exp(v)",
    "log1p_abs": "{f}log({c1} + {f}fabs(v))",
    "sqrt_abs": "{f}sqrt({f}fabs(v))",
    "softplus": "{f}log({c1} + {f}exp(v))",
    "sin": "{f}sin(v)",
    "cos": "{f}cos(v)",
    "clamp": "{f}fmin({f}fmax(v, -{half}), {half})",
    "leaky_relu": "(v > {c0} ? v : {leak} * v)",
    "affine": "(alpha * v + {quarter})",
    "inv_quad": "({c1} / ({c1} + v * v))",
    "silu": "(v / ({c1} + {f}exp(-v)))",
    "gelu_tanh": "({half} * v * ({c1} + {f}tanh({gk} * (v + {gc} * v * v * v))))",
    "hardswish": "(v * {f}fmin({f}fmax(v + {c3}, {c0}), {c6}) / {c6})",
    "sign": "(v > {c0} ? {c1} : (v < {c0} ? -{c1} : {c0}))",
}
EVEN = {"abs", "square", "cos", "inv_quad", "sqrt_abs", "log1p_abs"}
COMBINE = {"add": lambda a, b, dt: f"({a} + alpha * {b})",
           "mul": lambda a, b, dt: f"({a} * {b})",
           "max": lambda a, b, dt: f"{B.mathfn('fmax', dt)}({a}, {b})"}


def _expr(op: str, dtype: str) -> str:
    text = UNARY[op]
    consts = {"c0": B.lit(0, dtype), "c1": B.lit(1, dtype), "c3": B.lit(3, dtype), "c6": B.lit(6, dtype),
              "half": B.lit(0.5, dtype), "quarter": B.lit(0.25, dtype), "leak": B.lit(0.01, dtype),
              "gk": B.lit(0.7978845608028654, dtype), "gc": B.lit(0.044715, dtype)}
    out = text.replace("{f}", "@")
    out = out.format(**consts)
    # math functions: name(...) preceded by @ -> the dtype's spelling
    return re.sub(r"@([a-z]+)", lambda m: B.mathfn(m.group(1), dtype), out)


def _chain_fn(chain, dtype: str, qual: str) -> str:
    T = B.ctype(dtype)
    lines = [f"{qual}{T} op_chain({T} v, {T} alpha) {{"]
    for op in chain:
        lines.append(f"  v = {_expr(op, dtype)};")
    lines.append("  return v;\n}")
    return "\n".join(lines)


def variants(rng: random.Random) -> list[dict]:
    ops = sorted(UNARY)
    chains = set()
    while len(chains) < 550:
        k = rng.choice((1, 1, 2, 2, 3))
        chain = tuple(rng.choice(ops) for _ in range(k))
        if "sign" in chain and set(chain[chain.index("sign") + 1:]) & EVEN:
            continue  # sign then an even function: a constant
        chains.add(chain)
    out = []
    for chain in sorted(chains):
        for dtype in ("float32", "float64"):
            form = rng.choice(("map", "map", "add", "mul", "max", "inplace"))
            stride = 1 if form == "inplace" else rng.choice((1, 1, 2, 3))
            out.append({"chain": list(chain), "dtype": dtype, "form": form, "stride": stride,
                        # in place, an untouched element keeps its input, which some chains map to itself
                        "tail": rng.randrange(1, 97), "wrong": rng.random() < 0.25 and form != "inplace"})
    for i, v in enumerate(out):
        v["name"] = B.slug("ew", i, v["form"], "_".join(v["chain"]), v["dtype"], f"s{v['stride']}")
    return out


def build(p: dict):
    dtype, form, S = p["dtype"], p["form"], p["stride"]
    entry = "ew_" + form
    sig = [B.scalar("n", "int32", "N"), B.scalar("alpha", dtype, 0.75)]
    if form == "inplace":
        sig.append(B.inout("y", dtype, ["N"]))
        load, store_to = "y[i]", "y[i]"
    else:
        sig.append(B.scalar("stride", "int32", "S"))
        sig.append(B.inp("x", dtype, ["N*S"]))
        if form != "map":
            sig.append(B.inp("z", dtype, ["N"]))
        sig.append(B.out("y", dtype, ["N"]))
        load, store_to = "x[(long long)i * stride]", "y[i]"

    def value(i_load: str, i: str) -> str:
        v = f"op_chain({i_load}, alpha)"
        return COMBINE[form](v, f"z[{i}]", dtype) if form in COMBINE else v

    body_c = f"for (int i = 0; i < n; ++i)\n  {store_to} = {value(load, 'i')};"
    source = B.c_function(entry, sig, body_c, helpers=_chain_fn(p["chain"], dtype, "static "))
    dev = _chain_fn(p["chain"], dtype, "__device__ __forceinline__ ")
    kargs = ", ".join(B.params_list(sig).split(", "))
    call = ", ".join(a.name for a in sig)
    stmt = f"{store_to} = {value(load, 'i')};"

    def k_naive(bound: str = "n"):
        return lambda proto: B.cuda_unit(proto, f"""
{dev}
__global__ void ew_naive({kargs}) {{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < {bound}) {stmt}
}}""", f"ew_naive<<<{B.grid1d('n')}, 256, 0, stream>>>({call});")

    def k_grid(proto):
        return B.cuda_unit(proto, f"""
{dev}
__global__ void ew_grid({kargs}) {{
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {stmt}
}}""", f"ew_grid<<<{B.grid1d('n', 256, '1184')}, 256, 0, stream>>>({call});")

    def k_unrolled(proto):
        return B.cuda_unit(proto, f"""
{dev}
__global__ void ew_unrolled({kargs}) {{
  int base = blockIdx.x * blockDim.x * 4 + threadIdx.x;
#pragma unroll
  for (int k = 0; k < 4; ++k) {{
    int i = base + k * blockDim.x;
    if (i < n) {stmt}
  }}
}}""", f"ew_unrolled<<<{B.grid1d('n', 1024)}, 256, 0, stream>>>({call});")

    impls = [("naive", ["naive"], k_naive(), {"baseline": True}),
             ("grid_stride", ["grid_stride", "coalesced"], k_grid),
             ("unrolled", ["unrolled", "coalesced"], k_unrolled)]
    if dtype == "float32" and S == 1:
        src_ptr = "y" if form == "inplace" else "x"
        vec_load = "float4 a = reinterpret_cast<const float4*>(" + src_ptr + ")[j];"
        comps = []
        for c in "xyzw":
            v = f"op_chain(a.{c}, alpha)"
            if form in COMBINE:
                v = COMBINE[form](v, f"b.{c}", dtype)
            comps.append(f"r.{c} = {v};")
        zload = "float4 b = reinterpret_cast<const float4*>(z)[j];" if form in COMBINE else ""
        tail = stmt.replace("[(long long)i * stride]", "[i]")
        impls.append(("vectorized", ["vectorized", "coalesced"], lambda proto: B.cuda_unit(proto, f"""
{dev}
__global__ void ew_vec4({kargs}) {{
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  int n4 = n / 4;
  if (j < n4) {{
    {vec_load}
    {zload}
    float4 r;
    {' '.join(comps)}
    reinterpret_cast<float4*>(y)[j] = r;
  }}
  if (j < n - n4 * 4) {{
    int i = n4 * 4 + j;
    {tail}
  }}
}}""", f"ew_vec4<<<{B.grid1d('n / 4 + 4')}, 256, 0, stream>>>({call});")))
    if p["wrong"]:
        impls.append(("naive_off_by_one", ["naive"], k_naive("n - 1"), {"defect": "off_by_one"}))
    t = p["tail"]
    configs = B.configs3({"N": 1000 + t, "S": S}, {"N": 262144 + t, "S": S}, {"N": 16777216 + t, "S": S})
    nbytes = B.DTYPES_BYTES[dtype]
    n_in = 1 if form in ("map", "inplace") else 2
    return B.make_task(tid=p["name"], track="c2cuda", entry=entry, source=source, signature=sig,
                       configs=configs, tol=B.tolerance(dtype), flops=f"{4 * len(p['chain']) + 1}*N",
                       min_bytes=f"{(n_in + 1) * nbytes}*N", family="elementwise", impls=impls)
