"""Validation of generated tasks through the harness: every implementation of a task must get the
verdict its label promises (`expected: correct` -> status ok; `expected: wrong` -> anything else).

On the cpu backend only the smallest config runs (the C / PyTorch reference checks it; the larger
configs of the O(N^2) and O(N^3) families would take minutes in emulation); on cuda all configs run.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from kernels_harness.tasks.schema import Task

# Defects whose wrong result depends on thread timing. The cpu backend's emulation reproduces the
# ones the generator keeps every time; a real GPU may schedule the threads so that the answer comes out
# right (seen on an H200 for a GEMM with a missing barrier), so on cuda an `ok` is "not caught", not a
# mislabel.
TIMING_DEFECTS = ("missing_barrier", "race")


def agrees(expected: str, status: str, defect: str | None = None, backend: str = "cpu") -> bool:
    if expected == "correct":
        return status == "ok"
    if status == "ok" and backend == "cuda" and defect in TIMING_DEFECTS:
        return True
    return status != "ok"


def sample(tasks: Sequence[Task], k: int) -> list[Task]:
    """k tasks spread evenly over the sequence (all when k <= 0 or k >= len)."""
    if k <= 0 or k >= len(tasks):
        return list(tasks)
    step = len(tasks) / k
    return [tasks[int(i * step)] for i in range(k)]


def validate_tasks(tasks: Sequence[Task], backend: str = "cpu", workers: int = 2, progress: bool = True,
                   pool=None) -> list[dict]:
    """Runs every implementation of every task; one record per task:

    {"id", "family", "ok": all verdicts agree with the labels, "verdicts": {impl: status},
     "mismatches": ["impl: expected correct, got wrong (first error)", ...],
     "uncaught": [labelled negatives that came out ok] (only when some did; see TIMING_DEFECTS)}
    """
    from kernels_harness.run import (
        HarnessPool,  # late: the harness pulls in worker machinery
    )

    runnable = [dataclasses.replace(t, configs=t.configs[:1]) if backend == "cpu" else t for t in tasks]
    jobs = [(t, impl) for t in runnable for impl in t.implementations]
    own = pool is None
    if own:
        pool = HarnessPool(backend=backend, workers=workers, features=False, progress=progress)
    try:
        # one evaluate() call per round in which every source is unique (the pool shares builds by content)
        rounds: list[list[int]] = []
        seen_in: list[set] = []
        for k, (_, impl) in enumerate(jobs):
            r = next((j for j, s in enumerate(seen_in) if impl.source not in s), None)
            if r is None:
                rounds.append([])
                seen_in.append(set())
                r = len(rounds) - 1
            rounds[r].append(k)
            seen_in[r].add(impl.source)
        results: list = [None] * len(jobs)
        for ks in rounds:
            for k, res in zip(ks, pool.evaluate([(jobs[k][0], jobs[k][1].source) for k in ks])):
                results[k] = res
    finally:
        if own:
            pool.close()
    records: dict[str, dict] = {}
    for (t, impl), res in zip(jobs, results):
        rec = records.setdefault(t.id, {"id": t.id, "family": t.family, "ok": True, "verdicts": {}, "mismatches": []})
        if res is None:  # the pool lost the job: count it as a failure of the validation, not of the task
            rec["ok"] = False
            rec["verdicts"][impl.name] = "no_result"
            rec["mismatches"].append(f"{impl.name}: the harness returned no result")
            continue
        rec["verdicts"][impl.name] = res.status
        if impl.expected == "wrong" and res.status == "ok":
            rec.setdefault("uncaught", []).append(impl.name)
        if not agrees(impl.expected, res.status, impl.defect, backend):
            rec["ok"] = False
            why = res.error or next((c.error for c in res.configs if c.error), "") or res.compile_log[:200]
            rec["mismatches"].append(f"{impl.name}: expected {impl.expected}, got {res.status} ({why[:200]})")
    return [records[t.id] for t in runnable if t.id in records]
