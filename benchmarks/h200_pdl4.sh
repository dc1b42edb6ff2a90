#!/usr/bin/env bash
# One device call for the PDL work (~5 min): the standalone chain (benchmarks/pdl_chain.cu; CHAIN: a variant-name
# filter), an Nsight Compute profile of one kernel of it (NCU, NCU_VARIANT), GPU tests of
# test_cuda_matvec_gpu.py (TESTS, a -k expression), a profile when VARIANTS names decode_profile.py variants (e.g. step),
# then decode_tune.py baselines for STEPS ("name:VAR=v,VAR=v ..."; logs under $OUT/steps). The 2026-12-03 calls ran
# it as TESTS="seven_kernel or fused_decoder_with_cuda" VARIANTS=step, and as TESTS="not one_kernel".
set -u
nvcc -O3 -std=c++17 -arch=sm_90 -lineinfo -o /tmp/pdl_chain benchmarks/pdl_chain.cu && timeout 90 /tmp/pdl_chain $OUT/pdl_chain.json "${CHAIN:-}"
if [ -n "${NCU:-}" ]; then   # NCU: a kernel-name regex; profiles it in pdl_chain's NCU_VARIANT (default attn_only_nopdl)
  timeout 120 ncu --clock-control none -k "regex:$NCU" -s 3 -c 1 --set full --import-source yes -o $OUT/ncu \
    /tmp/pdl_chain - "${NCU_VARIANT:-attn_only_nopdl}" 1 > /dev/null 2>&1
  ncu --import $OUT/ncu.ncu-rep --page details 2>&1 | grep -E "Duration|Elapsed Cycles|Registers|Memory Throughput|\
Achieved Occupancy|Issue Slot|Warp Cycles Per Issued|Stall|Block Limit|Dynamic Shared|No Eligible|One or More|L1/TEX Hit|L2 Hit" | head -40
  ncu --import $OUT/ncu.ncu-rep --page raw --csv 2>/dev/null | head -3 > $OUT/ncu_raw.csv
  ncu --import $OUT/ncu.ncu-rep --page source --csv --print-source sass > $OUT/ncu_source.csv 2>/dev/null
  ncu --import $OUT/ncu.ncu-rep --page source --csv --print-source cuda > $OUT/ncu_source_cuda.csv 2>/dev/null
fi
source benchmarks/h200_env.sh
timeout ${TEST_TIMEOUT:-200} env JAX_PLATFORMS=cuda,cpu python3 -m pytest -q -m gpu -p no:cacheprovider -o addopts= \
  tests/cudaperf_jax/models/test_cuda_matvec_gpu.py -k "${TESTS:-seven_kernel or one_kernel}" 2>&1 \
  | grep -E "passed|failed|FAILED|Error" | tail -8
if [ -n "${VARIANTS:-}" ]; then
  mkdir -p $OUT/profile
  OUT=$OUT/profile timeout ${PROFILE_TIMEOUT:-120} python3 benchmarks/decode_profile.py --variants=$VARIANTS --top 16 \
    2>&1 | tail -30
fi
echo '{}' > /tmp/none.json
mkdir -p $OUT/steps
steps=${STEPS:-"step:CUDAPERF_CUDA_LAYER=step step_s8:CUDAPERF_CUDA_LAYER=step,CUDAPERF_CUDA_LAYER_ATTN_SPLITS=8 default:"}
for spec in $steps; do
  name=${spec%%:*}; vars=${spec#*:}
  env OUT=/tmp/step_$name ${vars//,/ } timeout 60 python3 benchmarks/decode_tune.py --new_tokens 64 \
    --candidates /tmp/none.json > $OUT/steps/$name.log 2>&1
  echo "$name: $(grep -E '^baseline \(' $OUT/steps/$name.log || tail -3 $OUT/steps/$name.log)"
done
