#!/usr/bin/env bash
# Closing check of a session (~5 min): every GPU test of the decode kernels with the shipped defaults, then
# generation.py's batch-1 decode of the random Qwen2.5-1.5B (the HBM-roofline number of issue 7).
set -u
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false TF_CPP_MIN_LOG_LEVEL=3 CUDAPERF_CACHE=/tmp/cudaperf_cache
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD
timeout ${TEST_TIMEOUT:-300} env JAX_PLATFORMS=cuda,cpu python3 -m pytest -q -m gpu -p no:cacheprovider -o addopts= \
  tests/cudaperf_jax/models/test_cuda_matvec_gpu.py tests/cudaperf_jax/models/test_decode_fused_gpu.py \
  tests/cudaperf_jax/models/test_gemv_gpu.py 2>&1 | tail -5
mkdir -p $OUT/gen
OUT=$OUT/gen timeout 90 python3 benchmarks/generation.py --models=qwen2.5-1.5b-random --gguf=/nonexistent --batches=1 \
  --no_hf --greedy_check_tokens=0 2>&1 | grep -E "decode|HBM|rror" | tail -4
