"""torch2cuda families: PyTorch modules in the KernelBench layout (Model, size constants,
get_inputs, get_init_inputs) with CUDA implementations in the solution ABI.

Families: elementwise_chain (1-5 fused element-wise ops, some with per-feature parameters),
reduction_chain (0-3 ops then sum/mean/amax/amin/logsumexp/L2 norm over the last axis), softmax
(softmax / log_softmax between op chains), normalization (LayerNorm / RMSNorm then ops),
linear_epilogue (nn.Linear then ops), conv_epilogue (nn.Conv2d then ops). All float32.

Signature order (docs/torch2cuda_tasks.md): forward inputs, parameters in named_parameters() order
(the module's own, then its children's), outputs, then the size constants as int scalars (their
values come from the config), so that a solution knows the shapes.
"""
from __future__ import annotations

import json
import random

from kernels_harness.datasets import base as B
from kernels_harness.datasets.c2cuda import blas
from kernels_harness.datasets.torch2cuda import ops as O
from kernels_harness.datasets.torch2cuda import rows as R
from kernels_harness.tasks.schema import Arg

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"


def _module(doc, init_params, init_lines, fwd_args, fwd_lines, consts, inputs, init_values):
    init_sig = ", ".join(["self"] + [f"{n}: int" for n in init_params])
    body = "\n".join(ln for ln in init_lines if ln.strip()) or ""
    consts_text = "\n".join(f"{k} = {v}" for k, v in consts.items())
    return (f"{HEADER}\n\nclass Model(nn.Module):\n    \"\"\"{doc}\"\"\"\n\n"
            f"    def __init__({init_sig}):\n        super().__init__()\n{body}\n\n"
            f"    def forward(self, {', '.join(a + ': torch.Tensor' for a in fwd_args)}) -> torch.Tensor:\n"
            f"{fwd_lines}\n        return x\n\n\n{consts_text}\n\n\n"
            f"def get_inputs():\n    return [{', '.join(inputs)}]\n\n\n"
            f"def get_init_inputs():\n    return [{', '.join(init_values)}]\n")


def _param_args(chain, shape) -> list[Arg]:
    return [Arg(p, "in", "float32", shape=tuple(shape), torch_name=p) for p in O.chain_params(chain)]


def _sizes(rng: random.Random, kind: str) -> list[dict]:
    """Three configs of batch/features: tiny, medium, large (the large one fills an H200 for tens of us)."""
    f_small = rng.choice((32, 48, 64, 100, 128))
    f_med = rng.choice((512, 768, 1024, 2048))
    f_big = rng.choice((2048, 4096, 8192))
    b_big = (1 << 25) // f_big
    return [{"batch": rng.choice((4, 8, 16)), "features": f_small},
            {"batch": rng.choice((256, 512, 1024)), "features": f_med},
            {"batch": b_big, "features": f_big}]


def _task(p, family, entry, source, sig, configs, consts, tol, flops, min_bytes, impls):
    return B.make_task(tid=p["name"], track="torch2cuda", entry=entry, source=source, signature=sig,
                       configs=B.configs3(*configs), tol=tol, flops=flops, min_bytes=min_bytes, family=family,
                       impls=impls, extra={"constants": list(consts)})


# ---- elementwise_chain -------------------------------------------------------------------------
def elementwise_variants(rng: random.Random) -> list[dict]:
    out, seen = [], set()
    while len(out) < 300:
        chain = O.random_chain(rng, rng.choice((1, 1, 2, 2, 3, 3, 4, 5)))
        key = json.dumps(chain)
        if key in seen:
            continue
        seen.add(key)
        out.append({"chain": chain, "sizes": _sizes(rng, "ew"),
                    "name": B.slug("t_ew", len(out), O.describe(chain))})
    return out


def elementwise_build(p: dict):
    chain = p["chain"]
    consts = {"batch": p["sizes"][1]["batch"], "features": p["sizes"][1]["features"]}
    src = _module(f"Element-wise chain: {O.describe(chain)}.", ["features"],
                  [O.torch_param_lines(chain, "features")], ["x"], O.torch_lines(chain), consts,
                  ["torch.randn(batch, features)"], ["features"])
    sig = ([B.inp("x", "float32", ["batch", "features"])] + _param_args(chain, ["features"])
           + [B.out("out", "float32", ["batch", "features"]), B.scalar("batch", "int32", "batch"),
              B.scalar("features", "int32", "features")])
    kargs = B.params_list(sig)
    call = ", ".join(a.name for a in sig)
    dev = O.cuda_chain(chain, "ew")
    elem = f"out[i] = {O.cuda_call(chain, 'ew', 'x[i]', '(int)(i % features)')};"
    total = "(long long)batch * features"
    naive = lambda proto: B.cuda_unit(proto, f"""{dev}
__global__ void ew_naive({kargs}) {{
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < {total}) {elem}
}}""", f"if ({total} > 0) ew_naive<<<{B.grid1d(total)}, 256, 0, stream>>>({call});")
    grid = lambda proto: B.cuda_unit(proto, f"""{dev}
__global__ void ew_grid({kargs}) {{
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < {total}; i += (long long)gridDim.x * blockDim.x) {elem}
}}""", f"if ({total} > 0) ew_grid<<<{B.grid1d(total, 256, '2048')}, 256, 0, stream>>>({call});")
    comps = " ".join(f"r.{c} = {O.cuda_call(chain, 'ew', f'a.{c}', f'(int)((4 * j + {k}) % features)')};"
                     for k, c in enumerate("xyzw"))
    vec = lambda proto: B.cuda_unit(proto, f"""{dev}
__global__ void ew_vec4({kargs}) {{
  long long total = {total}, n4 = total / 4;
  long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (j < n4) {{
    float4 a = reinterpret_cast<const float4*>(x)[j];
    float4 r;
    {comps}
    reinterpret_cast<float4*>(out)[j] = r;
  }}
  if (j < total - n4 * 4) {{ long long i = n4 * 4 + j; {elem} }}
}}""", f"if ({total} > 0) ew_vec4<<<{B.grid1d(f'{total} / 4 + 4')}, 256, 0, stream>>>({call});")
    impls = [("naive", ["naive", "coalesced"], naive, {"baseline": True}),
             ("grid_stride", ["grid_stride", "coalesced"], grid), ("vectorized", ["vectorized", "coalesced"], vec)]
    if B.wrong_for(p["name"]):
        impls.append(B.mutant(impls[2], "if (j < n4) {", "if (j < n4 - 1) {", "off_by_one"))
    return _task(p, "elementwise_chain", "fused_" + B.slug(p["name"].split("_", 3)[-1])[:40].lower(), src, sig,
                 p["sizes"], consts, {"atol": 1e-5, "rtol": 1e-4}, f"{4 * len(chain)}*batch*features",
                 "8*batch*features", impls)


# ---- reduction_chain / softmax / normalization: row programs -----------------------------------
REDUCTIONS = {
    "sum": ("x.sum(dim=-1)", [("s", "sum", "v")], "s"),
    "mean": ("x.mean(dim=-1)", [("s", "sum", "v")], "s / (float)features"),
    "amax": ("x.amax(dim=-1)", [("m", "max", "v")], "m"),
    "amin": ("x.amin(dim=-1)", [("m", "min", "v")], "m"),
    "logsumexp": ("torch.logsumexp(x, dim=-1)", [("m", "max", "v"), ("s", "sum", "expf(v - m)")], "m + logf(s)"),
    "l2norm": ("torch.linalg.vector_norm(x, dim=-1)", [("s", "sum", "v * v")], "sqrtf(s)"),
}


def row_variants(kind: str):
    def variants(rng: random.Random) -> list[dict]:
        out, seen = [], set()
        n = {"reduction": 216, "softmax": 150, "norm": 150}[kind]
        while len(out) < n:
            i = len(out)
            if kind == "reduction":
                op = sorted(REDUCTIONS)[i % len(REDUCTIONS)]
                ops = O.MONOTONE if op in ("amax", "amin") else O.NON_SATURATING
                pre, post = O.random_chain(rng, rng.choice((0, 1, 1, 2, 3)), only=ops), []
            elif kind == "softmax":
                op = ("softmax", "log_softmax")[i % 2]
                after = O.AFTER_SOFTMAX if op == "softmax" else O.AFTER_LOG_SOFTMAX
                pre, post = O.random_chain(rng, rng.choice((0, 1, 2))), O.random_chain(rng, rng.choice((0, 1, 2)), only=after)
                post = [dict(it, param=it["param"].replace("bias", "pbias").replace("gamma", "pgamma")) if it["param"]
                        else it for it in post]
            else:
                op = ("layernorm", "rmsnorm")[i % 2]
                pre, post = [], O.random_chain(rng, rng.choice((0, 1, 2, 3)))
            key = json.dumps([op, pre, post])
            if key in seen:
                continue
            seen.add(key)
            out.append({"kind": kind, "op": op, "pre": pre, "post": post, "sizes": _sizes(rng, kind),
                        "name": B.slug("t_" + kind, i, O.describe(pre), op, O.describe(post))})
        return out
    return variants


def row_build(p: dict):
    kind, op, pre, post = p["kind"], p["op"], p["pre"], p["post"]
    consts = {"batch": p["sizes"][1]["batch"], "features": p["sizes"][1]["features"]}
    chain_all = pre + post
    init_lines = [O.torch_param_lines(chain_all, "features")]
    fwd = O.torch_lines(pre)
    norm_args: list[Arg] = []
    if kind == "reduction":
        fwd += ("\n" if fwd else "") + f"        x = {REDUCTIONS[op][0]}"
        out_shape = ["batch"]
    elif kind == "softmax":
        fwd += ("\n" if fwd else "") + f"        x = torch.{op}(x, dim=-1)"
        out_shape = ["batch", "features"]
    else:
        mod = "nn.LayerNorm(features, eps=1e-5)" if op == "layernorm" else "nn.RMSNorm(features, eps=1e-6)"
        init_lines += [f"        self.norm = {mod}", "        with torch.no_grad():",
                       "            self.norm.weight.normal_(1.0, 0.1)"]
        norm_args = [Arg("norm_weight", "in", "float32", shape=("features",), torch_name="norm.weight")]
        if op == "layernorm":
            init_lines.append("            self.norm.bias.normal_(0.0, 0.1)")
            norm_args.append(Arg("norm_bias", "in", "float32", shape=("features",), torch_name="norm.bias"))
        fwd = "        x = self.norm(x)"
        out_shape = ["batch", "features"]
    if post:
        fwd += "\n" + O.torch_lines(post)
    src = _module(f"{O.describe(pre)} -> {op} -> {O.describe(post)} over the last axis.", ["features"],
                  init_lines, ["x"], fwd, consts, ["torch.randn(batch, features)"], ["features"])
    sig = ([B.inp("x", "float32", ["batch", "features"])] + _param_args(chain_all, ["features"]) + norm_args
           + [B.out("out", "float32", out_shape), B.scalar("batch", "int32", "batch"),
              B.scalar("features", "int32", "features")])
    kargs = B.params_list(sig)
    call = ", ".join(a.name for a in sig)
    dev = (O.cuda_chain(pre, "pre") + "\n" + O.cuda_chain(post, "post"))
    load = O.cuda_call(pre, "pre", "xr[j]", "j")
    if kind == "reduction":
        passes, final = REDUCTIONS[op][1], ("row", REDUCTIONS[op][2])
    elif kind == "softmax":
        passes = [("m", "max", "v"), ("s", "sum", "expf(v - m)")]
        val = "expf(v - m) / s" if op == "softmax" else "v - m - logf(s)"
        final = ("elem", O.cuda_call(post, "post", val, "j"))
    elif op == "layernorm":
        passes = [("s", "sum", "v"), ("q", "sum", "(v - s / (float)features) * (v - s / (float)features)")]
        val = "(v - s / (float)features) / sqrtf(q / (float)features + 1e-5f) * norm_weight[j] + norm_bias[j]"
        final = ("elem", O.cuda_call(post, "post", val, "j"))
    else:
        passes = [("q", "sum", "v * v")]
        final = ("elem", O.cuda_call(post, "post", "v / sqrtf(q / (float)features + 1e-6f) * norm_weight[j]", "j"))
    impls = []
    for strat, tags in (("naive", ["naive"]), ("warp", ["warp_shuffle", "coalesced"]),
                        ("block", ["smem_tiled", "warp_shuffle", "coalesced"])):
        kern, launch = R.row_kernel(strat, kargs, load, passes, final, rows="batch", cols="features")
        impls.append((strat, tags, B.unit_fn(dev + "\n" + kern, f"{launch}({call});"), {"baseline": strat == "naive"}))
    if B.wrong_for(p["name"]):
        impls.append(B.mutant(impls[0], "if (r >= batch) return;", "if (r >= batch - 1) return;", "off_by_one"))
    fam = {"reduction": "reduction_chain", "softmax": "softmax", "norm": "normalization"}[kind]
    tol = {"reduction": {"atol": 1e-3, "rtol": 1e-4}, "softmax": {"atol": 1e-5, "rtol": 1e-3},
           "norm": {"atol": 1e-4, "rtol": 1e-3}}[kind]
    return _task(p, fam, B.slug(op, O.describe(pre)[:20], O.describe(post)[:20]).lower(), src, sig, p["sizes"],
                 consts, tol, f"{5 + 4 * len(chain_all)}*batch*features", "8*batch*features", impls)


# ---- linear_epilogue ----------------------------------------------------------------------------
def linear_variants(rng: random.Random) -> list[dict]:
    out = []
    for i in range(150):
        chain = O.random_chain(rng, rng.choice((0, 1, 1, 2, 3)))
        sizes = [{"batch": rng.choice((2, 4, 8)), "in_features": rng.choice((16, 32, 48)), "out_features": rng.choice((8, 16, 40))},
                 {"batch": rng.choice((128, 256)), "in_features": rng.choice((512, 1024)), "out_features": rng.choice((256, 1024))},
                 {"batch": rng.choice((1024, 2048)), "in_features": rng.choice((1024, 2048)), "out_features": rng.choice((1024, 2048))}]
        out.append({"chain": chain, "bias": i % 3 != 2, "sizes": sizes,
                    "name": B.slug("t_linear", i, "bias" if i % 3 != 2 else "nobias", O.describe(chain))})
    return out


def linear_build(p: dict):
    chain, has_bias = p["chain"], p["bias"]
    consts = {k: p["sizes"][1][k] for k in ("batch", "in_features", "out_features")}
    init_lines = [O.torch_param_lines(chain, "out_features"),
                  f"        self.linear = nn.Linear(in_features, out_features, bias={has_bias})"]
    fwd = "        x = self.linear(x)" + ("\n" + O.torch_lines(chain) if chain else "")
    src = _module(f"Linear ({'with' if has_bias else 'no'} bias) then {O.describe(chain)}.",
                  ["in_features", "out_features"], init_lines, ["x"], fwd, consts,
                  ["torch.randn(batch, in_features)"], ["in_features", "out_features"])
    sig = [B.inp("x", "float32", ["batch", "in_features"])] + _param_args(chain, ["out_features"])
    sig.append(Arg("linear_weight", "in", "float32", shape=("out_features", "in_features"), torch_name="linear.weight"))
    if has_bias:
        sig.append(Arg("linear_bias", "in", "float32", shape=("out_features",), torch_name="linear.bias"))
    sig += [B.out("out", "float32", ["batch", "out_features"]), B.scalar("batch", "int32", "batch"),
            B.scalar("in_features", "int32", "in_features"), B.scalar("out_features", "int32", "out_features")]
    kargs = B.params_list(sig)
    call = ", ".join(a.name for a in sig)
    dev = O.cuda_chain(chain, "epi")
    bias_e = " + linear_bias[o]" if has_bias else ""
    naive = lambda proto: B.cuda_unit(proto, f"""{dev}
__global__ void linear_naive({kargs}) {{
  int o = blockIdx.x * blockDim.x + threadIdx.x, b = blockIdx.y;
  if (o >= out_features) return;
  float s = 0.0f;
  for (int k = 0; k < in_features; ++k) s += x[(long long)b * in_features + k] * linear_weight[(long long)o * in_features + k];
  out[(long long)b * out_features + o] = {O.cuda_call(chain, 'epi', 's' + bias_e, 'o')};
}}""", f"if (batch > 0 && out_features > 0) linear_naive<<<dim3((out_features + 127) / 128, batch), 128, 0, stream>>>({call});")
    epi = f"""
__global__ void epilogue({kargs}) {{
  long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= (long long)batch * out_features) return;
  int o = (int)(e % out_features);
  out[e] = {O.cuda_call(chain, 'epi', 'out[e]' + bias_e, 'o')};
}}"""
    epi_launch = f"epilogue<<<{B.grid1d('(long long)batch * out_features')}, 256, 0, stream>>>({call});"
    impls = [("naive_fused", ["naive"], naive, {"baseline": True})]
    for strat, tags in (("smem_tiled", ["smem_tiled", "coalesced"]), ("register_blocked", ["register_blocked", "smem_tiled"])):
        kern = blas.gemm_kernel(strat, "float", False, True, strat)
        body = (f"launch_gemm_{strat}(batch, out_features, in_features, 1.0f, 0.0f, 0, 0, x, in_features, "
                f"linear_weight, in_features, out, out_features, stream);\n"
                f"if ((long long)batch * out_features > 0) {epi_launch}")
        impls.append((strat + "_epilogue", tags, B.unit_fn(dev + kern + epi, body)))
    if B.wrong_for(p["name"]):
        impls.append(B.mutant(impls[0], "k < in_features; ++k)", "k < in_features - 1; ++k)", "off_by_one"))
    return _task(p, "linear_epilogue", B.slug("linear", O.describe(chain)[:30]).lower(), src, sig, p["sizes"], consts,
                 {"atol": 1e-3, "rtol": 1e-3}, "2*batch*in_features*out_features",
                 "4*(batch*in_features+in_features*out_features+batch*out_features)", impls)


# ---- conv_epilogue ------------------------------------------------------------------------------
def conv_variants(rng: random.Random) -> list[dict]:
    out = []
    for i in range(150):
        k = (1, 3, 3, 5)[i % 4]
        pad = rng.choice((0, k // 2))
        chain = O.random_chain(rng, rng.choice((0, 1, 1, 2)))
        sizes = [{"batch": 1, "cin": rng.choice((1, 3)), "cout": rng.choice((4, 8)), "height": 8 + rng.randrange(4),
                  "width": 9 + rng.randrange(4)},
                 {"batch": 4, "cin": rng.choice((3, 16)), "cout": rng.choice((16, 32)), "height": 32, "width": 32},
                 {"batch": rng.choice((16, 32)), "cin": rng.choice((16, 32)), "cout": rng.choice((32, 64)),
                  "height": rng.choice((64, 96)), "width": rng.choice((64, 96))}]
        out.append({"chain": chain, "K": k, "pad": pad, "sizes": sizes,
                    "name": B.slug("t_conv", i, f"k{k}", f"p{pad}", O.describe(chain))})
    return out


def conv_build(p: dict):
    chain, K, P = p["chain"], p["K"], p["pad"]
    consts = {k: p["sizes"][1][k] for k in ("batch", "cin", "cout", "height", "width")}
    d = 2 * P - K + 1
    oh = "height" + (f"+{d}" if d > 0 else (f"-{-d}" if d < 0 else ""))
    ow = "width" + (f"+{d}" if d > 0 else (f"-{-d}" if d < 0 else ""))
    init_lines = [O.torch_param_lines(chain, "cout, 1, 1"),
                  f"        self.conv = nn.Conv2d(cin, cout, {K}, padding={P})"]
    fwd = "        x = self.conv(x)" + ("\n" + O.torch_lines(chain) if chain else "")
    src = _module(f"Conv2d {K}x{K} (padding {P}) then {O.describe(chain)}.", ["cin", "cout"], init_lines, ["x"], fwd,
                  consts, ["torch.randn(batch, cin, height, width)"], ["cin", "cout"])
    sig = ([B.inp("x", "float32", ["batch", "cin", "height", "width"])] + _param_args(chain, ["cout", 1, 1])
           + [Arg("conv_weight", "in", "float32", shape=("cout", "cin", K, K), torch_name="conv.weight"),
              Arg("conv_bias", "in", "float32", shape=("cout",), torch_name="conv.bias"),
              B.out("out", "float32", ["batch", "cout", oh, ow])]
           + [B.scalar(n, "int32", n) for n in ("batch", "cin", "cout", "height", "width")])
    kargs = B.params_list(sig)
    call = ", ".join(a.name for a in sig)
    dev = O.cuda_chain(chain, "epi")
    pix_decl = f"const int oh = height + {d}, ow = width + {d};"

    def body(filt: str, unroll: bool) -> str:
        pr = "#pragma unroll\n" if unroll else ""
        return f"""float s = conv_bias[c];
  for (int q = 0; q < cin; ++q) {{
    const float* plane = x + ((long long)b * cin + q) * height * width;
    const float* fw = {filt};
{pr}    for (int ky = 0; ky < {K}; ++ky) {{
{pr}      for (int kx = 0; kx < {K}; ++kx) {{
        int iy = oy + ky - {P}, ix = ox + kx - {P};
        if (iy >= 0 && iy < height && ix >= 0 && ix < width) s += plane[(long long)iy * width + ix] * fw[ky * {K} + kx];
      }}
    }}
  }}
  out[(((long long)b * cout + c) * oh + oy) * ow + ox] = {O.cuda_call(chain, 'epi', 's', 'c')};"""
    flat_decode = ("long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
                   "  if (e >= (long long)batch * cout * oh * ow) return;\n"
                   "  int ox = (int)(e % ow), oy = (int)((e / ow) % oh), c = (int)((e / ((long long)ow * oh)) % cout), "
                   "b = (int)(e / ((long long)ow * oh * cout));")
    total = f"(long long)batch * cout * (height + {d}) * (width + {d})"
    filt_g = f"conv_weight + ((long long)c * cin + q) * {K * K}"

    def flat(name, unroll):
        return lambda proto: B.cuda_unit(proto, f"""{dev}
__global__ void {name}({kargs}) {{
  {pix_decl}
  {flat_decode}
  {body(filt_g, unroll)}
}}""", f"if ({total} > 0) {name}<<<{B.grid1d(total)}, 256, 0, stream>>>({call});")
    smem = lambda proto: B.cuda_unit(proto, f"""{dev}
__global__ void conv_smem({kargs}) {{
  extern __shared__ float ws[];
  {pix_decl}
  int c = blockIdx.y, b = blockIdx.z;
  for (int t = threadIdx.x; t < cin * {K * K}; t += blockDim.x) ws[t] = conv_weight[(long long)c * cin * {K * K} + t];
  __syncthreads();
  long long pix = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (pix >= (long long)oh * ow) return;
  int ox = (int)(pix % ow), oy = (int)(pix / ow);
  {body(f"ws + q * {K * K}", False)}
}}""", f"if ({total} > 0) conv_smem<<<dim3((unsigned)(((long long)(height + {d}) * (width + {d}) + 255) / 256), cout, batch), 256, "
            f"sizeof(float) * cin * {K * K}, stream>>>({call});")
    impls = [("naive", ["naive", "coalesced"], flat("conv_naive", False), {"baseline": True}),
             ("unrolled", ["unrolled", "coalesced"], flat("conv_unrolled", True)),
             ("smem_filter", ["smem_tiled"], smem)]
    if B.wrong_for(p["name"]):
        impls.append(B.mutant(impls[0], f"kx < {K}; ++kx)", f"kx < {K} - 1; ++kx)", "off_by_one"))
    return _task(p, "conv_epilogue", B.slug("conv", f"k{K}", O.describe(chain)[:30]).lower(), src, sig, p["sizes"], consts,
                 {"atol": 1e-3, "rtol": 1e-3}, f"2*batch*cout*cin*{K * K}*height*width",
                 "4*batch*(cin+cout)*height*width", impls)
