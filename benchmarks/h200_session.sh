#!/usr/bin/env bash
# Runs a batch of GPU jobs on the lent H200 in one call and packs everything they wrote into $OUT.
#   bash benchmarks/h200_session.sh JOB[:SECONDS] ...
# Jobs: probe corpus gputests gputests_ds gemvtests harness features generation measure scaling decodeflags
# gemv gemvshapes decode ablation fusedsweep (FUSED_SWEEP) profile (PROFILE_VARIANTS) fusedtests topk.
# measure resumes from $MEASURE_RESUME (a results.jsonl of an earlier call) when that is set.
# Each job gets a wall-clock limit (default below), writes into $OUT/<job>/ and its log to
# $OUT/<job>.log; one failure never stops the others. At the end all of it is packed into
# $OUT/results.tgz (the device tool returns at most 8 files) and a summary is printed.
set -u
OUT=${OUT:-out}
mkdir -p "$OUT"
RES=$(mktemp -d /tmp/h200_results.XXXX)
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false TF_CPP_MIN_LOG_LEVEL=3
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
GGUF=${SMOLLM2_GGUF:-/root/model/SmolLM2-135M-Instruct.Q4_1.gguf}
declare -A DEFAULT=([probe]=120 [corpus]=150 [gputests]=240 [harness]=330 [features]=240 [generation]=330 [measure]=200 [scaling]=240)
GPU_PYTEST=(env JAX_PLATFORMS=cuda,cpu python3 -m pytest -q -m gpu -p no:cacheprovider -o addopts= --timeout=300)
summary=()
for spec in "$@"; do
  job=${spec%%:*}; secs=${spec#*:}; [ "$secs" = "$spec" ] && secs=${DEFAULT[$job]:-200}
  dir=$RES/$job; mkdir -p "$dir"
  t0=$(date +%s)
  case $job in
    probe)      cmd=(python3 benchmarks/device_probe.py) ;;
    corpus)     cmd=(python3 -m kernels_harness.emulation.corpus_gpu --out "$dir" --jobs 16) ;;
    gputests)   cmd=("${GPU_PYTEST[@]}" --durations=10 tests/kernels_harness --junitxml="$dir/junit.xml") ;;
    harness)    cmd=(python3 benchmarks/harness_throughput.py --total-budget-s $((secs - 30))) ;;
    features)   cmd=(python3 benchmarks/features_validation.py --budget-s $((secs - 30))) ;;
    generation) cmd=(python3 benchmarks/generation.py --gguf="$GGUF" --time_budget_s $((secs - 30))) ;;
    measure)    [ -n "${MEASURE_RESUME:-}" ] && cp "$MEASURE_RESUME" "$dir/results.jsonl"
                cmd=(python3 -m kernels_harness.datasets.measure --out "$dir" --max_seconds $((secs - 40))
                     --target_ms "${MEASURE_TARGET_MS:-10}" --max_reps "${MEASURE_MAX_REPS:-20}") ;;
    gemvtests)  cmd=("${GPU_PYTEST[@]}" tests/cudaperf_jax/models/test_gemv_gpu.py) ;;
    ablation)   cmd=(python3 benchmarks/decode_ablation.py --model=qwen2.5-1.5b-random) ;;
    fusedsweep) cmd=(python3 benchmarks/decode_fused.py --sweep "${FUSED_SWEEP:-24}" --table_out "$dir/fused_tuned.json") ;;
    profile)    # with the tilings of an earlier fusedsweep job of the same call when there are any
                [ -f "$RES/fusedsweep/fused_tuned.json" ] && export CUDAPERF_FUSED_TABLE=$RES/fusedsweep/fused_tuned.json
                cmd=(python3 benchmarks/decode_profile.py --model=qwen2.5-1.5b-random --variants="${PROFILE_VARIANTS:-gemv,fused}") ;;
    topk)       cmd=(python3 benchmarks/topk.py) ;;
    fusedtests) cmd=("${GPU_PYTEST[@]}" tests/cudaperf_jax/models/test_decode_fused_gpu.py) ;;
    gemvshapes) cmd=(python3 benchmarks/decode_gemv.py --shapes=qwen2.5-1.5b,smollm2-135m) ;;
    gemv)       cmd=(python3 benchmarks/decode_gemv.py --sweep 24 --shapes=qwen2.5-1.5b,smollm2-135m --table_out "$dir/gemv_tuned.json") ;;
    gputests_ds) cmd=("${GPU_PYTEST[@]}" tests/kernels_harness/datasets) ;;
    decode)     # batch-1 decode (benchmarks/generation.py), one run per "MODEL GEMV_MODE [FLAGS]" in $DECODE_VARIANTS
                # (;-separated; default: the 1.5B model without and with the Pallas matvec kernel), with the
                # tilings of an earlier gemv job of the same call when there are any
                [ -f "$RES/gemv/gemv_tuned.json" ] && export CUDAPERF_GEMV_TABLE=$RES/gemv/gemv_tuned.json
                export DECODE_VARIANTS=${DECODE_VARIANTS:-"qwen2.5-1.5b-random off;qwen2.5-1.5b-random auto"}
                cmd=(bash -c 'IFS=";" read -ra VS <<< "$DECODE_VARIANTS"; n=${#VS[@]}; for v in "${VS[@]}"; do set -- $v
                  echo "### $v table=${CUDAPERF_GEMV_TABLE:-}"; d=$OUT/${1}_$2${3:-}; mkdir -p $d
                  CUDAPERF_DECODE_GEMV=$2 OUT=$d timeout $(( ('$secs' - 10) / n )) python3 benchmarks/generation.py --models=$1 --gguf=/nonexistent --batches=1 --no_hf --greedy_check_tokens=0 $3 2>&1 | grep -E "decode|matvec|Error|error|HBM" | tail -6; done') ;;
    scaling)    cmd=(python3 benchmarks/scaling.py --gpus=1) ;;
    decodeflags) # batch-1 decode of the 1.5B model under XLA command-buffer (CUDA graph) settings
                cmd=(bash -c 'for f in "" "--xla_gpu_enable_command_buffer=FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CUDNN,WHILE,CONDITIONAL" "--xla_gpu_enable_command_buffer=FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CUDNN,WHILE,CONDITIONAL --xla_gpu_graph_min_graph_size=1"; do
                  echo "### XLA_FLAGS=$f"; d=$OUT/v$((++i)); mkdir -p $d
                  XLA_FLAGS="$f" OUT=$d timeout 80 python3 benchmarks/generation.py --models=qwen2.5-1.5b-random --batches=1 --no_hf --greedy_check_tokens=0 2>&1 | grep -E "decode|matvec|Error|error" | tail -4; done') ;;
    *) echo "unknown job $job"; continue ;;
  esac
  echo "=== $job (limit ${secs}s): ${cmd[*]}"
  OUT="$dir" timeout --kill-after=10 "$secs" "${cmd[@]}" > "$RES/$job.log" 2>&1
  rc=$?
  summary+=("$job rc=$rc $(( $(date +%s) - t0 ))s")
  tail -n 25 "$RES/$job.log"
  tar czf "$OUT/results.tgz" -C "$RES" .   # after every job: a call cut short still returns what ran
done
echo "=== summary"; printf '%s\n' "${summary[@]}"
