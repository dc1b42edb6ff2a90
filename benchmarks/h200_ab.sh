#!/usr/bin/env bash
# One H200 call timing decode settings against the defaults: GPU tests of test_cuda_matvec_gpu.py (-k "$TESTS"), then
# benchmarks/decode_ab.py in one process at 256 and 64 new tokens over VARIANTS ("base: name:VAR=v,VAR=v ..."), then
# generation.py's batch-1 decode of the random Qwen2.5-1.5B under GEN_ENV ("VAR=v VAR=v"; empty: the defaults).
# Its first use (2026-12-03, twelfth session): TESTS="folded or logsumexp or top_k or early or (seven_kernel and step
# and on) or head_groups", VARIANTS with fold/lse/early/all, GEN_ENV="CUDAPERF_CUDA_FOLD_FINISH=on
# CUDAPERF_CUDA_TOPK_LSE=on" (then off by default). ~6 min with a cold library build.
set -u
source benchmarks/h200_env.sh
mkdir -p $OUT/ab256 $OUT/ab64 $OUT/gen
if [ -n "${TESTS:-}" ]; then
  timeout ${TEST_TIMEOUT:-200} env JAX_PLATFORMS=cuda,cpu python3 -m pytest -q -m gpu -p no:cacheprovider -o addopts= \
    tests/cudaperf_jax/models/test_cuda_matvec_gpu.py -k "$TESTS" 2>&1 | tail -4
fi
OUT=$OUT/ab256 timeout ${AB_TIMEOUT:-150} python3 benchmarks/decode_ab.py --rounds ${ROUNDS:-5} --new_tokens 256 \
  --variants "$VARIANTS" 2>&1 | tail -8
OUT=$OUT/ab64 timeout 100 python3 benchmarks/decode_ab.py --rounds ${ROUNDS:-5} --new_tokens 64 \
  --variants "$VARIANTS" 2>&1 | tail -8
env ${GEN_ENV:-} OUT=$OUT/gen timeout 60 python3 benchmarks/generation.py \
  --models=qwen2.5-1.5b-random --gguf=/nonexistent --batches=1 --no_hf --greedy_check_tokens=0 2>&1 \
  | grep -E "step .* ms|HBM|rror" | tail -2
