#!/usr/bin/env bash
# One device call (~8 min): the CUDA FFI matvec with its split-K epilogues (cuda_matvec.py).
# 1. its GPU tests (sum and residual epilogues against finish, PDL chains);
# 2. benchmarks/decode_gemv.py on the Qwen2.5-1.5B shapes: CUDA tilings (split, columns per block, unroll) per
#    shape; the fastest per shape go to $OUT/cuda_spec (CUDAPERF_CUDA_SPLIT format);
# 3. the batch-1 decode step of the random Qwen2.5-1.5B (decode_tune.py baselines): Pallas; CUDA with default
#    tilings; CUDA with the tuned ones, with the fused epilogues and with finish kernels; Pallas again;
# 4. generation.py and the profile with CUDA on and the tuned tilings.
set -u
OUT=${OUT:-out}
mkdir -p "$OUT"
source benchmarks/h200_env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
timeout 150 env JAX_PLATFORMS=cuda,cpu python3 -m pytest -q -m gpu -p no:cacheprovider -o addopts= \
  tests/cudaperf_jax/models/test_cuda_matvec_gpu.py 2>&1 | tail -12
OUT=$OUT/gemv timeout 170 python3 benchmarks/decode_gemv.py --shapes=qwen2.5-1.5b --cuda --layers=0 \
  --cuda_spec_out=$OUT/cuda_spec 2>&1 | grep -v Warning | tail -45
SPEC=$(cat $OUT/cuda_spec 2>/dev/null)
echo '{}' > /tmp/none.json
step() {  # name, then env assignments
  local name=$1; shift
  env OUT=/tmp/step_$name "$@" timeout 45 python3 benchmarks/decode_tune.py --new_tokens 64 --candidates /tmp/none.json \
    2>&1 | grep -E "^baseline \(|rror" | sed "s/^/$name: /"
}
step off CUDAPERF_DECODE_CUDA=off
step on_default CUDAPERF_DECODE_CUDA=on
step on_tuned CUDAPERF_DECODE_CUDA=on CUDAPERF_CUDA_SPLIT=$SPEC
step on_tuned_finish CUDAPERF_DECODE_CUDA=on CUDAPERF_CUDA_SPLIT=$SPEC CUDAPERF_CUDA_EPILOGUE=partials
step on_default_u8 CUDAPERF_DECODE_CUDA=on CUDAPERF_CUDA_UNROLL=8
step off_again CUDAPERF_DECODE_CUDA=off
export CUDAPERF_DECODE_CUDA=on CUDAPERF_CUDA_SPLIT=$SPEC
OUT=$OUT/gen timeout 70 python3 benchmarks/generation.py --models=qwen2.5-1.5b-random --gguf=/nonexistent --batches=1 \
  --no_hf --greedy_check_tokens=0 2>&1 | grep -E "decode|HBM|rror" | tail -4
OUT=$OUT/prof timeout 90 python3 benchmarks/decode_profile.py --variants=fused --top 16 2>&1 | grep -v Warning | tail -22
