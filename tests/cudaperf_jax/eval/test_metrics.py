"""Metrics against KernelBench's own test vectors (src/kernelbench/unit_tests/test_score.py) and
hand-computed pass@k / best-of-n / per-turn values."""
import math

import pytest

from cudaperf_jax.eval import metrics

IS_CORRECT = [1, 0, 1, 1, 0]
BASE = [0.1, 0.15, 0.2, 0.05, 0.3]
ACTUAL = [0.2, 0.15, 0.3, 0.01, 0.2]
SPEED = [b / a for b, a in zip(BASE, ACTUAL)]


def test_kernelbench_vectors():
    assert math.isclose(metrics.geomean_speedup(IS_CORRECT, SPEED), 1.185631101, abs_tol=1e-7)
    assert metrics.fast_p(IS_CORRECT, SPEED, 1.0) == pytest.approx(0.2)
    assert metrics.fast_p(IS_CORRECT, SPEED, 0.5) == pytest.approx(0.4)
    c2, b2, a2 = [1, 1, 1, 1, 0], [0.24, 0.31, 100.0, 0.0001, 0.3], [0.3, 0.3, 200.0, 0.0001, 0.3]
    s2 = [b / a for b, a in zip(b2, a2)]
    assert math.isclose(metrics.geomean_speedup(c2, s2), 0.801816719, abs_tol=1e-7)
    assert metrics.fast_p(c2, s2, 1.0) == pytest.approx(0.2)
    assert metrics.fast_p(c2, s2, 0.5) == pytest.approx(0.6)
    assert metrics.geomean_speedup([0] * 5, SPEED) == 0 and metrics.fast_p([0] * 5, SPEED, 0.0) == 0
    # fast_0 counts correct tasks; untimed (None) never counts
    assert metrics.fast_p([1, 1, 0], [None, 2.0, 3.0], 0.0) == pytest.approx(1 / 3)


def test_pass_at_k():
    assert metrics.pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert metrics.pass_at_k(10, 3, 5) == pytest.approx(1 - math.comb(7, 5) / math.comb(10, 5))
    assert metrics.pass_at_k(4, 0, 2) == 0.0 and metrics.pass_at_k(4, 3, 2) == 1.0
    with pytest.raises(ValueError, match="at least 5"):
        metrics.pass_at_k(3, 1, 5)


def _r(task, turn, sample, correct, speedup=None, status=None):
    return {"task": task, "turn": turn, "sample": sample, "correct": correct, "speedup": speedup,
            "status": status or ("ok" if correct else "wrong")}


def test_best_of_n_turns_and_summary():
    recs = [_r("a", 0, 0, False), _r("a", 1, 0, True, 1.5), _r("a", 0, 1, True, 3.0), _r("a", 1, 1, True, 0.5),
            _r("b", 0, 0, False, status="unchecked"), _r("b", 1, 0, False)]
    best = metrics.best_of_n(recs)
    assert {r["task"]: r["speedup"] for r in best} == {"a": 1.5, "b": None}  # last turn of each sample
    s = metrics.summarize(best, n_tasks=4)   # two tasks had no candidate at all: they count as failures
    assert s["correct"] == pytest.approx(0.25) and s["fast_1/eager"] == pytest.approx(0.25)
    assert s["fast_1.5/eager"] == 0.0 and s["geomean_speedup/eager"] == pytest.approx(1.5)
    assert s["unchecked"] == 0 and metrics.summarize([recs[4]]) == {"tasks": 1, "correct": 0.0, "unchecked": 1}
    curve = metrics.per_turn(recs, n_tasks=2)
    assert [c["correct"] for c in curve] == [0.5, 0.5] and curve[0]["fast_2/eager"] == 0.5
    assert curve[1]["fast_2/eager"] == 0.0 and curve[1]["sample_correct"] == pytest.approx(2 / 3)
    assert "truncated" not in curve[0]   # solutions from files: no generation budget to report
    recs[0]["truncated"], recs[2]["truncated"] = True, False
    assert metrics.per_turn(recs, n_tasks=2)[0]["truncated"] == pytest.approx(1 / 3)  # 1 of turn 0's 3 answers
    scored = metrics.best_of_n(recs, scores={("a", 1, 1): 0.9, ("a", 1, 0): 0.1})
    assert [r["speedup"] for r in scored if r["task"] == "a"] == [0.5]
    # b has one sample: pass@2 is not defined over every task, so it is left out
    assert metrics.pass_at_ks(recs, ks=(1, 2)) == {"pass@1": pytest.approx(0.5)}


def test_pass_at_1_and_abi_shares_per_turn():
    recs = [_r("a", 0, 0, False), _r("a", 0, 1, True), _r("a", 1, 0, True), _r("a", 1, 1, False),
            _r("b", 0, 0, False), _r("b", 1, 0, False)]
    for r, cat in zip(recs, ["missing_export", None, None, None, "no_code", "const_mismatch"]):
        r["abi"] = cat
    curve = metrics.per_turn(recs, n_tasks=3)   # a third task without answers counts 0
    assert curve[0]["pass@1"] == pytest.approx((1 / 2) / 3) and curve[1]["pass@1"] == pytest.approx((1 / 2) / 3)
    assert curve[0]["abi_failure"] == pytest.approx(2 / 3) and curve[0]["abi"] == {"missing_export": 1, "no_code": 1}
    assert curve[1]["abi"] == {"const_mismatch": 1}
    assert metrics.pass_at_1([_r("a", 0, 0, True), _r("a", 1, 0, False)]) == 0.0   # the last answer counts
