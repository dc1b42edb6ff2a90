#!/usr/bin/env bash
# Eleventh developer session's first H200 call: GPU tests of the step launch (attention key/value staging before the
# PDL wait, the new default) and of the CUDA top-k, topk.py (the batched top-k select), decode_ab.py's same-process
# comparison of the attention settings, then generation.py's batch-1 decode of the random Qwen2.5-1.5B.
set -u
source benchmarks/h200_env.sh
mkdir -p $OUT/gen $OUT/ab $OUT/topk
timeout ${TEST_TIMEOUT:-220} env JAX_PLATFORMS=cuda,cpu python3 -m pytest -q -m gpu -p no:cacheprovider -o addopts= \
  tests/cudaperf_jax/models/test_cuda_matvec_gpu.py -k "${TESTS:-seven_kernel or head_groups or top_k or auto_takes}" \
  2>&1 | tail -4 | tee $OUT/tests.txt
OUT=$OUT/topk timeout 90 python3 benchmarks/topk.py 2>&1 | tail -12
OUT=$OUT/ab timeout ${AB_TIMEOUT:-200} python3 benchmarks/decode_ab.py --rounds ${ROUNDS:-7} \
  --variants "${VARIANTS:-base: noearly:CUDAPERF_CUDA_ATTEND_EARLY=off}" 2>&1 | tail -12
OUT=$OUT/gen timeout 80 python3 benchmarks/generation.py --models=qwen2.5-1.5b-random --gguf=/nonexistent --batches=1 \
  --no_hf --greedy_check_tokens=0 2>&1 | grep -E "decode|HBM|rror" | tail -4
