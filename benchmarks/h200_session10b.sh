#!/usr/bin/env bash
# Tenth developer session's last H200 call (~2.5 min of device time left): a GPU test of the step launch against the
# fused step, generation.py's batch-1 decode of the random Qwen2.5-1.5B, then decode_tune.py step times in rounds.
set -u
source benchmarks/h200_env.sh
mkdir -p $OUT/gen
timeout 100 env JAX_PLATFORMS=cuda,cpu python3 -m pytest -q -m gpu -p no:cacheprovider -o addopts= \
  tests/cudaperf_jax/models/test_cuda_matvec_gpu.py -k "seven_kernel and step and qwen2 and on" 2>&1 | tail -3 \
  | tee $OUT/tests.txt
OUT=$OUT/gen timeout 70 python3 benchmarks/generation.py --models=qwen2.5-1.5b-random --gguf=/nonexistent --batches=1 \
  --no_hf --greedy_check_tokens=0 2>&1 | grep -E "decode|HBM|rror" | tail -4 | tee $OUT/gen.txt
ROUNDS=${ROUNDS:-3} STEPS="default:" bash benchmarks/h200_steps.sh 2>&1 | tee $OUT/steps.txt
