"""Custom decode kernels (Pallas, and CUDA through the XLA FFI), chosen by one typed config (DecodeKernels).

Imported by cudaperf_jax.models, never importing it. Modules: config (DecodeKernels, the tilings table),
gemv (Pallas batch-1 matvec), fused (Pallas fused decode layers), step (which layers run where), cuda_build (nvcc,
FFI registration), cuda_ffi (CUDA matvecs and top-k), cuda_step (the whole step from one FFI call); cuda/ (the CUDA
sources) and tables/ (tilings measured per GPU). History: docs/decode_kernels.md.
"""
from cudaperf_jax.kernels.config import XLA, DecodeKernels

__all__ = ["XLA", "DecodeKernels"]
