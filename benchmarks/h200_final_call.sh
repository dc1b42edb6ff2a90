#!/usr/bin/env bash
# One device call (~9.5 min): the fused path's GPU tests, in-step tiling choice for the fused decode path (decode_tune.py), the
# shipped default's batch-1 decode of the 1.5B model with the chosen tilings (generation.py), and the
# SmolLM2-shaped model's decode under each path (decode_profile.py). Everything lands in $OUT.
set -u
OUT=${OUT:-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false TF_CPP_MIN_LOG_LEVEL=3
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD
timeout 90 env JAX_PLATFORMS=cuda,cpu python3 -m pytest -q -m gpu -p no:cacheprovider -o addopts= \
  tests/cudaperf_jax/models/test_decode_fused_gpu.py 2>&1 | tail -3
OUT=$OUT/tune timeout 330 python3 benchmarks/decode_tune.py --table_out "$OUT/fused_tuned.json" 2>&1 | grep -v Warning
[ -s "$OUT/fused_tuned.json" ] && export CUDAPERF_FUSED_TABLE=$OUT/fused_tuned.json
OUT=$OUT/gen timeout 70 python3 benchmarks/generation.py --models=qwen2.5-1.5b-random --gguf=/nonexistent --batches=1 \
  --no_hf --greedy_check_tokens=0 2>&1 | grep -E "decode|HBM|rror" | tail -4
OUT=$OUT/smol timeout 70 python3 benchmarks/decode_profile.py --model=smollm2-135m --variants=xla,gemv,fused --top 0 2>&1 | grep -E "^==|rror"
