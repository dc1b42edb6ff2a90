"""Bootstrap intervals over problems: they contain the value, shrink with more problems, and paired differences
see a real gap that unpaired intervals would blur."""
import numpy as np
import pytest

from cudaperf_jax.eval import bootstrap


def _records(correct, speedup=None):
    speedup = speedup or [1.0] * len(correct)
    return [{"task": f"t{i}", "correct": bool(c), "speedup": s if c else None, "speedup_compile": s if c else None}
            for i, (c, s) in enumerate(zip(correct, speedup))]


def test_interval_contains_the_value_and_shrinks_with_n():
    rng = np.random.default_rng(0)
    small = _records(rng.random(20) < 0.4)
    large = _records(rng.random(400) < 0.4)
    a = bootstrap.interval(small, [r["task"] for r in small])
    b = bootstrap.interval(large, [r["task"] for r in large])
    assert a["low"] <= a["value"] <= a["high"] and b["low"] <= b["value"] <= b["high"]
    assert (b["high"] - b["low"]) < (a["high"] - a["low"]) / 2.5    # ~1/sqrt(20) of the width at 20x the problems
    assert 0.3 < b["value"] < 0.5 and a["n"] == 20


def test_missing_tasks_count_as_failures_and_metrics():
    recs = _records([1, 1, 0, 1], [2.0, 0.5, 1.0, 1.6])
    tasks = [r["task"] for r in recs] + ["t_missing"]
    assert bootstrap.interval(recs, tasks, "correct")["value"] == pytest.approx(3 / 5)
    assert bootstrap.interval(recs, tasks, "fast_1")["value"] == pytest.approx(2 / 5)
    assert bootstrap.interval(recs, tasks, "fast_1.5")["value"] == pytest.approx(2 / 5)
    assert bootstrap.interval(recs, tasks, "geomean_speedup")["value"] == pytest.approx((2.0 * 0.5 * 1.6) ** (1 / 3))
    with pytest.raises(ValueError, match="unknown metric"):
        bootstrap.interval(recs, tasks, "best")


def test_paired_difference_separates_a_consistent_gap():
    rng = np.random.default_rng(1)
    base = rng.random(100) < 0.3
    better = base | (rng.random(100) < 0.15)        # b solves everything a solves, and some more
    a, b = _records(better), _records(base)
    tasks = [r["task"] for r in a]
    d = bootstrap.paired_difference(a, b, tasks)
    assert d["value"] > 0 and d["low"] > 0            # the gap is outside the paired interval
    same = bootstrap.paired_difference(b, b, tasks)
    assert same["value"] == 0 and same["low"] == same["high"] == 0
