#!/usr/bin/env bash
# One device call (~8 min): the CUDA matvec as the fused decode path's default on Hopper (CUDAPERF_DECODE_CUDA
# auto, cuda_matvec.TUNED tilings, CUDAPERF_CUDA_EPILOGUE partials).
# 1. GPU tests: the CUDA matvec's, the fused decoder's and the GEMV's (the defaults now run the CUDA kernel);
# 2. decode steps of the random Qwen2.5-1.5B (decode_tune.py baselines) for the default and its variants;
# 3. generation.py (the number) and the profile with the defaults.
set -u
OUT=${OUT:-out}
mkdir -p "$OUT"
source benchmarks/h200_env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
echo '{}' > /tmp/none.json
step() {  # name, then env assignments
  local name=$1; shift
  env OUT=/tmp/step_$name "$@" timeout 45 python3 benchmarks/decode_tune.py --new_tokens 64 --candidates /tmp/none.json \
    2>&1 | grep -E "^baseline \(|rror" | sed "s/^/$name: /"
}
step default
step epi_fused CUDAPERF_CUDA_EPILOGUE=fused
step epi_qkv CUDAPERF_CUDA_EPILOGUE=qkv
step off CUDAPERF_DECODE_CUDA=off
step down_10_64_8 CUDAPERF_CUDA_SPLIT=8960x1536=10:64:8
step fused_down_10_64_8 CUDAPERF_CUDA_EPILOGUE=fused CUDAPERF_CUDA_SPLIT=8960x1536=10:64:8,1536x1536=8:64:8
step gate_up_8_256_4 CUDAPERF_CUDA_SPLIT=1536x17920=8:256:4
step default_again
OUT=$OUT/gen timeout 70 python3 benchmarks/generation.py --models=qwen2.5-1.5b-random --gguf=/nonexistent --batches=1 \
  --no_hf --greedy_check_tokens=0 2>&1 | grep -E "decode|HBM|rror" | tail -4
OUT=$OUT/prof timeout 80 python3 benchmarks/decode_profile.py --variants=fused --top 12 2>&1 | grep -v Warning | tail -16
timeout 170 env JAX_PLATFORMS=cuda,cpu python3 -m pytest -q -m gpu -p no:cacheprovider -o addopts= \
  tests/cudaperf_jax/models/test_cuda_matvec_gpu.py tests/cudaperf_jax/models/test_decode_fused_gpu.py \
  tests/cudaperf_jax/models/test_gemv_gpu.py 2>&1 | tail -8
