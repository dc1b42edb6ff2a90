"""The evaluation summary has both the per-level and the per-family table (KernelBench suites differ)."""
from types import SimpleNamespace

import pytest

from cudaperf_jax.eval import report


def _task(tid, family, level=None):
    return SimpleNamespace(id=tid, family=family, extra={} if level is None else {"level": level})


def _rec(task, correct, speedup=None):
    return {"task": task, "turn": 0, "sample": 0, "status": "ok" if correct else "wrong", "correct": correct,
            "speedup": speedup, "speedup_compile": None}


def test_summary_and_markdown_have_per_level_and_per_family_tables():
    tasks = [_task("k1", "kernelbench", 1), _task("k2", "kernelbench", 2), _task("g", "gemm")]
    recs = [_rec("k1", True, 2.0), _rec("k2", False), _rec("g", True, 0.5)]
    s = report.build_summary(recs, tasks, group_by="level")
    assert s["per_level"]["level1"]["correct"] == 1.0 and s["per_level"]["level2"]["correct"] == 0.0
    assert s["per_level"]["gemm"]["correct"] == 1.0                      # no level: its family
    assert s["per_family"]["kernelbench"]["correct"] == pytest.approx(0.5)
    assert s["per_group"] == s["per_level"]
    md = report.markdown(s)
    assert "## Per level" in md and "## Per family" in md and "| level2 |" in md and "| kernelbench |" in md
    flat = report.build_summary(recs[2:], tasks[2:], group_by="family")  # no levels: one table, not two
    assert "## Per family" in report.markdown(flat) and "## Per level" not in report.markdown(flat)
