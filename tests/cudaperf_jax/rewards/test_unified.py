"""The unified reward against hand computation; ablations as config strings; unchecked verdicts get nothing."""
import math

import numpy as np
import pytest

from cudaperf_jax.rewards.unified import COMPONENTS, RewardConfig, UnifiedReward
from kernels_harness.result import EvalResult


def _res(status, speedup=None, score=None, backend="cuda", correct=None):
    r = EvalResult(task_id="t", backend=backend, status=status if status in ("ok", "wrong", "compile_error", "hack", "timeout") else "ok",
                   compiled=status not in ("compile_error", "hack"), correct=status == "ok" if correct is None else correct,
                   speedup=speedup, features={"score": score} if score is not None else {})
    r.status = status   # `unchecked` (and an unknown status) set as a value: the current schema rejects them
    return r


RESULTS = [_res("ok", 2.0, 0.8), _res("ok", 100.0, 0.5), _res("wrong", score=0.6), _res("compile_error"),
           _res("hack"), _res("timeout"), _res("unchecked", 3.0, 0.9), _res("mystery", 3.0, 0.9)]


def test_components_match_the_formula():
    c = RewardConfig()
    out = UnifiedReward(c)(RESULTS)
    assert set(out) == set(COMPONENTS) and all(v.dtype == np.float32 and v.shape == (8,) for v in out.values())
    np.testing.assert_allclose(out["correct"], [1, 1, 0, 0, 0, 0, 0, 0])
    np.testing.assert_allclose(out["speed"], [0.5 * 1.0, 0.5 * 2.0, 0, 0, 0, 0, 0, 0])   # log2(100) clipped to 2
    np.testing.assert_allclose(out["structure"], [0.3 * 0.8, 0.3 * 0.5, 0.25 * 0.3 * 0.6, 0, 0, 0, 0, 0], rtol=1e-6)
    np.testing.assert_allclose(out["penalty"], [0, 0, 0, -0.2, -1.0, 0, 0, 0])
    np.testing.assert_allclose(out["ranker"], 0)
    np.testing.assert_allclose(out["total"], sum(out[k] for k in COMPONENTS[:-1]), rtol=1e-6)
    assert out["total"][0] == pytest.approx(1 + 0.5 + 0.24) and out["total"][6] == 0 and out["total"][7] == 0
    notes = UnifiedReward(c).notes(RESULTS)
    assert notes["ranker"] == "off" and notes["speed"] == "on" and "2 candidates" in notes["unrewarded"]


def test_ablation_strings_and_cpu_notes():
    out = UnifiedReward(RewardConfig(terms="correct,speed"))(RESULTS)
    np.testing.assert_allclose(out["total"], [1.5, 2.0, 0, 0, 0, 0, 0, 0])
    cpu = [_res("ok", None, 0.7, backend="cpu"), _res("wrong", None, 0.7, backend="cpu")]
    r = UnifiedReward(RewardConfig())
    out = r(cpu)
    np.testing.assert_allclose(out["speed"], 0)
    assert out["total"][0] == pytest.approx(1 + 0.3 * 0.7) and out["total"][1] == pytest.approx(0.25 * 0.3 * 0.7)
    assert r.notes(cpu)["speed"].startswith("off: the cpu backend measures no time")
    assert UnifiedReward(RewardConfig(terms="correct")).notes(cpu)["structure"].startswith("off")
    with pytest.raises(ValueError, match="unknown reward terms"):
        RewardConfig(terms="correct,speedup")
    with pytest.raises(ValueError, match="penalties"):
        RewardConfig(penalty_hack=-1)
    assert RewardConfig.from_config({"terms": "correct", "w_correct": 2.0, "other": 1}).w_correct == 2.0
    assert not math.isnan(float(out["total"].sum()))
