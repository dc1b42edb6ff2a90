"""Evaluates a policy, or a directory of solution files, on a suite; KernelBench's metrics and more.

    python -m experiments.evaluate --config.suite=data/kernelbench/level1 --config.solutions=DIR --workdir=W
    python -m experiments.evaluate --config.suite=data/tasks --config.split=test --config.model=default \
        --config.rollout.samples_per_task=4 --config.rollout.turns=2 --workdir=W

Writes W/config.json, W/candidates.jsonl (one judged candidate per line), W/eval.json, W/eval.md and
W/eval_turns.png: correctness, fast_p for p in {0, 1, 1.5, 2} over all tasks (against PyTorch eager and,
on a GPU, torch.compile), geometric-mean speedup over correct, pass@k (unbiased), best-of-n (oracle,
and ranker-selected with --config.ranker), per-turn curves and per-level/family tables. The ConfigDict becomes an eval.config.EvalConfig (its `rollout`
section is the rl.rollout.RolloutConfig the policy samples with, every field passed through); candidates are judged
through one rewards.bridge.HarnessClient.
"""
from __future__ import annotations

import sys
from pathlib import Path

from experiments import launch

launch.define_config("experiments/configs/evaluate.py")


def _path(p: str) -> Path:
    q = Path(p)
    return q if q.is_absolute() else launch.REPO / q


def solution_records(client, tasks, solutions: dict) -> list[dict]:
    from cudaperf_jax.eval.report import record
    items, keys = [], []
    for t in tasks:
        for k, src in enumerate(solutions.get(t.id, [])):
            items.append((t, src))
            keys.append((t, k))
    results = client.evaluate(items)
    from cudaperf_jax.eval.abi import classify
    return [{**record(t, 0, k, r, source=src), "abi": classify(t, src, r)}
            for (t, k), (_, src), r in zip(keys, items, results)]


def policy_records(pool, tasks, cfg) -> tuple[list[dict], list]:
    """(records, candidates) of the policy cfg.model on `tasks` (experiments/policy_eval.py)."""
    from experiments import policy_eval
    sampler = policy_eval.load_sampler(cfg.model, dtype=cfg.dtype, kernels=cfg.decode_kernels)
    ev = policy_eval.evaluate_policy(sampler, pool, tasks, cfg.rollout, seed=cfg.seed, dedupe=cfg.dedupe,
                                     progress=True, log=lambda line: print(f"[evaluate] {line}", file=sys.stderr,
                                                                           flush=True))
    print(f"[evaluate] {len(ev.records)} answers, {ev.judged} judged by the harness, {ev.deduplicated} repeats "
          "given their first verdict", file=sys.stderr)
    print(f"[evaluate] {policy_eval.time_line(ev)}", file=sys.stderr)
    return ev.records, ev.candidates


def ranker_scores(path: str, tasks, records: list[dict]) -> dict:
    from cudaperf_jax.ranker.scorer import (
        Ranker,  # built by the ranker work; imported only when asked for
    )
    by_id = {t.id: t for t in tasks}
    ranker = Ranker.load(path)
    scores = ranker.score([by_id[r["task"]] for r in records], [r["source"] for r in records],
                          [r.get("features") or {} for r in records])
    return {(r["task"], r["turn"], r["sample"]): float(s) for r, s in zip(records, scores)}


def main(config, workdir):
    from cudaperf_jax.eval import report, suites
    from cudaperf_jax.eval.config import EvalConfig
    from cudaperf_jax.experiment import open_run
    from cudaperf_jax.experiment.config import from_configdict
    from cudaperf_jax.rewards.bridge import HarnessClient
    from kernels_harness.run.pool import HarnessPool
    cfg = from_configdict(EvalConfig, config)
    cfg.check_sources()
    run = open_run(workdir, cfg, name="evaluate")
    tasks = suites.load_suite(_path(cfg.suite), split=cfg.split, max_tasks=cfg.max_tasks, select=cfg.select,
                              kernelbench_cache=_path(cfg.kernelbench_cache) if cfg.kernelbench_cache else None)
    print(f"[evaluate] {len(tasks)} tasks from {cfg.suite}", file=sys.stderr)
    if cfg.model:
        import jax
        jax.devices()   # JAX takes its memory first: the harness's device budget is a share of what it leaves
    with HarnessPool(progress=True, **cfg.pool_kwargs()) as pool:
        if cfg.solutions:
            client = HarnessClient(pool, tasks, prompt=cfg.rollout.prompt)
            records = solution_records(client, tasks, suites.load_solutions(_path(cfg.solutions), tasks))
        else:
            records, _ = policy_records(pool, tasks, cfg)
    scores = ranker_scores(cfg.ranker, tasks, records) if cfg.ranker else None
    ks = tuple(k for k in cfg.pass_k if k <= max(1, cfg.rollout.samples_per_task if cfg.model else
                                                  max((r["sample"] + 1 for r in records), default=1)))
    summary = report.build_summary(records, tasks, ks=ks, group_by=cfg.group_by, scores=scores)
    paths = report.write_report(summary, records, workdir)
    run.log(0, {k.replace("/", "_"): v for k, v in summary["best_of_n"].items()})
    run.close()
    print(report.markdown(summary), file=sys.stderr)
    print(f"[evaluate] wrote {', '.join(p.name for p in paths)} in {workdir}", file=sys.stderr)


if __name__ == "__main__":
    launch.run(main, name="evaluate")
