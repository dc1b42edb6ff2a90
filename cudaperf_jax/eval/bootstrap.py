"""95% bootstrap intervals over problems for the evaluation's per-task metrics, and paired comparisons.

    per_task = metrics.best_of_n(records)                        # one record per task (best of n)
    ci = interval(per_task, n_tasks, "correct")                  # {"value", "low", "high"} (fractions of all tasks)
    d = paired_difference(per_task_a, per_task_b, tasks, "correct")   # a - b over the same problems, with its interval

A resample draws problems with replacement (tasks without a record count as failures, as in KernelBench), so the
interval says how much the number would move on another draw of problems of the same kind. Seeds are fixed: the
same records give the same interval.
"""
from __future__ import annotations

import math

import numpy as np

METRICS = ("correct", "fast_1", "fast_1.5", "fast_1/compile", "geomean_speedup")


def per_task_values(per_task: list[dict], tasks: list[str], metric: str) -> np.ndarray:
    """float64[len(tasks)]: the metric's per-problem value (0/1 for correct and fast_p; log speedup for
    geomean_speedup, NaN where not correct), in `tasks` order; a task without a record is a failure."""
    by = {r["task"]: r for r in per_task}
    out = np.zeros(len(tasks))
    for i, t in enumerate(tasks):
        r = by.get(t)
        ok = bool(r and r.get("correct"))
        if metric == "correct":
            out[i] = float(ok)
        elif metric == "geomean_speedup":
            s = r.get("speedup") if r else None
            out[i] = math.log(s) if ok and s and s > 0 else np.nan
        elif metric.startswith("fast_"):
            p, _, base = metric[len("fast_"):].partition("/")
            s = r.get("speedup_compile" if base == "compile" else "speedup") if r else None
            out[i] = float(ok and s is not None and s > float(p))
        else:
            raise ValueError(f"unknown metric {metric!r}; choose one of {', '.join(METRICS)}")
    return out


def _stat(values: np.ndarray, metric: str) -> float:
    if metric == "geomean_speedup":
        v = values[~np.isnan(values)]
        return float(np.exp(v.mean())) if len(v) else 0.0
    return float(values.mean()) if len(values) else 0.0


def interval(per_task: list[dict], tasks: list[str], metric: str = "correct", n_boot: int = 2000,
             seed: int = 0, level: float = 0.95) -> dict:
    """{"value", "low", "high", "n"}: the metric over `tasks` and its percentile bootstrap interval."""
    v = per_task_values(per_task, tasks, metric)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(v), size=(n_boot, len(v))) if len(v) else np.zeros((n_boot, 0), int)
    boots = np.array([_stat(v[i], metric) for i in idx])
    a = (1 - level) / 2
    return {"value": _stat(v, metric), "low": float(np.quantile(boots, a)) if len(v) else 0.0,
            "high": float(np.quantile(boots, 1 - a)) if len(v) else 0.0, "n": len(v)}


def paired_difference(per_task_a: list[dict], per_task_b: list[dict], tasks: list[str], metric: str = "correct",
                      n_boot: int = 2000, seed: int = 0, level: float = 0.95) -> dict:
    """{"value", "low", "high", "n"} of metric(a) - metric(b) on the same problems, resampled together (paired):
    an interval that excludes 0 says a and b differ beyond the draw of problems."""
    va, vb = per_task_values(per_task_a, tasks, metric), per_task_values(per_task_b, tasks, metric)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(va), size=(n_boot, len(va)))
    boots = np.array([_stat(va[i], metric) - _stat(vb[i], metric) for i in idx])
    a = (1 - level) / 2
    return {"value": _stat(va, metric) - _stat(vb, metric), "low": float(np.quantile(boots, a)),
            "high": float(np.quantile(boots, 1 - a)), "n": len(va)}
