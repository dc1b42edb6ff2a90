#!/usr/bin/env bash
# One device call (~4 min) for the one-kernel decoder layer (CUDAPERF_CUDA_LAYER): its GPU tests, then the batch-1
# step of the random Qwen2.5-1.5B (decode_tune.py baselines, 64 tokens) with the seven-kernel default and with the
# layer kernel under a few settings. STEPS="name:VAR=v,VAR=v ..." replaces the step list.
set -u
source benchmarks/h200_env.sh
python3 -c "from cudaperf_jax.models import cuda_matvec as cm; print('built', cm.register())" 2>&1 | tail -2
timeout ${TEST_TIMEOUT:-150} env JAX_PLATFORMS=cuda,cpu python3 -m pytest -q -m gpu -p no:cacheprovider -o addopts= -x \
  tests/cudaperf_jax/models/test_cuda_matvec_gpu.py -k "${TESTS:-one_kernel}" 2>&1 | tail -${TEST_TAIL:-8}
echo '{}' > /tmp/none.json
STEPS=${STEPS:-"default: layer:CUDAPERF_CUDA_LAYER=on layer_s8:CUDAPERF_CUDA_LAYER=on,CUDAPERF_CUDA_LAYER_ATTN_SPLITS=8 layer_b2:CUDAPERF_CUDA_LAYER=on,CUDAPERF_CUDA_LAYER_BLOCKS=2 phases:CUDAPERF_CUDA_LAYER=phases"}
for spec in $STEPS; do
  name=${spec%%:*}; vars=${spec#*:}
  env OUT=/tmp/step_$name ${vars//,/ } timeout ${STEP_TIMEOUT:-60} python3 benchmarks/decode_tune.py --new_tokens 64 \
    --candidates /tmp/none.json 2>&1 | grep -E "^baseline \(|rror" | tail -3 | sed "s/^/$name: /"
done
