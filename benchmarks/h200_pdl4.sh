#!/usr/bin/env bash
# The next PDL call (~5 min; written 2026-12-03, not yet run): the chain with L2 activation loads batched eight at a
# time (plain loads beside them) and the two-round-trip attention, the layer-launch GPU tests, then the batch-1 step
# with the default and with CUDAPERF_CUDA_LAYER=step (logs under $OUT/steps).
set -u
nvcc -O3 -std=c++17 -arch=sm_90 -o /tmp/pdl_chain benchmarks/pdl_chain.cu && timeout 60 /tmp/pdl_chain $OUT/pdl_chain.json
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false TF_CPP_MIN_LOG_LEVEL=3 CUDAPERF_CACHE=/tmp/cudaperf_cache
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD
timeout ${TEST_TIMEOUT:-200} env JAX_PLATFORMS=cuda,cpu python3 -m pytest -q -m gpu -p no:cacheprovider -o addopts= \
  tests/cudaperf_jax/models/test_cuda_matvec_gpu.py -k "${TESTS:-seven_kernel or one_kernel}" 2>&1 \
  | grep -E "passed|failed|FAILED|Error" | tail -8
echo '{}' > /tmp/none.json
mkdir -p $OUT/steps
steps=${STEPS:-"step:CUDAPERF_CUDA_LAYER=step step_s8:CUDAPERF_CUDA_LAYER=step,CUDAPERF_CUDA_LAYER_ATTN_SPLITS=8 default:"}
for spec in $steps; do
  name=${spec%%:*}; vars=${spec#*:}
  env OUT=/tmp/step_$name ${vars//,/ } timeout 60 python3 benchmarks/decode_tune.py --new_tokens 64 \
    --candidates /tmp/none.json > $OUT/steps/$name.log 2>&1
  echo "$name: $(grep -E '^baseline \(' $OUT/steps/$name.log || tail -3 $OUT/steps/$name.log)"
done
