"""Builds the CUDA decode kernels (cuda/matvec.cu and its headers) into one shared library with nvcc and registers
its XLA FFI targets.

The library goes to <cache dir>/cuda_ffi/ (cudaperf_jax.assets.cache_dir), keyed by the sources, the FFI headers
and the nvcc version; nvcc is kernels_harness.build.nvcc.find_nvcc's.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import subprocess
import uuid
from pathlib import Path

import jax

SOURCE = Path(__file__).with_name("cuda") / "matvec.cu"
KERNEL = SOURCE.with_name("matvec_kernel.cuh")   # the matvec kernels alone (matvec.cu includes it; tests emulate it)
TOPK_KERNEL = SOURCE.with_name("topk_kernel.cuh")
LAYER_KERNEL = SOURCE.with_name("layer_kernel.cuh")   # the step launch's attention and its layer parameters
ARCH = "sm_90"

TARGETS = {"parts": ("cudaperf_matvec", "CudaperfMatvec"), "norm": ("cudaperf_matvec_norm", "CudaperfMatvecNorm"),
           "swiglu": ("cudaperf_matvec_swiglu", "CudaperfMatvecSwiglu"), "attn": ("cudaperf_matvec_attn", "CudaperfMatvecAttn"),
           "topk": ("cudaperf_topk", "CudaperfTopk"), "step": ("cudaperf_step", "CudaperfStep")}


class BuildError(RuntimeError):
    """nvcc could not build the FFI library; the message holds its output."""


def nvcc_cmd(out: Path) -> list[str]:
    """The nvcc command line that builds the library into `out`."""
    from kernels_harness.build.nvcc import find_nvcc
    return [str(find_nvcc()), "-O3", "-std=c++17", f"-gencode=arch=compute_{ARCH[3:]},code={ARCH}", "-Xcompiler",
            "-fPIC", "-shared", "-cudart", "static", "-diag-suppress", "940,2473", f"-I{jax.ffi.include_dir()}",
            str(SOURCE), "-o", str(out)]


def build(cache: Path | None = None) -> Path:
    """The shared library's path, compiling it if this source/headers/compiler combination is not cached."""
    from cudaperf_jax.assets import cache_dir
    from kernels_harness.build.nvcc import find_nvcc
    version = subprocess.run([str(find_nvcc()), "--version"], check=False, capture_output=True, text=True).stdout
    sources = b"".join(f.read_bytes() for f in sorted(SOURCE.parent.glob("*.cu*")))   # matvec.cu and its headers
    h = hashlib.sha256(sources + str(jax.ffi.include_dir()).encode() + version.encode()
                       + (Path(jax.ffi.include_dir()) / "xla/ffi/api/api.h").read_bytes()).hexdigest()[:16]
    out = (cache or cache_dir() / "cuda_ffi") / f"matvec_{ARCH}_{h}.so"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".tmp{os.getpid()}_{uuid.uuid4().hex[:8]}.so")
    r = subprocess.run(nvcc_cmd(tmp), check=False, capture_output=True, text=True)
    if r.returncode != 0:
        raise BuildError(f"nvcc failed to build {SOURCE.name} (exit {r.returncode}): {r.stderr[-2000:]}")
    tmp.replace(out)   # atomic: concurrent builders never load a half-written file
    return out


@functools.cache
def register() -> Path:
    """Builds (if needed), loads and registers the FFI targets for CUDA; returns the library's path."""
    path = build()
    lib = ctypes.cdll.LoadLibrary(str(path))
    for name, symbol in TARGETS.values():
        jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(getattr(lib, symbol)), platform="CUDA")
    return path


def require_gpu() -> None:
    if jax.default_backend() != "gpu":
        raise RuntimeError(f"the CUDA decode kernels run on an NVIDIA GPU only; JAX's backend here is "
                           f"{jax.default_backend()}")
    register()
