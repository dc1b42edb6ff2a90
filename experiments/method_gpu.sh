#!/usr/bin/env bash
# The method's experiment on one GPU (issue 27): zero-shot, SFT, RL with the full reward and RL without the
# structural and ranker terms, each policy evaluated per turn on the test split (families never trained on) and
# on val. Every stage writes a run directory under $ROOT/runs and a stamp when it finished, so running the script
# again skips finished stages and resumes the others from their checkpoints.
#
#   bash experiments/method_gpu.sh ROOT         # ROOT: the repository copy at ROOT/repo, runs under ROOT/runs
#   bash experiments/method_gpu.sh ROOT tasks   # only the task suite
#   bash experiments/method_gpu.sh ROOT prepare # only the stages that need no policy: the tasks and the ranker
#   bash experiments/method_gpu.sh ROOT report  # the table of what has finished, and ROOT/results.tgz
#
# Needs the default policy at $CUDAPERF_CACHE/models (python -m cudaperf_jax.assets fetch) and the Python
# packages of the device image plus the project's (PYTHONPATH). Stages run three at a time where they do not
# depend on each other (one GPU, JAX's memory fraction 0.15-0.35 each; the harness pools time kernels one at a time
# each, so a concurrent stage adds noise to speedups, not to correctness). Sizes are fields below (env overrides).
set -u
ROOT=${1:?usage: method_gpu.sh ROOT [report]}
R=$ROOT/runs
mkdir -p "$R"
cd "$ROOT/repo" || exit 2
MEMF=${MEMF:-0.2}  # JAX memory fraction of an evaluation (0.15 ran out of memory on an 80 GB H100)
export PYTHONUNBUFFERED=1 TF_CPP_MIN_LOG_LEVEL=3 XLA_PYTHON_CLIENT_MEM_FRACTION=$MEMF
SFT_STEPS=${SFT_STEPS:-200}
RL_STEPS=${RL_STEPS:-5}
RL_TASKS=${RL_TASKS:-8}
RL_LR=${RL_LR:-3e-6}
EVAL_TEST=${EVAL_TEST:-32}
EVAL_VAL=${EVAL_VAL:-16}
EVAL_SAMPLES=${EVAL_SAMPLES:-2}
EVAL_TEMP=${EVAL_TEMP:-0.7}  # sampling temperature of the evaluations (the policy writes at 0.7 in RL)
TURNS=${TURNS:-3}
RL_TURNS=${RL_TURNS:-$TURNS}  # refinement turns of the RL rollouts (the evaluations use TURNS)

report() {
  python3 - "$R" <<'EOF'
import json, sys
from pathlib import Path
r = Path(sys.argv[1])
rows = []
for d in sorted(x for x in r.glob("eval_*") if x.is_dir()):
    f = d / "eval.json"
    if not f.is_file():
        rows.append(f"{d.name:<22} (not finished)")
        continue
    s = json.loads(f.read_text())
    per = s.get("per_turn") or []
    def g(x, k):
        v = x.get(k)
        return "-" if v is None else f"{v:.3f}"
    cells = " ".join(f"t{i}: c={g(t, 'correct')} f1={g(t, 'fast_1/eager')} gm={g(t, 'geomean_speedup/eager')} "
                     f"sc={g(t, 'sample_correct')} cut={g(t, 'truncated')}"
                     for i, t in enumerate(per))
    rows.append(f"{d.name:<22} tasks={s.get('tasks')} {cells}")
print("\n".join(rows))
for d in sorted(x for x in r.glob("rl_*") if x.is_dir()):
    m = d / "metrics.jsonl"
    if m.is_file():
        lines = [json.loads(x) for x in m.read_text().splitlines() if x.strip()]
        print(d.name, "steps", len(lines), " ".join(
            f"s{x.get('step')}:" + ",".join(f"{x.get(f'turn{t}/correct', 0):.2f}" for t in range(3)) for x in lines))
EOF
  (cd "$R" && find . -maxdepth 2 \( -name '*.json' -o -name '*.jsonl' -o -name '*.md' -o -name '*.png' -o -name '*.log' \
     -o -name '*.txt' \) -size -20M -print0 | tar -czf "$ROOT/results.tgz" --null -T -)
}
[ "${2:-}" = report ] && { report; exit 0; }

stage() {  # stage NAME BUDGET_S COMMAND...: runs once to completion (stamp NAME.done); killed at the budget
  local name=$1 budget=$2; shift 2
  [ -f "$R/$name.done" ] && return 0
  if [ -f "$R/$name.pid" ] && kill -0 "$(cat "$R/$name.pid")" 2>/dev/null; then  # another instance runs it
    echo "== $name: waiting for the running instance"
    while kill -0 "$(cat "$R/$name.pid")" 2>/dev/null; do sleep 5; done
    [ -f "$R/$name.done" ] && return 0
  fi
  echo "$BASHPID" > "$R/$name.pid"
  echo "== $name start $(date -u +%T)"
  local t0; t0=$(date +%s)
  timeout -s KILL "$budget" "$@" >> "$R/$name.log" 2>&1
  local rc=$?
  echo "== $name rc=$rc $(( $(date +%s) - t0 )) s"
  [ $rc = 0 ] && touch "$R/$name.done"
  return $rc
}

evaluate() {  # evaluate NAME MODEL: the policy on the test and val splits, TURNS turns
  local name=$1 model=$2
  stage "eval_${name}_test" 600 python3 -m experiments.evaluate --config.suite="$ROOT/tasks" --config.split=test \
    --config.max_tasks="$EVAL_TEST" --config.select=spread --config.model="$model" --config.dtype=bfloat16 \
    --config.rollout.samples_per_task="$EVAL_SAMPLES" --config.rollout.temperature="$EVAL_TEMP" --config.rollout.turns="$TURNS" --config.torch_compile=False \
    --config.pass_k="(1,2)" --config.group_by=family --workdir="$R/eval_${name}_test"
  stage "eval_${name}_val" 450 python3 -m experiments.evaluate --config.suite="$ROOT/tasks" --config.split=val \
    --config.max_tasks="$EVAL_VAL" --config.select=spread --config.model="$model" --config.dtype=bfloat16 \
    --config.rollout.samples_per_task="$EVAL_SAMPLES" --config.rollout.temperature="$EVAL_TEMP" --config.rollout.turns="$TURNS" --config.torch_compile=False \
    --config.pass_k="(1,2)" --config.group_by=family --workdir="$R/eval_${name}_val"
}

rl() {  # rl NAME TERMS
  stage "rl_$1" "${RL_BUDGET:-900}" python3 -m experiments.train_rl --config=experiments/configs/rl.py --config.model="$R/sft" \
    --config.tasks.dataset="$ROOT/tasks" --config.steps="$RL_STEPS" --config.tasks_per_step="$RL_TASKS" \
    --config.rollout.turns="$RL_TURNS" --config.grpo.lr="$RL_LR" --config.grpo.micro_batch=4 --config.memory_fraction=0.25 \
    --config.reward.terms="$2" --config.reward.ranker_path="$R/ranker" --workdir="$R/rl_$1"
}

t_start=$(date +%s)
stage tasks 120 python3 -m experiments.build_dataset --out="$ROOT/tasks" --validate_sample=-1
[ "${2:-}" = tasks ] && exit
if [ "${2:-}" = prepare ]; then
  stage ranker 400 env XLA_PYTHON_CLIENT_MEM_FRACTION=0.22 python3 -m experiments.train_ranker --config=experiments/configs/ranker.py --config.steps=1500 \
    --config.compare_features_only=False --workdir="$R/ranker"
  exit
fi
# 1: SFT | the ranker | the base policy's evaluation
stage sft 600 env XLA_PYTHON_CLIENT_MEM_FRACTION=0.35 python3 -m experiments.train_sft --config=experiments/configs/sft.py --config.steps="$SFT_STEPS" \
  --config.progress=False --workdir="$R/sft" &
stage ranker 400 env XLA_PYTHON_CLIENT_MEM_FRACTION=0.22 python3 -m experiments.train_ranker --config=experiments/configs/ranker.py --config.steps=1500 \
  --config.compare_features_only=False --workdir="$R/ranker" &
evaluate zeroshot default &
wait
# 2: RL (full reward) | RL (no structure, no ranker) | the SFT policy's evaluation
rl full correct,speed,structure,ranker,penalty &
rl nostruct correct,speed,penalty &
[ -d "$R/sft/export" ] && evaluate sft "$R/sft/export" &
wait
# 3: the RL policies' evaluations
[ -d "$R/rl_full/policy" ] && evaluate rl_full "$R/rl_full/policy" &
[ -d "$R/rl_nostruct/policy" ] && evaluate rl_nostruct "$R/rl_nostruct/policy" &
wait
# 4: where one RL step's time goes (benchmarks/rl_step.py: SmolLM2-135M and a random Qwen2.5-0.5B shape)
mkdir -p "$R/rl_step"
[ -z "${NO_RL_STEP:-}" ] && stage rl_step 420 env OUT="$R/rl_step" python3 benchmarks/rl_step.py --tasks=8 --samples=8 --turns=3 --new_tokens=512
echo "== all stages in $(( $(date +%s) - t_start )) s"
report
