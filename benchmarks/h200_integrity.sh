#!/usr/bin/env bash
# Issue 26 on the H200 (~6-8 min): the GPU tests of reward integrity (out-of-bounds writers, the zero softmax,
# an impossible speedup, tail-kernel launches, KernelBench's adversarial kernels, the numba comparison), then
# the held-out dataset verdicts on cuda ($OUT/integrity_dataset_cuda.json).
set -u
source benchmarks/h200_env.sh
timeout ${TEST_TIMEOUT:-330} python3 -m pytest -q -m gpu -p no:cacheprovider -o addopts= \
  tests/kernels_harness/adversarial tests/kernels_harness/run/test_device_kernels.py 2>&1 | tail -15
timeout ${CHECK_TIMEOUT:-240} python3 benchmarks/integrity_check.py --backend cuda --out $OUT --per_family 2 2>&1 | tail -40
