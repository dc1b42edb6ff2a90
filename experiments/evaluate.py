"""Evaluates a policy, or a directory of solution files, on a suite; KernelBench's metrics and more.

    python -m experiments.evaluate --config.suite=data/kernelbench/level1 --config.solutions=DIR --workdir=W
    python -m experiments.evaluate --config.suite=data/tasks --config.split=test --config.model=default \
        --config.samples_per_task=4 --config.turns=2 --workdir=W

Writes W/config.json, W/candidates.jsonl (one judged candidate per line), W/eval.json, W/eval.md and
W/eval_turns.png: correctness, fast_p for p in {0, 1, 1.5, 2} over all tasks (against PyTorch eager and,
on a GPU, torch.compile), geometric-mean speedup over correct, pass@k (unbiased), best-of-n (oracle,
and ranker-selected with --config.ranker), per-turn curves and per-level/family tables.
"""
from __future__ import annotations

import sys
from pathlib import Path

from experiments import launch

launch.define_config("experiments/configs/evaluate.py")


def _path(p: str) -> Path:
    q = Path(p)
    return q if q.is_absolute() else launch.REPO / q


def _validate(config) -> None:
    if bool(config.solutions) == bool(config.model):
        raise ValueError("give exactly one of --config.solutions=DIR (solution files) or --config.model=PATH "
                         "(a policy)")
    if config.samples_per_task < 1 or config.turns < 1:
        raise ValueError("samples_per_task and turns must be at least 1")
    if config.select not in ("first", "spread"):
        raise ValueError("select must be 'first' or 'spread'")
    if config.group_by not in ("level", "family"):
        raise ValueError("group_by must be 'level' or 'family'")


def solution_records(pool, tasks, solutions: dict) -> list[dict]:
    from cudaperf_jax.eval.report import record
    items, keys = [], []
    for t in tasks:
        for k, src in enumerate(solutions.get(t.id, [])):
            items.append((t, src))
            keys.append((t, k))
    results = pool.evaluate(items)
    from cudaperf_jax.eval.abi import classify
    return [{**record(t, 0, k, r, source=src), "abi": classify(t, src, r)}
            for (t, k), (_, src), r in zip(keys, items, results)]


def policy_records(pool, tasks, config) -> tuple[list[dict], list]:
    """(records, candidates) of the policy config.model on `tasks` (experiments/policy_eval.py)."""
    from experiments import policy_eval
    sampler = policy_eval.load_sampler(config.model, dtype=config.dtype, decode_kernels=config.get("decode_kernels"))
    ev = policy_eval.evaluate_policy(sampler, pool, tasks, policy_eval.rollout_config(config), seed=config.seed,
                                     dedupe=config.get("dedupe", True))
    print(f"[evaluate] {len(ev.records)} answers, {ev.judged} judged by the harness, {ev.deduplicated} repeats "
          "given their first verdict", file=sys.stderr)
    return ev.records, ev.candidates


def ranker_scores(path: str, tasks, records: list[dict]) -> dict:
    from cudaperf_jax.ranker.scorer import Ranker  # built by the ranker work; imported only when asked for
    by_id = {t.id: t for t in tasks}
    ranker = Ranker.load(path)
    scores = ranker.score([by_id[r["task"]] for r in records], [r["source"] for r in records],
                          [r.get("features") or {} for r in records])
    return {(r["task"], r["turn"], r["sample"]): float(s) for r, s in zip(records, scores)}


def main(config, workdir):
    from cudaperf_jax.eval import report, suites
    from cudaperf_jax.experiment import open_run
    from kernels_harness.run.pool import HarnessPool
    try:
        _validate(config)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    run = open_run(workdir, config, name="evaluate")
    tasks = suites.load_suite(_path(config.suite), split=config.split, max_tasks=config.max_tasks,
                              select=config.select, kernelbench_cache=_path(config.kernelbench_cache) if config.kernelbench_cache else None)
    print(f"[evaluate] {len(tasks)} tasks from {config.suite}", file=sys.stderr)
    kw = {"workers": config.workers} if config.workers else {}
    with HarnessPool(backend=config.backend, trials=config.trials, progress=True, seed=config.seed,
                     torch_compile=config.torch_compile, **kw) as pool:
        if config.solutions:
            sols = suites.load_solutions(_path(config.solutions), tasks)
            records = solution_records(pool, tasks, sols)
        else:
            records, _ = policy_records(pool, tasks, config)
    scores = ranker_scores(config.ranker, tasks, records) if config.ranker else None
    ks = tuple(k for k in config.pass_k if k <= max(1, config.samples_per_task if config.model else
                                                     max((r["sample"] + 1 for r in records), default=1)))
    summary = report.build_summary(records, tasks, ks=ks, group_by=config.group_by, scores=scores)
    paths = report.write_report(summary, records, workdir)
    run.log(0, {k.replace("/", "_"): v for k, v in summary["best_of_n"].items()})
    run.close()
    print(report.markdown(summary), file=sys.stderr)
    print(f"[evaluate] wrote {', '.join(p.name for p in paths)} in {workdir}", file=sys.stderr)


if __name__ == "__main__":
    launch.run(main, name="evaluate")
