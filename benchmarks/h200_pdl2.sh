#!/usr/bin/env bash
# Second PDL call (~5 min): GPU tests of the kernels/step launches (PDL on and off) and of the fused step's CUDA
# matvecs on three model shapes, a profile of the kernels launch (per-kernel times), then steps at more attention splits.
set -u
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false TF_CPP_MIN_LOG_LEVEL=3 CUDAPERF_CACHE=/tmp/cudaperf_cache
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD
timeout ${TEST_TIMEOUT:-200} env JAX_PLATFORMS=cuda,cpu python3 -m pytest -q -m gpu -p no:cacheprovider -o addopts= \
  tests/cudaperf_jax/models/test_cuda_matvec_gpu.py -k "${TESTS:-seven_kernel or fused_decoder_with_cuda}" 2>&1 \
  | grep -E "passed|failed|FAILED|Error" | tail -14
mkdir -p $OUT/profile
OUT=$OUT/profile timeout ${PROFILE_TIMEOUT:-120} python3 benchmarks/decode_profile.py --variants=${VARIANTS:-step} \
  --top 16 2>&1 | tail -30
echo '{}' > /tmp/none.json
steps=${STEPS:-"default: step:CUDAPERF_CUDA_LAYER=step step_s8:CUDAPERF_CUDA_LAYER=step,CUDAPERF_CUDA_LAYER_ATTN_SPLITS=8 step_s2:CUDAPERF_CUDA_LAYER=step,CUDAPERF_CUDA_LAYER_ATTN_SPLITS=2 step_nopdl:CUDAPERF_CUDA_LAYER=step,CUDAPERF_CUDA_PDL=off"}
for spec in $steps; do
  name=${spec%%:*}; vars=${spec#*:}
  env OUT=/tmp/step_$name ${vars//,/ } timeout 60 python3 benchmarks/decode_tune.py --new_tokens 64 \
    --candidates /tmp/none.json 2>&1 | grep -E "^baseline \(|rror" | tail -3 | sed "s/^/$name: /"
done
