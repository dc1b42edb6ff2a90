#!/usr/bin/env bash
# One device call (~4 min) for PDL inside one FFI call: the standalone chain (benchmarks/pdl_chain.cu), the GPU
# tests of the layer launches, then the batch-1 step (decode_tune.py baselines) with the default and with
# CUDAPERF_CUDA_LAYER=kernels (seven kernels per layer from one FFI call, chained by PDL) at a few attention splits.
set -u
nvcc -O3 -std=c++17 -arch=sm_90 -o /tmp/pdl_chain benchmarks/pdl_chain.cu && timeout 60 /tmp/pdl_chain $OUT/pdl_chain.json
TESTS=${TESTS:-"one_kernel or seven_kernel"} TEST_TAIL=12 \
  STEPS=${STEPS:-"default: kernels:CUDAPERF_CUDA_LAYER=kernels step:CUDAPERF_CUDA_LAYER=step step_s8:CUDAPERF_CUDA_LAYER=step,CUDAPERF_CUDA_LAYER_ATTN_SPLITS=8 kernels_s8:CUDAPERF_CUDA_LAYER=kernels,CUDAPERF_CUDA_LAYER_ATTN_SPLITS=8"} \
  bash benchmarks/h200_layer.sh
