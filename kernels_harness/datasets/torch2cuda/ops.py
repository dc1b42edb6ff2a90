"""The element-wise operator vocabulary of the torch2cuda generator: each op as a line of PyTorch
forward code and as a CUDA float expression, optionally with a per-feature parameter.

A chain is a list of op dicts {"op": name, "c": constant or None, "param": name or None}. The torch
side applies `x = <expr>` per op; the CUDA side folds `v = <expr>` in a __device__ function
`chain_<tag>(float v, int f, const float* params...)`, where f is the element's feature index.
"""
from __future__ import annotations

import random

# name -> (torch expression of x with {c}/{p}, CUDA expression of v with {c}/{p})
OPS = {
    "relu": ("torch.relu(x)", "fmaxf(v, 0.0f)"),
    "gelu": ("F.gelu(x)", "0.5f * v * (1.0f + erff(v * 0.7071067811865476f))"),
    "gelu_tanh": ("F.gelu(x, approximate='tanh')",
                  "0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)))"),
    "sigmoid": ("torch.sigmoid(x)", "1.0f / (1.0f + expf(-v))"),
    "tanh": ("torch.tanh(x)", "tanhf(v)"),
    "silu": ("F.silu(x)", "v / (1.0f + expf(-v))"),
    "leaky_relu": ("F.leaky_relu(x, {c})", "(v > 0.0f ? v : {c}f * v)"),
    "hardtanh": ("F.hardtanh(x, -{c}, {c})", "fminf(fmaxf(v, -{c}f), {c}f)"),
    "elu": ("F.elu(x)", "(v > 0.0f ? v : expm1f(v))"),
    "softplus": ("F.softplus(x)", "(v > 20.0f ? v : log1pf(expf(v)))"),
    "hardswish": ("F.hardswish(x)", "v * fminf(fmaxf(v + 3.0f, 0.0f), 6.0f) / 6.0f"),
    "mish": ("F.mish(x)", "v * tanhf(v > 20.0f ? v : log1pf(expf(v)))"),
    "scale": ("x * {c}", "v * {c}f"),
    "shift": ("x + {c}", "v + {c}f"),
    "square": ("x * x", "v * v"),
    "abs": ("torch.abs(x)", "fabsf(v)"),
    "clamp": ("torch.clamp(x, min=-{c}, max={c})", "fminf(fmaxf(v, -{c}f), {c}f)"),
    "bias": ("x + self.{p}", "v + {p}[f]"),
    "gamma": ("x * self.{p}", "v * {p}[f]"),
}
CONSTS = {"leaky_relu": (0.01, 0.1, 0.2), "hardtanh": (0.5, 1.0, 2.0), "scale": (0.5, 2.0, 1.5, -1.0),
          "shift": (0.1, -0.5, 1.0), "clamp": (0.5, 1.0, 3.0)}
PARAM_OPS = ("bias", "gamma")


# Op sets that keep a following reduction or a preceding softmax informative (no saturation to a constant)
MONOTONE = ("scale", "shift", "bias", "gamma", "leaky_relu")
NON_SATURATING = tuple(k for k in OPS if k not in ("clamp", "hardtanh", "sigmoid", "tanh"))
AFTER_SOFTMAX = ("scale", "leaky_relu", "abs", "gamma")              # values in (0, 1e-2]
AFTER_LOG_SOFTMAX = ("scale", "shift", "abs", "square", "gamma", "bias", "leaky_relu")  # values around -7


def random_chain(rng: random.Random, length: int, allow_params: bool = True, only=None) -> list[dict]:
    """A chain of `length` ops (drawn from `only` if given); parameter ops get fresh names bias0, gamma1, ..."""
    names = sorted(only or OPS)
    if not allow_params:
        names = [k for k in names if k not in PARAM_OPS]
    chain, n_params = [], 0
    for _ in range(length):
        op = rng.choice(names)
        item = {"op": op, "c": rng.choice(CONSTS[op]) if op in CONSTS else None, "param": None}
        if op in PARAM_OPS:
            item["param"] = f"{op}{n_params}"
            n_params += 1
        chain.append(item)
    return chain


def chain_params(chain) -> list[str]:
    return [it["param"] for it in chain if it["param"]]


def torch_lines(chain, indent: str = "        ") -> str:
    lines = []
    for it in chain:
        expr = OPS[it["op"]][0].format(c=it["c"], p=it["param"])
        lines.append(f"{indent}x = {expr}")
    return "\n".join(lines)


def torch_param_lines(chain, shape: str, indent: str = "        ") -> str:
    """__init__ lines creating the chain's parameters with the given shape expression."""
    out = []
    for it in chain:
        if it["param"]:
            init = "torch.randn" if it["op"] == "bias" else "1.0 + 0.1 * torch.randn"
            out.append(f"{indent}self.{it['param']} = nn.Parameter({init}({shape}))")
    return "\n".join(out)


def cuda_chain(chain, tag: str) -> str:
    """`__device__ float chain_<tag>(float v, int f, const float* p...)` applying the chain."""
    params = "".join(f", const float* {p}" for p in chain_params(chain))
    body = "\n".join(f"  v = {OPS[it['op']][1].format(c=it['c'], p=it['param'])};" for it in chain)
    return (f"__device__ __forceinline__ float chain_{tag}(float v, int f{params}) {{\n"
            f"  (void)f;\n{body}\n  return v;\n}}")


def cuda_call(chain, tag: str, v: str, f: str) -> str:
    args = "".join(f", {p}" for p in chain_params(chain))
    return f"chain_{tag}({v}, {f}{args})"


def describe(chain) -> str:
    return "_".join(it["op"] for it in chain) or "none"
