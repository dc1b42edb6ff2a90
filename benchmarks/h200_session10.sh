#!/usr/bin/env bash
# Tenth developer session's first H200 call (~9 min): decode_tune.py step times of the random Qwen2.5-1.5B with L2
# prefetches of later weights (CUDAPERF_CUDA_L2_PREFETCH; h200_steps.sh), then the GPU tests of the prefetch and of
# the step launch. Logs under $OUT.
set -u
source benchmarks/h200_env.sh
STEPS=${STEPS:-"default: gu30:CUDAPERF_CUDA_L2_PREFETCH=gu=30 gu50:CUDAPERF_CUDA_L2_PREFETCH=gu=50
gu70:CUDAPERF_CUDA_L2_PREFETCH=gu=70 gu50o:CUDAPERF_CUDA_L2_PREFETCH=gu=50+o=100
gu50q:CUDAPERF_CUDA_L2_PREFETCH=gu=50+o=100+from=qkv gu50d:CUDAPERF_CUDA_L2_PREFETCH=gu=50+down=20
o100:CUDAPERF_CUDA_L2_PREFETCH=o=100"} bash benchmarks/h200_steps.sh 2>&1 | tee $OUT/steps.txt
timeout ${TEST_TIMEOUT:-150} env JAX_PLATFORMS=cuda,cpu python3 -m pytest -q -m gpu -p no:cacheprovider -o addopts= \
  tests/cudaperf_jax/models/test_cuda_matvec_gpu.py -k "${TESTS:-l2_prefetch or head_groups}" 2>&1 | tail -5 \
  | tee $OUT/tests.txt
