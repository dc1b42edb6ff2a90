#!/usr/bin/env bash
# One device call (~4 min): the first GPU run of the CUDA FFI matvec (cudaperf_jax/models/cuda_matvec.py):
# its GPU tests (every decode shape against XLA, with and without programmatic dependent launch, and chains
# of launches reading each other's partials), then benchmarks/decode_gemv.py on the Qwen2.5-1.5B shapes: per
# shape XLA, Pallas and CUDA (splits, PDL off/on), and the 28-layer weight stream through each. The Pallas
# matvecs of the fused decode step stream gate_up at 3.1 TB/s, down 2.3, o 1.0, qkv 1.6 (WORKSPACE_NOTES.md).
set -u
OUT=${OUT:-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false TF_CPP_MIN_LOG_LEVEL=3 CUDAPERF_CACHE=/tmp/cudaperf_cache
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader; which nvcc; nvcc --version | tail -2
timeout 120 env JAX_PLATFORMS=cuda,cpu python3 -m pytest -q -m gpu -p no:cacheprovider -o addopts= -x \
  tests/cudaperf_jax/models/test_cuda_matvec_gpu.py 2>&1 | tail -15
OUT=$OUT/gemv timeout 150 python3 benchmarks/decode_gemv.py --shapes=qwen2.5-1.5b --cuda 2>&1 | grep -v Warning | tail -40
