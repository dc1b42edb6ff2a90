#!/usr/bin/env bash
# decode_tune.py baselines (64 new tokens after 128, ms/step) of the random Qwen2.5-1.5B under several environments,
# one process each: STEPS="name:VAR=v,VAR=v ..." (an empty list after the colon: the defaults); XLA_FLAGS values
# may not contain commas or spaces here, so XLA_WHILE=1 in a spec stands for the command-buffer flag with WHILE and
# CONDITIONAL added, and MODEL=name picks decode_tune.py's --model. ROUNDS=n runs the list n times over, interleaved
# (the step time of one process varies by ~2% between identical runs: compare medians). Logs under $OUT/steps.
set -u
source benchmarks/h200_env.sh
echo '{}' > /tmp/none.json
mkdir -p $OUT/steps
for round in $(seq 1 ${ROUNDS:-1}); do
for spec in ${STEPS:-"default:"}; do
  name=${spec%%:*}; vars=${spec#*:}; flags=""
  case ",$vars," in *,XLA_WHILE=1,*) flags="--xla_gpu_enable_command_buffer=FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CUDNN,WHILE,CONDITIONAL";; esac
  vars=${vars//XLA_WHILE=1/}
  env XLA_FLAGS="$flags" OUT=/tmp/step_$name ${vars//,/ } timeout ${STEP_TIMEOUT:-60} bash -c 'python3 \
    benchmarks/decode_tune.py --model ${MODEL:-qwen2.5-1.5b-random} --new_tokens 64 --repeats ${REPEATS:-3} \
    --candidates /tmp/none.json' \
    > $OUT/steps/$name.$round.log 2>&1
  echo "$name: $(grep -E '^baseline \(' $OUT/steps/$name.$round.log || tail -n 3 $OUT/steps/$name.$round.log)"
done
done
