"""Trains the pairwise ranker offline on the dataset's measured implementations and evaluates it on held-out
families (test) and val, against the structural score alone and the features-only model.

    python -m experiments.train_ranker --config=experiments/configs/ranker.py[:small|:backbone] --workdir=DIR

Writes into the run directory: config.json, metrics.jsonl, checkpoints/ (Orbax), ranker.json (what
`cudaperf_jax.ranker.scorer.Ranker.load(DIR)` needs), results.json, results.txt (the table) and results.png.
"""
from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path

from experiments import launch

launch.define_config("experiments/configs/ranker.py")


def main(config, workdir):
    from cudaperf_jax.experiment import open_run
    from cudaperf_jax.ranker import evaluate as ev
    from cudaperf_jax.ranker import fit
    from cudaperf_jax.ranker.model import RankerConfig
    try:
        mcfg = RankerConfig.from_dict(config.model.to_dict())
    except ValueError as e:
        print(f"error: bad --config.model: {e}", file=sys.stderr)
        sys.exit(2)
    t0 = time.time()
    run = open_run(workdir, config, name="train_ranker")
    try:
        data = fit.prepare(config)
    except ValueError as e:          # a bad config value, no pairs, an outdated features cache
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    counts = {s: {"pairs": len(p), "speed": int((p.kind == 0).sum()), "correct_vs_wrong": int((p.kind == 1).sum())}
              for s, p in data.pairs.items()}
    print(f"[ranker] {len(data.table)} implementations of {len(data.table.tasks)} tasks; pairs {counts}; "
          f"features {data.seconds['features']}", file=sys.stderr)
    t1 = time.time()
    trained = fit.train(config, mcfg, data, run)
    train_s = time.time() - t1
    scorers = {f"ranker_{mcfg.encoder}": trained, "structural": data.structural}
    fo_s = 0.0
    if config.compare_features_only and mcfg.encoder != "features":
        t1 = time.time()
        fo = dataclasses.replace(mcfg, encoder="features")
        scorers["features_only"] = fit.train(config, fo, data, None, steps=config.features_only_steps)
        fo_s = time.time() - t1
    results = fit.evaluate_all(config, data, scorers)
    fit.write_ranker_file(Path(workdir), mcfg, data, trained, config)
    table = ev.table_text(results)
    summary = {"results": results, "pairs": counts, "seconds": {**data.seconds, "train_s": round(train_s, 1),
               "features_only_train_s": round(fo_s, 1), "total_s": round(time.time() - t0, 1)},
               "implementations": len(data.table), "tasks": len(data.table.tasks), "encoder": mcfg.encoder}
    test = results.get("test", {})
    if f"ranker_{mcfg.encoder}" in test and "structural" in test:
        r, s = test[f"ranker_{mcfg.encoder}"], test["structural"]
        summary["goals"] = {
            "test_accuracy_minus_structural": r["pairwise_accuracy"]["all"] - s["pairwise_accuracy"]["all"],
            "test_best_of_n_over_oracle": r["best_of_n"]["pick_over_oracle"]}
        summary["goals"]["met"] = bool(summary["goals"]["test_accuracy_minus_structural"] >= 0.05
                                       and summary["goals"]["test_best_of_n_over_oracle"] >= 0.8)
    run.write_json("results.json", summary)
    (Path(workdir) / "results.txt").write_text(table + "\n")
    ev.plot(results, trained.curve, Path(workdir) / "results.png")
    run.close()
    print(table, file=sys.stderr)
    print(f"[ranker] goals: {summary.get('goals')}; {summary['seconds']}", file=sys.stderr)
    print(f"[ranker] wrote {workdir}/results.json, results.txt, results.png, ranker.json, checkpoints/", file=sys.stderr)


if __name__ == "__main__":
    launch.run(main, name="train_ranker")
