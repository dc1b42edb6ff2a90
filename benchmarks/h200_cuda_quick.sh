#!/usr/bin/env bash
# The shortest useful device call (~2.5 min): GPU tests of the CUDA finish and top-k, then the decode step with
# the defaults, with the CUDA finish, and with the CUDA finish and top-k (decode_tune.py baselines).
set -u
source benchmarks/h200_env.sh
timeout 75 env JAX_PLATFORMS=cuda,cpu python3 -m pytest -q -m gpu -p no:cacheprovider -o addopts= \
  tests/cudaperf_jax/models/test_cuda_matvec_gpu.py -k "finish or top_k or sampler" 2>&1 | tail -6
echo '{}' > /tmp/none.json
step() {  # name, then env assignments
  local name=$1; shift
  env OUT=/tmp/step_$name "$@" timeout 40 python3 benchmarks/decode_tune.py --new_tokens 64 --candidates /tmp/none.json \
    2>&1 | grep -E "^baseline \(|rror" | sed "s/^/$name: /"
}
step finish_topk CUDAPERF_CUDA_FINISH=on CUDAPERF_CUDA_TOPK=on
step default
step finish CUDAPERF_CUDA_FINISH=on
