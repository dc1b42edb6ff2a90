#!/usr/bin/env bash
# One device call (~9.5 min): in-step tiling search for the fused decode path (decode_tune.py, which writes
# the best table so far after every improvement), the shipped default's batch-1 decode of the 1.5B model with
# the chosen table (generation.py), then the fused path's GPU tests under that table. Everything lands in $OUT.
# TUNE_S (default 380) bounds the search; PROFILE=1 adds the per-kernel profile of the chosen table.
set -u
OUT=${OUT:-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false TF_CPP_MIN_LOG_LEVEL=3
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,clocks.max.mem --format=csv,noheader
OUT=$OUT/tune timeout "${TUNE_S:-380}" python3 benchmarks/decode_tune.py --new_tokens 64 --table_out "$OUT/fused_tuned.json" \
  ${TUNE_ARGS:-} 2>&1 | grep -v Warning
[ -s "$OUT/fused_tuned.json" ] && export CUDAPERF_FUSED_TABLE=$OUT/fused_tuned.json && cat "$OUT/fused_tuned.json"
OUT=$OUT/gen timeout 70 python3 benchmarks/generation.py --models=qwen2.5-1.5b-random --gguf=/nonexistent --batches=1 \
  --no_hf --greedy_check_tokens=0 2>&1 | grep -E "decode|HBM|rror" | tail -4
[ "${PROFILE:-0}" = 1 ] && OUT=$OUT/prof timeout 90 python3 benchmarks/decode_profile.py --variants=fused --top 12 2>&1 \
  | grep -v Warning | tail -30
timeout 130 env JAX_PLATFORMS=cuda,cpu python3 -m pytest -q -m gpu -p no:cacheprovider -o addopts= \
  tests/cudaperf_jax/models/test_decode_fused_gpu.py tests/cudaperf_jax/models/test_gemv_gpu.py 2>&1 | tail -4
