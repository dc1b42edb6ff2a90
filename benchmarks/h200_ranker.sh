#!/usr/bin/env bash
# The ranker's H200 run (issue 28): trains and evaluates the transformer ranker (with the features-only model and the
# structural score beside it) and the SmolLM2-backbone ranker on the whole dataset, one H200, ~5-7 minutes.
#   OUT=/path bash benchmarks/h200_ranker.sh
# Writes $OUT/ranker_{transformer,backbone}.{json,txt,png} (results.json / the table / the plot of each run),
# $OUT/ranker_transformer/ (the whole run directory: config, metrics, Orbax checkpoints, ranker.json) and the logs.
set -u
OUT=${OUT:-out}
mkdir -p "$OUT"
source benchmarks/h200_env.sh
GGUF=${SMOLLM2_GGUF:-/root/model/SmolLM2-135M-Instruct.Q4_1.gguf}
TR_S=${RANKER_TRANSFORMER_S:-200}
BB_S=${RANKER_BACKBONE_S:-300}
t0=$(date +%s)
timeout "$TR_S" python3 -m experiments.train_ranker --config=experiments/configs/ranker.py \
  --workdir="$OUT/ranker_transformer" > "$OUT/ranker_transformer.log" 2>&1
echo "transformer: rc $? in $(( $(date +%s) - t0 )) s"
t1=$(date +%s)
timeout "$BB_S" python3 -m experiments.train_ranker --config=experiments/configs/ranker.py:backbone \
  --config.model.backbone="$GGUF" --config.compare_features_only=False --workdir=/tmp/ranker_backbone \
  > "$OUT/ranker_backbone.log" 2>&1
echo "backbone: rc $? in $(( $(date +%s) - t1 )) s"
for r in transformer:"$OUT/ranker_transformer" backbone:/tmp/ranker_backbone; do
  name=${r%%:*}; dir=${r#*:}
  for ext in json txt png; do [ -f "$dir/results.$ext" ] && cp "$dir/results.$ext" "$OUT/ranker_$name.$ext"; done
  [ -f "$dir/results.txt" ] && { echo "== $name"; cat "$dir/results.txt"; }
  grep -h "goals" "$OUT/ranker_$name.log" | tail -1
done
echo "total $(( $(date +%s) - t0 )) s"
