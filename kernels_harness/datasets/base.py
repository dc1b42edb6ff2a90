"""Building blocks of the task generators: families, argument helpers, C/CUDA code helpers.

A Family enumerates parameter dicts (`variants(rng)`) and turns one into a Task (`build(params)`).
Everything is deterministic: the only randomness is `random.Random(f"{seed}:{family}")`, whose
string seeding is stable across processes and Python hash seeds.
"""
from __future__ import annotations

import dataclasses
import random
import re
from collections.abc import Callable

from kernels_harness.tasks.schema import Arg, Implementation, Task

FLOAT_DTYPES = ("float32", "float64")
C_NAME = {"float32": "float", "float64": "double", "int32": "int", "int64": "long long",
          "uint8": "uint8_t", "int16": "int16_t", "uint32": "unsigned int", "int8": "int8_t"}
DTYPES_BYTES = {"float32": 4, "float64": 8, "int32": 4, "int64": 8, "uint8": 1, "int16": 2,
                "uint32": 4, "int8": 1}
TOLERANCE = {"float32": {"atol": 1e-4, "rtol": 1e-4}, "float64": {"atol": 1e-9, "rtol": 1e-9}}
EPS = {"float32": 2.0 ** -23, "float64": 2.0 ** -52}
# A float sum of L zero-mean terms of rms size s has partial sums of size ~sqrt(k) s, each rounded to eps/2
# of itself: its error is ~0.2 eps L s (std, sequential order; tiled and pairwise orders do better), and the
# largest difference between two honest orders seen is 1.2 eps L s (long scans on an H200). sum_tolerance's
# atol, SUM_SIGMAS eps L s, stays far below one term (a dropped or repeated element) while eps L << 1.
# Sums of same-signed terms are far from zero: their error is within rtol.
SUM_SIGMAS = 4


@dataclasses.dataclass(frozen=True)
class Family:
    """A parametric family of programs of one track.

    variants(rng) -> list of parameter dicts (each JSON-serialisable, with a unique "name" key);
    build(params) -> Task (without split; the registry assigns it).
    """
    name: str
    track: str
    description: str
    variants: Callable[[random.Random], list]
    build: Callable[[dict], Task]


def family_rng(seed: int, family: str) -> random.Random:
    return random.Random(f"{seed}:{family}")


# ---- numbers and C spellings -------------------------------------------------------------------
def ctype(dtype: str) -> str:
    return C_NAME[dtype]


def lit(value: float, dtype: str) -> str:
    """A C literal of `dtype` (1.5f for float32, 1.5 for float64, 3 for ints)."""
    if dtype.startswith(("int", "uint")):
        return str(int(value))
    text = repr(float(value))
    if "e" not in text and "." not in text:
        text += ".0"
    return text + ("f" if dtype == "float32" else "")


def mathfn(name: str, dtype: str) -> str:
    """C math function spelled for dtype: mathfn('exp', 'float32') == 'expf'."""
    return name + "f" if dtype == "float32" else name


def tolerance(dtype: str, scale: float = 1.0) -> dict:
    base = TOLERANCE.get(dtype, {"atol": 0, "rtol": 0})
    return {k: v * scale for k, v in base.items()}


def sum_tolerance(dtype: str, scale: float, terms: str, rms: float) -> dict:
    """tolerance(dtype, scale) for outputs that are float sums of `terms` (an expression of the config)
    terms of rms size `rms`: atol becomes max(atol, SUM_SIGMAS * eps * rms * terms), evaluated per config."""
    tol = tolerance(dtype, scale)
    terms = terms if terms.isidentifier() else f"({terms})"
    return {"atol": f"max({tol['atol']:.3g}, {SUM_SIGMAS * EPS[dtype] * rms:.3g}*{terms})", "rtol": tol["rtol"]}


# ---- signature helpers ---------------------------------------------------------------------------
def inp(name: str, dtype: str, shape, init: str | None = None) -> Arg:
    return Arg(name, "in", dtype, shape=tuple(shape), init=init)


def out(name: str, dtype: str, shape) -> Arg:
    return Arg(name, "out", dtype, shape=tuple(shape))


def inout(name: str, dtype: str, shape, init: str | None = None) -> Arg:
    return Arg(name, "inout", dtype, shape=tuple(shape), init=init)


def scalar(name: str, dtype: str, value) -> Arg:
    return Arg(name, "scalar", dtype, value=value)


def params_list(signature) -> str:
    """The C parameter list of the reference (host pointers, no stream)."""
    parts = []
    for a in signature:
        if a.is_array:
            const = "const " if a.role == "in" else ""
            parts.append(f"{const}{a.c_type}* {a.name}")
        else:
            parts.append(f"{a.c_type} {a.name}")
    return ", ".join(parts)


def c_function(entry: str, signature, body: str, helpers: str = "") -> str:
    """A serial C reference: includes, optional helpers, `void entry(params) { body }`."""
    head = "#include <math.h>\n#include <stdint.h>\n#include <float.h>\n#include <limits.h>\n"
    helpers = (helpers.strip() + "\n\n") if helpers.strip() else ""
    return f"{head}\n{helpers}void {entry}({params_list(signature)}) {{\n{_indent(body)}\n}}\n"


def cuda_unit(prototype: str, kernels: str, body: str) -> str:
    """A solution translation unit in the ABI: kernels, then the extern "C" launcher."""
    head = "#include <cuda_runtime.h>\n#include <math.h>\n#include <stdint.h>\n#include <float.h>\n#include <limits.h>\n"
    return (f"{head}\n{kernels.strip()}\n\n{prototype} {{\n{_indent(body)}\n"
            f"  return (int)cudaGetLastError();\n}}\n")


def _indent(text: str, n: int = 2) -> str:
    lines = [ln.rstrip() for ln in text.strip("\n").splitlines()]
    # dedent by the common leading whitespace, then indent by n
    pad = min((len(ln) - len(ln.lstrip()) for ln in lines if ln.strip()), default=0)
    return "\n".join((" " * n + ln[pad:]) if ln.strip() else "" for ln in lines)


def dedent(text: str) -> str:
    return _indent(text, 0) + "\n"


def grid1d(n: str, block: int = 256, cap: str | None = None) -> str:
    """C expression of a 1-D grid size covering `n` items with `block` threads."""
    g = f"(int)(((long long)({n}) + {block - 1}) / {block})"
    return f"({g} < {cap} ? {g} : {cap})" if cap else g


def make_task(*, tid: str, track: str, entry: str, source: str, signature, configs, tol: dict,
              flops, min_bytes, family: str, impls: list, extra: dict | None = None) -> Task:
    """Assembles a Task; `impls` is a list of (name, strategies, body_fn(prototype) -> source, opts)."""
    proto_task = Task(id=tid, track=track, entry=entry, source=source, signature=tuple(signature),
                      configs=tuple(configs), tolerance=tol, flops=flops, min_bytes=min_bytes,
                      family=family, extra=dict(extra or {}))
    prototype = proto_task.c_prototype()
    built = []
    for spec in impls:
        name, strategies, fn = spec[0], spec[1], spec[2]
        opts = spec[3] if len(spec) > 3 else {}
        built.append(Implementation(name=name, source=fn(prototype), strategies=tuple(strategies),
                                    baseline=bool(opts.get("baseline", False)),
                                    expected="wrong" if opts.get("defect") else "correct",
                                    defect=opts.get("defect")))
    return dataclasses.replace(proto_task, implementations=tuple(built))


def slug(*parts) -> str:
    text = "_".join(str(p) for p in parts if p != "" and p is not None)
    return re.sub(r"[^A-Za-z0-9_.\-]", "", text.replace(" ", "_"))


def configs3(small: dict, medium: dict, large: dict) -> list[dict]:
    return [dict(name="small", **small), dict(name="medium", **medium), dict(name="large", **large)]


def mutant(spec, old: str, new: str, defect: str, name: str | None = None):
    """A labelled-wrong implementation: `spec`'s source with the first `old` replaced by `new`.

    spec is an implementation spec as make_task takes it: (name, strategies, source_fn[, opts]).
    """
    base_name, strategies, fn = spec[0], spec[1], spec[2]

    def source(proto: str) -> str:
        src = fn(proto)
        if old not in src:
            raise AssertionError(f"mutant {defect} of {base_name}: {old!r} not in the source")
        return src.replace(old, new, 1)
    return (name or f"{base_name}_{defect}", list(strategies), source, {"defect": defect})


def wrong_for(name: str, percent: int = 25) -> bool:
    """A stable pseudo-random choice of the programs that carry a negative."""
    import hashlib
    return int(hashlib.sha1(name.encode()).hexdigest()[:6], 16) % 100 < percent


def unit_fn(kernels: str, body: str):
    """An implementation source function: prototype -> cuda_unit(prototype, kernels, body)."""
    return lambda proto: cuda_unit(proto, kernels, body)


def bake(source: str, consts: dict) -> str:
    """Makes per-program constants compile-time: `#define MACRO value` after the includes and every
    identifier `name` replaced by MACRO. consts: {name: (MACRO, value)}."""
    lines = source.split("\n")
    last_inc = max((i for i, ln in enumerate(lines) if ln.startswith("#include")), default=-1)
    body = "\n".join(lines[last_inc + 1:])
    for name, (macro, _) in consts.items():
        body = re.sub(rf"\b{re.escape(name)}\b", macro, body)
    defs = "\n".join(f"#define {macro} {value}" for macro, value in consts.values())
    return "\n".join(lines[:last_inc + 1] + [defs] + [body])


def baked(fn, consts: dict):
    """An implementation source function with `consts` baked in (see bake)."""
    return lambda proto: bake(fn(proto), consts)
