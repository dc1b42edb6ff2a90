#!/usr/bin/env bash
# First H200 call for the three untimed options of 2026-12-03 (all off by default): the folded finish kernels
# (CUDAPERF_CUDA_FOLD_FINISH), the log-probabilities from the top-k kernels' logsumexp (CUDAPERF_CUDA_TOPK_LSE) and the
# attention's first key/value loads before its PDL wait (CUDAPERF_CUDA_ATTEND_EARLY).
# Their GPU tests and the step launch's, the top-k's; decode_ab.py in one process at 256 and 64 new tokens (each
# option and both against the defaults); generation.py's batch-1 decode with both. ~6 min with a cold library build.
set -u
source benchmarks/h200_env.sh
mkdir -p $OUT/ab256 $OUT/ab64 $OUT/gen
V="base: fold:CUDAPERF_CUDA_FOLD_FINISH=on lse:CUDAPERF_CUDA_TOPK_LSE=on early:CUDAPERF_CUDA_ATTEND_EARLY=on all:CUDAPERF_CUDA_FOLD_FINISH=on,CUDAPERF_CUDA_TOPK_LSE=on,CUDAPERF_CUDA_ATTEND_EARLY=on"
timeout ${TEST_TIMEOUT:-200} env JAX_PLATFORMS=cuda,cpu python3 -m pytest -q -m gpu -p no:cacheprovider -o addopts= \
  tests/cudaperf_jax/models/test_cuda_matvec_gpu.py -k "${TESTS:-folded or logsumexp or top_k or early or (seven_kernel and step and on) or head_groups}" \
  2>&1 | tail -4
OUT=$OUT/ab256 timeout 150 python3 benchmarks/decode_ab.py --rounds ${ROUNDS:-5} --new_tokens 256 \
  --variants "${VARIANTS:-$V}" 2>&1 | tail -8
OUT=$OUT/ab64 timeout 100 python3 benchmarks/decode_ab.py --rounds ${ROUNDS:-5} --new_tokens 64 \
  --variants "${VARIANTS:-$V}" 2>&1 | tail -8
CUDAPERF_CUDA_FOLD_FINISH=${FOLD:-on} CUDAPERF_CUDA_TOPK_LSE=${LSE:-on} OUT=$OUT/gen timeout 60 python3 benchmarks/generation.py \
  --models=qwen2.5-1.5b-random --gguf=/nonexistent --batches=1 --no_hf --greedy_check_tokens=0 2>&1 \
  | grep -E "step .* ms|HBM|rror" | tail -2
