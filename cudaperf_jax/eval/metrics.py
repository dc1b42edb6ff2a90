"""Metrics over judged candidates, with KernelBench's definitions (src/kernelbench/score.py).

A record is one candidate: {"task", "turn", "sample", "status", "correct", "speedup", "speedup_compile"}
where speedup = baseline time / candidate time (PyTorch eager for torch2cuda; torch.compile for
"speedup_compile"). `unchecked` verdicts (the harness could not establish one) are not correct.

    fast_p(correct, speedup, p)        # fraction of ALL tasks that are correct and have speedup > p
    geomean_speedup(correct, speedup)  # geometric mean over the correct ones (0 when none)
    pass_at_k(n, c, k)                 # unbiased estimator 1 - C(n-c, k) / C(n, k)
"""
from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

FAST_P = (0.0, 1.0, 1.5, 2.0)


def fast_p(correct, speedup, p: float) -> float:
    """KernelBench fast_p: (# tasks correct with speedup > p) / (# tasks). correct: bool [N];
    speedup: float [N] (NaN/None where not timed, which never counts)."""
    c = np.asarray(correct, dtype=bool)
    s = np.asarray([np.nan if v is None else v for v in speedup], dtype=np.float64)
    n = len(c)
    if n == 0:
        return 0.0
    return float(np.sum(c & np.nan_to_num(s, nan=-np.inf).__gt__(p)) / n)


def geomean_speedup(correct, speedup) -> float:
    """Geometric mean of speedup over correct, timed entries (KernelBench: 0 when none are correct)."""
    vals = [float(v) for c, v in zip(correct, speedup) if c and v is not None and v > 0 and math.isfinite(v)]
    return float(math.exp(np.mean(np.log(vals)))) if vals else 0.0


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one task with n samples of which c are correct (Chen et al. 2021)."""
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples per task, got {n}")
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def _group(records, key):
    out = defaultdict(list)
    for r in records:
        out[key(r)].append(r)
    return out


def best_of_n(records: list[dict], n: int | None = None, scores: dict | None = None,
              key: str = "speedup") -> list[dict]:
    """One record per task: among its first n samples (of the last turn each sample reached), the one
    the selector picks. Without `scores` the oracle pick (correct first, then the highest `key`); with
    `scores` ({(task, turn, sample): ranker score}) the highest-scored one, correct or not."""
    picked = []
    for rs in _group(records, lambda r: r["task"]).values():
        last = {}
        for r in rs:
            if (n is None or r["sample"] < n) and (
                    r["sample"] not in last or r["turn"] > last[r["sample"]]["turn"]):
                last[r["sample"]] = r
        cands = list(last.values())
        if not cands:
            continue
        if scores is not None:
            best = max(cands, key=lambda r: scores.get((r["task"], r["turn"], r["sample"]), -math.inf))
        else:
            best = max(cands, key=lambda r: (bool(r["correct"]), r.get(key) or 0.0))
        picked.append(best)
    return picked


def summarize(per_task: list[dict], n_tasks: int | None = None) -> dict:
    """fast_p (eager and compile baselines), geomean, correctness over one record per task.

    n_tasks: the size of the suite (tasks without a record count as failures, as in KernelBench)."""
    n = n_tasks if n_tasks is not None else len(per_task)
    correct = [bool(r["correct"]) for r in per_task] + [False] * (n - len(per_task))
    out = {"tasks": n, "correct": float(np.mean(correct)) if n else 0.0,
           "unchecked": sum(r.get("status") == "unchecked" for r in per_task)}
    for base, field in (("eager", "speedup"), ("compile", "speedup_compile")):
        sp = [r.get(field) for r in per_task] + [None] * (n - len(per_task))
        if not any(v is not None for v in sp):
            continue
        for p in FAST_P:
            out[f"fast_{p:g}/{base}"] = fast_p(correct, sp, p)
        out[f"geomean_speedup/{base}"] = geomean_speedup(correct, sp)
    return out


def pass_at_ks(records: list[dict], ks=(1, 5, 10), n_tasks: int | None = None) -> dict:
    """Mean unbiased pass@k over tasks (a sample passes when it is correct at any turn it reached);
    n_tasks: the suite's size, tasks without records count 0. A k above some task's sample count is left out."""
    per = {}
    for task, rs in _group(records, lambda r: r["task"]).items():
        samples = _group(rs, lambda r: r["sample"])
        per[task] = (len(samples), sum(any(x["correct"] for x in s) for s in samples.values()))
    out = {}
    for k in ks:
        vals = [pass_at_k(n, c, k) for n, c in per.values() if n >= k]
        if vals and len(vals) == len(per):
            out[f"pass@{k}"] = float(np.sum(vals) / max(n_tasks or len(per), len(per)))
    return out


def per_turn(records: list[dict], n_tasks: int | None = None) -> list[dict]:
    """Per turn t: metrics of each task's best sample, taking each sample's answer at turn t (its last turn
    <= t: a sample that stopped earlier keeps its last answer), so a refinement that breaks a correct answer
    lowers the curve (the curve of refinement); sample_correct: the share of turn t's answers that are correct."""
    turns = sorted({r["turn"] for r in records})
    out = []
    for t in turns:
        upto = [r for r in records if r["turn"] <= t]
        row = {"turn": t, **summarize(best_of_n(upto), n_tasks)}
        at = [r for r in records if r["turn"] == t]
        row["sample_correct"] = float(np.mean([bool(r["correct"]) for r in at])) if at else 0.0
        row["pass@1"] = pass_at_1(upto, n_tasks)
        if any("truncated" in r for r in at):  # generated answers: the share cut at max_new_tokens
            row["truncated"] = float(np.mean([bool(r.get("truncated")) for r in at]))
        if any("abi" in r for r in at):  # answers classified by cudaperf_jax.eval.abi: the share failing on the ABI
            row.update(abi_shares(at))
        out.append(row)
    return out


def pass_at_1(records: list[dict], n_tasks: int | None = None) -> float:
    """Mean over tasks of the share of samples whose last answer (its highest turn in `records`) is correct: the
    unbiased pass@1 of those answers; n_tasks: the suite's size (tasks without records count 0)."""
    per = []
    for rs in _group(records, lambda r: r["task"]).values():
        last = {}
        for r in rs:
            if r["sample"] not in last or r["turn"] > last[r["sample"]]["turn"]:
                last[r["sample"]] = r
        per.append(float(np.mean([bool(r["correct"]) for r in last.values()])))
    return float(np.sum(per) / max(n_tasks or len(per), len(per), 1))


def abi_shares(records: list[dict]) -> dict:
    """{"abi_failure": share of the answers failing on the solution ABI, "abi": {category: count}} of records that
    carry an "abi" field (cudaperf_jax.eval.abi.classify; None: not an ABI failure)."""
    cats: dict[str, int] = {}
    for r in records:
        if r.get("abi"):
            cats[r["abi"]] = cats.get(r["abi"], 0) + 1
    return {"abi_failure": sum(cats.values()) / len(records) if records else 0.0, "abi": dict(sorted(cats.items()))}


def by_group(records: list[dict], group_of, tasks_per_group: dict | None = None) -> dict:
    """{group: summarize(best_of_n(records of the group))}; group_of(task_id) -> name."""
    out = {}
    for g, rs in sorted(_group(records, lambda r: group_of(r["task"])).items()):
        out[g] = summarize(best_of_n(rs), (tasks_per_group or {}).get(g))
    return out
