#!/usr/bin/env bash
# Second layer-kernel call: GPU tests, steps, then a profile of the per-phase launches (which phase costs what).
set -u
cd "$(dirname "$0")/.."
STEPS=${STEPS:-"default: layer:CUDAPERF_CUDA_LAYER=on layer_s8:CUDAPERF_CUDA_LAYER=on,CUDAPERF_CUDA_LAYER_ATTN_SPLITS=8 phases:CUDAPERF_CUDA_LAYER=phases"} \
  bash benchmarks/h200_layer.sh
export PYTHONPATH=/tmp/site:$PWD CUDAPERF_CACHE=/tmp/cudaperf_cache XLA_PYTHON_CLIENT_PREALLOCATE=false TF_CPP_MIN_LOG_LEVEL=3
mkdir -p $OUT/profile
OUT=$OUT/profile timeout ${PROFILE_TIMEOUT:-120} python3 benchmarks/decode_profile.py --variants=${VARIANTS:-phases,layer} --top 14 2>&1 | tail -45
