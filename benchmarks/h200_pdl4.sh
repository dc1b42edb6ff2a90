#!/usr/bin/env bash
# Fourth PDL call (~2 min): the chain with L2 activation loads batched eight at a time (plain loads beside them), then
# the batch-1 step with the default and with CUDAPERF_CUDA_LAYER=step (logs under $OUT/steps).
set -u
nvcc -O3 -std=c++17 -arch=sm_90 -o /tmp/pdl_chain benchmarks/pdl_chain.cu && timeout 60 /tmp/pdl_chain $OUT/pdl_chain.json
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false TF_CPP_MIN_LOG_LEVEL=3 CUDAPERF_CACHE=/tmp/cudaperf_cache
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD
echo '{}' > /tmp/none.json
mkdir -p $OUT/steps
steps=${STEPS:-"step:CUDAPERF_CUDA_LAYER=step default:"}
for spec in $steps; do
  name=${spec%%:*}; vars=${spec#*:}
  env OUT=/tmp/step_$name ${vars//,/ } timeout 60 python3 benchmarks/decode_tune.py --new_tokens 64 \
    --candidates /tmp/none.json > $OUT/steps/$name.log 2>&1
  echo "$name: $(grep -E '^baseline \(' $OUT/steps/$name.log || tail -3 $OUT/steps/$name.log)"
done
