"""The `init` vocabulary of task arrays: how the harness draws fresh inputs for every trial.

An init is `name(arg, ...)` where each arg is a number or an expression of the config symbols:

  uniform(lo, hi)        uniform floats in [lo, hi)               (default for float arrays: uniform(-1, 1))
  normal(mean, std)      Gaussian floats
  randint(lo, hi)        integers in [lo, hi)                     (default for integer arrays: randint(0, 100))
  zeros, ones            constants (an out array's init is ignored: outputs are poisoned)
  constant(v)            every element v
  arange                 0, 1, 2, ... (flattened)
  permutation            a random permutation of 0..n-1 (a valid gather/scatter index)
  sorted_uniform(lo, hi) uniform floats, sorted ascending
  csr_rowptr(NNZ)        a CSR row-pointer array of length rows+1: 0, non-decreasing, ending at NNZ
  bernoulli(p)           0/1 values with P(1) = p
  spd_diag(d)            uniform(-1,1) plus d on the diagonal of the last two axes (well conditioned)

Unknown names or malformed arguments raise TaskError with the vocabulary above.
"""
from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

from kernels_harness.tasks import expr as expr_lib
from kernels_harness.tasks.errors import TaskError

_CALL = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:\((.*)\))?\s*$")


def _split_args(text: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def _is_int(dtype: np.dtype) -> bool:
    return np.issubdtype(dtype, np.integer) or dtype == np.bool_


def _uniform(rng, shape, dtype, lo=-1.0, hi=1.0):
    if _is_int(dtype):
        return rng.integers(int(lo), int(hi), size=shape).astype(dtype)
    return rng.uniform(lo, hi, size=shape).astype(dtype)


def _normal(rng, shape, dtype, mean=0.0, std=1.0):
    return rng.normal(mean, std, size=shape).astype(dtype)


def _randint(rng, shape, dtype, lo=0, hi=100):
    return rng.integers(int(lo), int(hi), size=shape).astype(dtype)


def _csr_rowptr(rng, shape, dtype, nnz):
    rows = int(np.prod(shape)) - 1
    nnz = int(nnz)
    if rows < 0:
        raise TaskError("csr_rowptr needs an array of length rows+1 >= 1")
    cuts = np.sort(rng.integers(0, nnz + 1, size=max(rows - 1, 0)))
    ptr = np.concatenate([[0], cuts, [nnz]]) if rows >= 1 else np.array([nnz])
    return ptr.astype(dtype).reshape(shape)


def _spd_diag(rng, shape, dtype, d=1.0):
    a = rng.uniform(-1, 1, size=shape)
    if len(shape) >= 2:
        n = min(shape[-1], shape[-2])
        idx = np.arange(n)
        a[..., idx, idx] += d
    return a.astype(dtype)


GENERATORS: dict[str, tuple[Callable, int, int]] = {
    # name: (function(rng, shape, dtype, *args), min args, max args)
    "uniform": (_uniform, 0, 2),
    "normal": (_normal, 0, 2),
    "randint": (_randint, 0, 2),
    "zeros": (lambda rng, shape, dtype: np.zeros(shape, dtype), 0, 0),
    "ones": (lambda rng, shape, dtype: np.ones(shape, dtype), 0, 0),
    "constant": (lambda rng, shape, dtype, v: np.full(shape, v, dtype), 1, 1),
    "arange": (lambda rng, shape, dtype: np.arange(int(np.prod(shape))).astype(dtype).reshape(shape), 0, 0),
    "permutation": (lambda rng, shape, dtype: rng.permutation(int(np.prod(shape))).astype(dtype).reshape(shape), 0, 0),
    "sorted_uniform": (lambda rng, shape, dtype, lo=-1.0, hi=1.0:
                       np.sort(rng.uniform(lo, hi, size=int(np.prod(shape)))).astype(dtype).reshape(shape), 0, 2),
    "csr_rowptr": (_csr_rowptr, 1, 1),
    "bernoulli": (lambda rng, shape, dtype, p=0.5: (rng.random(size=shape) < p).astype(dtype), 0, 1),
    "spd_diag": (_spd_diag, 0, 1),
}


def parse(init: str, where: str = "init") -> tuple[str, list[str]]:
    """Splits `name(args)`; raises TaskError if the name or arity is unknown."""
    if not isinstance(init, str):
        raise TaskError(f"{where}: init must be a string like 'uniform(-1, 1)'")
    m = _CALL.match(init)
    if not m or m.group(1) not in GENERATORS:
        raise TaskError(f"{where}: init {init!r} is not one of {', '.join(sorted(GENERATORS))} "
                        "(see kernels_harness/tasks/inits.py)")
    name, argtext = m.group(1), m.group(2) or ""
    args = _split_args(argtext)
    _, lo, hi = GENERATORS[name]
    if not lo <= len(args) <= hi:
        raise TaskError(f"{where}: init {name} takes {lo} to {hi} arguments, not {len(args)}")
    return name, args


def generate(init: str | None, rng: np.random.Generator, shape: tuple, dtype: np.dtype,
             env: dict) -> np.ndarray:
    """Draws one array. `dtype` is a numpy dtype (bfloat16 via ml_dtypes is drawn as float32 then cast)."""
    dtype = np.dtype(dtype)
    draw_dtype = np.float32 if dtype.kind == "V" or dtype.name == "bfloat16" else dtype
    if init is None:
        init = "randint(0, 100)" if _is_int(np.dtype(draw_dtype)) else "uniform(-1, 1)"
    name, args = parse(init)
    fn = GENERATORS[name][0]
    values = [expr_lib.evaluate(a, env) for a in args]
    out = fn(rng, tuple(int(s) for s in shape), np.dtype(draw_dtype), *values)
    return np.asarray(out).astype(dtype)
