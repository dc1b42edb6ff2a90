#!/usr/bin/env bash
# Closing check of a session (~5 min): every GPU test of the decode kernels with the shipped defaults, then
# generation.py's batch-1 decode of the random Qwen2.5-1.5B (the HBM-roofline number of issue 7).
set -u
source benchmarks/h200_env.sh
timeout ${TEST_TIMEOUT:-300} env JAX_PLATFORMS=cuda,cpu python3 -m pytest -q -m gpu -p no:cacheprovider -o addopts= \
  tests/cudaperf_jax/models/test_cuda_matvec_gpu.py tests/cudaperf_jax/models/test_decode_fused_gpu.py \
  tests/cudaperf_jax/models/test_gemv_gpu.py 2>&1 | tail -5
mkdir -p $OUT/gen
OUT=$OUT/gen timeout 90 python3 benchmarks/generation.py --models=qwen2.5-1.5b-random --gguf=/nonexistent --batches=1 \
  --no_hf --greedy_check_tokens=0 2>&1 | grep -E "decode|HBM|rror" | tail -4
