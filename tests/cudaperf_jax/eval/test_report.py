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


def test_a_record_says_why_a_candidate_failed():
    from kernels_harness.result import EvalResult
    task = SimpleNamespace(id="t")
    log = "kernel.cu(9): error: identifier \"voideg_smem_vec4\" is undefined\n1 error detected\n"
    rec = report.record(task, 0, 0, EvalResult("t", "cuda", status="compile_error", compile_log=log))
    assert "voideg_smem_vec4" in rec["error"] and "\n" not in rec["error"]
    hack = EvalResult("t", "cuda", status="hack", violations=[{"rule": "timing", "name": "clock64", "line": 3}])
    assert report.record(task, 0, 0, hack)["error"] == "forbidden calls: timing (clock64, line 3)"
    wrong = EvalResult("t", "cuda", status="wrong", error="config 0: output 'y' differs")
    assert report.record(task, 0, 0, wrong)["error"] == "config 0: output 'y' differs"


def test_markdown_reports_abi_failures_when_records_carry_them():
    tasks = [_task("a", "scan"), _task("b", "scan")]
    recs = [dict(_rec("a", False), abi="missing_export"), dict(_rec("b", True), abi=None)]
    s = report.build_summary(recs, tasks)
    assert s["abi"] == {"abi_failure": 0.5, "abi": {"missing_export": 1}}
    assert "failing on the solution ABI (cudaperf_jax/eval/abi.py): 50% (missing_export 1)" in report.markdown(s)
    assert "abi" not in report.build_summary([_rec("a", False)], tasks[:1])
