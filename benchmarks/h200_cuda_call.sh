#!/usr/bin/env bash
# One device call (~8 min): the first GPU run of the CUDA FFI matvec (cudaperf_jax/models/cuda_matvec.py).
# 1. its GPU tests (every decode shape against XLA with and without programmatic dependent launch, chains of
#    launches reading each other's partials, the norm/swiglu prologues against decode_fused's, and the fused
#    decoder with CUDAPERF_DECODE_CUDA=on against the Pallas one);
# 2. benchmarks/decode_gemv.py on the Qwen2.5-1.5B shapes: per shape XLA, Pallas and CUDA (splits, PDL off/on),
#    and the 28-layer weight streams;
# 3. the real batch-1 decode step of the random Qwen2.5-1.5B with CUDAPERF_DECODE_CUDA off and on
#    (decode_tune.py baselines: off, on, on with other splits, off), generation.py and the profile with it on.
# The Pallas matvecs of the fused step stream gate_up at 3.1 TB/s, down 2.3, o 1.0, qkv 1.6 (WORKSPACE_NOTES.md).
set -u
OUT=${OUT:-out}
mkdir -p "$OUT"
source benchmarks/h200_env.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader; which nvcc; nvcc --version | tail -1
timeout 150 env JAX_PLATFORMS=cuda,cpu python3 -m pytest -q -m gpu -p no:cacheprovider -o addopts= \
  tests/cudaperf_jax/models/test_cuda_matvec_gpu.py 2>&1 | tail -15
OUT=$OUT/gemv timeout 120 python3 benchmarks/decode_gemv.py --shapes=qwen2.5-1.5b --cuda 2>&1 | grep -v Warning | tail -40
echo '{}' > /tmp/none.json
# off, on with default splits, on with fewer and with more splits (CUDAPERF_CUDA_SPLIT), off again (drift check)
i=0
for run in off:: on:: on:1536x2048=6,8960x1536=28 on:1536x17920=8,8960x1536=112,1536x1536=48 off2::; do
  c=${run%%:*}; splits=${run#*:}; splits=${splits#:}; i=$((i + 1))
  OUT=$OUT/step_${i}_$c CUDAPERF_DECODE_CUDA=${c%2} CUDAPERF_CUDA_SPLIT=$splits timeout 50 python3 benchmarks/decode_tune.py \
    --new_tokens 64 --candidates /tmp/none.json 2>&1 | grep -E "^baseline \(|rror" | sed "s/^/cuda $c [$splits]: /"
done
OUT=$OUT/step_nocmdbuf CUDAPERF_DECODE_CUDA=on CUDAPERF_CUDA_CMDBUF=off timeout 50 python3 benchmarks/decode_tune.py \
  --new_tokens 64 --candidates /tmp/none.json 2>&1 | grep -E "^baseline \(|rror" | sed "s/^/cuda on, no command buffers: /"
export CUDAPERF_DECODE_CUDA=on
OUT=$OUT/gen timeout 70 python3 benchmarks/generation.py --models=qwen2.5-1.5b-random --gguf=/nonexistent --batches=1 \
  --no_hf --greedy_check_tokens=0 2>&1 | grep -E "decode|HBM|rror" | tail -4
OUT=$OUT/prof timeout 90 python3 benchmarks/decode_profile.py --variants=fused --top 14 2>&1 | grep -v Warning | tail -20
