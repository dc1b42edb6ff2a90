#!/usr/bin/env bash
# One device call (~3.5 min; also the CUDA top-k in the step; FULL=1 adds the profile and the fused decoder's GPU tests, ~6 min): the CUDA finish kernel (cuda_matvec.finish, PDL) in the fused step.
# 1. the CUDA matvec's GPU tests; 2. decode steps: default (CUDA finish) against the Pallas finish, twice each,
# interleaved; 3. generation.py with the defaults.
set -u
OUT=${OUT:-out}
mkdir -p "$OUT"
source benchmarks/h200_env.sh
timeout 100 env JAX_PLATFORMS=cuda,cpu python3 -m pytest -q -m gpu -p no:cacheprovider -o addopts= \
  tests/cudaperf_jax/models/test_cuda_matvec_gpu.py 2>&1 | tail -6
echo '{}' > /tmp/none.json
step() {  # name, then env assignments
  local name=$1; shift
  env OUT=/tmp/step_$name "$@" timeout 45 python3 benchmarks/decode_tune.py --new_tokens 64 --candidates /tmp/none.json \
    2>&1 | grep -E "^baseline \(|rror" | sed "s/^/$name: /"
}
step cuda_finish CUDAPERF_CUDA_FINISH=on
step pallas_finish CUDAPERF_CUDA_FINISH=off
step cuda_finish_2 CUDAPERF_CUDA_FINISH=on
step pallas_finish_2 CUDAPERF_CUDA_FINISH=off
step cuda_finish_topk CUDAPERF_CUDA_FINISH=on CUDAPERF_CUDA_TOPK=on
export CUDAPERF_CUDA_FINISH=${GEN_FINISH:-on}
OUT=$OUT/gen timeout 70 python3 benchmarks/generation.py --models=qwen2.5-1.5b-random --gguf=/nonexistent --batches=1 \
  --no_hf --greedy_check_tokens=0 2>&1 | grep -E "decode|HBM|rror" | tail -4
[ "${FULL:-0}" = 1 ] && OUT=$OUT/prof timeout 80 python3 benchmarks/decode_profile.py --variants=fused --top 12 2>&1 \
  | grep -v Warning | tail -16
[ "${FULL:-0}" = 1 ] && timeout 130 env JAX_PLATFORMS=cuda,cpu python3 -m pytest -q -m gpu -p no:cacheprovider \
  -o addopts= tests/cudaperf_jax/models/test_decode_fused_gpu.py 2>&1 | tail -4
