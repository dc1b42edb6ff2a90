"""The kernel corpus of the emulation backend: case descriptions, inputs, references, comparison.

A case is one `.cu` file in the solution ABI (`extern "C" int entry(args..., cudaStream_t)`) plus a
signature (Arg list), a numpy reference and tolerances. The cases themselves live in
kernels_harness/emulation/corpus_data/corpus_specs.py (`CASES`), the sources in .../corpus/<name>.cu. The same
description drives the cpu run (tests, `run_on_cpu`) and the GPU run (`corpus_gpu.py`), so both are
checked against the same reference on the same inputs.

Logical values vs device layout: bfloat16 arrays are float32 arrays (rounded to bf16) on the numpy side
and uint16 bit patterns in memory; float16 is numpy float16 on both sides.
"""
from __future__ import annotations

import ctypes
import dataclasses
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from kernels_harness.tasks import inits

DEFAULT_CORPUS_DIR = Path(__file__).resolve().parent / "corpus_data"   # package data

NUMPY_DTYPES = {"float32": np.float32, "float64": np.float64, "float16": np.float16, "bfloat16": np.uint16,
                "int32": np.int32, "uint32": np.uint32, "int64": np.int64, "uint64": np.uint64,
                "uint8": np.uint8, "int8": np.int8}
CTYPES = {"float32": ctypes.c_float, "float64": ctypes.c_double, "int32": ctypes.c_int, "uint32": ctypes.c_uint,
          "int64": ctypes.c_longlong, "uint64": ctypes.c_ulonglong}


@dataclasses.dataclass(frozen=True)
class Arg:
    """One entry argument: an array (role in/out/inout, shape in ints) or a scalar (role scalar, value)."""
    name: str
    role: str
    dtype: str
    shape: tuple = ()
    value: Any = None
    init: str | None = None


@dataclasses.dataclass(frozen=True)
class Case:
    """One corpus kernel: `reference(inputs) -> {output name: array}` in float64 or exact integers."""
    name: str
    entry: str
    args: tuple
    reference: Callable[[dict], dict]
    atol: float = 1e-5
    rtol: float = 1e-5
    tags: tuple = ()

    @property
    def outputs(self) -> list[Arg]:
        return [a for a in self.args if a.role in ("out", "inout")]


def load_cases(corpus_dir: str | Path | None = None) -> list[Case]:
    """CASES from <corpus_dir>/corpus_specs.py (default: the corpus shipped with the package)."""
    corpus_dir = Path(corpus_dir or DEFAULT_CORPUS_DIR)
    spec_file = corpus_dir / "corpus_specs.py"
    if not spec_file.is_file():
        raise FileNotFoundError(f"no corpus at {corpus_dir}: pass --corpus <dir with corpus_specs.py and corpus/>")
    spec = importlib.util.spec_from_file_location("cudaperf_emulation_corpus_specs", spec_file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return list(module.CASES)


def source_of(case: Case, corpus_dir: str | Path | None = None) -> str:
    return (Path(corpus_dir or DEFAULT_CORPUS_DIR) / "corpus" / f"{case.name}.cu").read_text()


def f32_to_bf16_bits(a: np.ndarray) -> np.ndarray:
    """Round-to-nearest-even float32 -> bfloat16 bit patterns (uint16)."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(a), np.uint16(0x7FFF), r)


def bf16_bits_to_f32(b: np.ndarray) -> np.ndarray:
    return (np.asarray(b, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def make_inputs(case: Case, seed: int = 0) -> dict:
    """Logical input values of every argument (outputs: None), drawn deterministically from `seed`."""
    rng = np.random.default_rng([seed, sum(map(ord, case.name))])
    values: dict = {}
    for a in case.args:
        if a.role == "scalar":
            values[a.name] = a.value
        elif a.role == "out":
            values[a.name] = None
        else:
            draw = np.float32 if a.dtype == "bfloat16" else NUMPY_DTYPES[a.dtype]
            arr = inits.generate(a.init, rng, a.shape, draw, {})
            if a.dtype == "bfloat16":
                arr = bf16_bits_to_f32(f32_to_bf16_bits(arr))
            values[a.name] = arr
    return values


def device_layout(value: np.ndarray, dtype: str) -> np.ndarray:
    """The bytes the kernel sees: C-contiguous, bf16 as uint16 bits."""
    if dtype == "bfloat16":
        return f32_to_bf16_bits(value)
    return np.ascontiguousarray(value, dtype=NUMPY_DTYPES[dtype])


def from_device_layout(arr: np.ndarray, dtype: str) -> np.ndarray:
    return bf16_bits_to_f32(arr) if dtype == "bfloat16" else np.asarray(arr)


def poisoned(a: Arg) -> np.ndarray:
    """An output buffer filled with NaN (floats) or 0xFF bytes (integers)."""
    arr = np.empty(a.shape, dtype=NUMPY_DTYPES[a.dtype])
    arr.view(np.uint8)[...] = 0xFF
    return arr


def argtypes(case: Case) -> list:
    return [CTYPES[a.dtype] if a.role == "scalar" else ctypes.c_void_p for a in case.args] + [ctypes.c_void_p]


def compare(case: Case, got: dict, expected: dict) -> dict:
    """Per output: {"ok", "max_abs_err", "max_rel_err"}; integers must match exactly."""
    report = {}
    for a in case.outputs:
        g = np.asarray(got[a.name], dtype=np.float64)
        e = np.asarray(expected[a.name], dtype=np.float64).reshape(g.shape)
        if a.dtype in ("float32", "float64", "float16", "bfloat16"):
            atol, rtol = case.atol, case.rtol
        else:
            atol, rtol = 0.0, 0.0
        diff = np.abs(g - e)
        finite = np.isfinite(g) | ~np.isfinite(e)
        ok = bool(np.all(finite) and np.all((diff <= atol + rtol * np.abs(e)) | (g == e)))
        with np.errstate(invalid="ignore", divide="ignore"):
            rel = np.where(np.abs(e) > 0, diff / np.abs(e), diff)
        report[a.name] = {"ok": ok, "max_abs_err": float(np.nanmax(diff)) if diff.size else 0.0,
                          "max_rel_err": float(np.nanmax(rel)) if rel.size else 0.0}
    return report


def expected_outputs(case: Case, inputs: dict) -> dict:
    """The reference's outputs (copies of the inputs are passed, so it may not alter them)."""
    return case.reference({k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in inputs.items()})


def run_on_cpu(lib, case: Case, inputs: dict) -> tuple[int, dict]:
    """Calls the entry of an EmulatedLibrary on host arrays; returns (cudaError_t, logical outputs)."""
    fn = lib.entry(case.entry)
    fn.argtypes = argtypes(case)
    buffers, call = {}, []
    for a in case.args:
        if a.role == "scalar":
            call.append(a.value)
            continue
        buf = poisoned(a) if a.role == "out" else device_layout(inputs[a.name], a.dtype).copy()
        buffers[a.name] = buf
        call.append(buf.ctypes.data)
    rc = fn(*call, None)
    return rc, {a.name: from_device_layout(buffers[a.name], a.dtype) for a in case.outputs}
