#!/usr/bin/env bash
# The ninth session's closing device call (~7 min): GPU tests of the launches that became defaults (the step launch
# with head groups, the CUDA top-k) and of the bf16 sampler on them, generation.py's batch-1 roofline number, then
# step-time A/Bs of the new default against the separate calls (Qwen2.5-1.5B and SmolLM2-135M) and the top-k table.
set -u
source benchmarks/h200_env.sh
timeout ${TEST_TIMEOUT:-180} env JAX_PLATFORMS=cuda,cpu python3 -m pytest -q -m gpu -p no:cacheprovider -o addopts= \
  tests/cudaperf_jax/models/test_cuda_matvec_gpu.py tests/cudaperf_jax/models/test_decode_fused_gpu.py \
  -k "seven_kernel or head_groups or top_k or sampler" 2>&1 | grep -E "passed|failed|FAILED|Error" | tail -8
mkdir -p $OUT/gen
OUT=$OUT/gen timeout 90 python3 benchmarks/generation.py --models=qwen2.5-1.5b-random --gguf=/nonexistent --batches=1 \
  --no_hf --greedy_check_tokens=0 2>&1 | grep -E "decode|HBM|rror" | tail -3
STEP_TIMEOUT=45 STEPS="default: off:CUDAPERF_CUDA_LAYER=off" bash benchmarks/h200_steps.sh
OUT=$OUT timeout 60 python3 benchmarks/topk.py 2>&1 | tail -8
STEP_TIMEOUT=45 STEPS="smol:MODEL=smollm2-135m smol_off:MODEL=smollm2-135m,CUDAPERF_CUDA_LAYER=off" bash benchmarks/h200_steps.sh
