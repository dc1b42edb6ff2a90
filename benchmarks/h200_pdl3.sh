#!/usr/bin/env bash
# Third PDL call (~5 min): the standalone chain with the real attention kernel, the CUDA matvec GPU tests (the
# seven-kernel launches with PDL among them), and steps (logs under $OUT/steps).
set -u
nvcc -O3 -std=c++17 -arch=sm_90 -o /tmp/pdl_chain benchmarks/pdl_chain.cu && timeout 90 /tmp/pdl_chain $OUT/pdl_chain.json
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false TF_CPP_MIN_LOG_LEVEL=3 CUDAPERF_CACHE=/tmp/cudaperf_cache
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD
timeout ${TEST_TIMEOUT:-240} env JAX_PLATFORMS=cuda,cpu python3 -m pytest -q -m gpu -p no:cacheprovider -o addopts= \
  tests/cudaperf_jax/models/test_cuda_matvec_gpu.py -k "${TESTS:-not one_kernel}" 2>&1 \
  | grep -E "passed|failed|FAILED|Error" | tail -8
echo '{}' > /tmp/none.json
mkdir -p $OUT/steps
steps=${STEPS:-"default: step:CUDAPERF_CUDA_LAYER=step"}
for spec in $steps; do
  name=${spec%%:*}; vars=${spec#*:}
  env OUT=/tmp/step_$name ${vars//,/ } timeout 90 python3 benchmarks/decode_tune.py --new_tokens 64 \
    --candidates /tmp/none.json > $OUT/steps/$name.log 2>&1
  echo "$name: $(grep -E '^baseline \(' $OUT/steps/$name.log || tail -3 $OUT/steps/$name.log)"
done
