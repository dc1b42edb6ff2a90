#!/usr/bin/env bash
# One device call for the fused decode path (2026-12-02): GPU tests, tiling sweep, kernel profile of the
# variants, then benchmarks/generation.py batch-1 decode of the 1.5B model with the swept tilings, with and
# without the L2 prefetch. Results: $OUT/a/results.tgz (session jobs) and $OUT/b/results.tgz (decode runs).
set -u
OUT=${OUT:-out}
OUT=$OUT/a FUSED_SWEEP=${FUSED_SWEEP:-12} PROFILE_VARIANTS=${PROFILE_VARIANTS:-gemv,fused,fused_pf8,fused_pf20,fused_pf32} \
  bash benchmarks/h200_session.sh fusedtests:100 fusedsweep:170 profile:190 topk:40
T=$(ls /tmp/h200_results.*/fusedsweep/fused_tuned.json 2>/dev/null | head -1)
[ -n "$T" ] && export CUDAPERF_FUSED_TABLE=$T && cp "$T" "$OUT/fused_tuned.json"
for pf in 0 ${DECODE_PF:-20}; do
  CUDAPERF_DECODE_FUSED=on CUDAPERF_FUSED_PREFETCH_MB=$pf OUT=$OUT/b/pf$pf DECODE_VARIANTS="qwen2.5-1.5b-random auto" \
    bash benchmarks/h200_session.sh decode:100
  mv "$OUT/b/pf$pf/results.tgz" "$OUT/decode_pf$pf.tgz" 2>/dev/null
done
