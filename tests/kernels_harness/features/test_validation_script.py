"""The CPU-testable parts of benchmarks/features_validation.py (the H200 script)."""
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
spec = importlib.util.spec_from_file_location("features_validation", REPO / "benchmarks/features_validation.py")
fv = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fv)


def test_spearman_against_hand_values():
    assert fv.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert fv.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # ties take average ranks: x ranks (0.5, 0.5, 2), y ranks (0, 1, 2) -> rho = 0.866
    assert fv.spearman([1, 1, 2], [1, 2, 3]) == pytest.approx(0.8660254, abs=1e-6)
    assert fv.spearman([1, 2, 3], [5, 5, 5]) is None and fv.spearman([1], [2]) is None


NCU_CSV = '''==PROF== Connected to process 123
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC",{metrics}
"","","","","","","","","","","",{units}
"0","123","python","h","cudaperf_marker","1","13","(1, 1, 1)","(1, 1, 1)","0","9.0",{marker}
"1","123","python","h","transpose_k(int, int, const float *, float *)","1","13","(32, 8, 1)","(64, 64, 1)","0","9.0",{k1}
"2","123","python","h","cudaperf_marker","1","13","(1, 1, 1)","(1, 1, 1)","0","9.0",{marker}
"3","123","python","h","void mm_k<16>(int, const float *)","1","13","(256, 1, 1)","(64, 1, 1)","0","9.0",{k2}
'''


def _row(vals):
    return ",".join(f'"{v}"' for v in vals)


def test_ncu_csv_rows_are_assigned_to_implementations_by_markers():
    m = fv.NCU_METRICS
    base = {"launch__shared_mem_per_block_static": 0, "launch__shared_mem_per_block_dynamic": 0}
    k1 = {**base, "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": "4,096", "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": 1024,
          "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum": 32768, "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum": 1024,
          "sm__warps_active.avg.pct_of_peak_sustained_active": 87.5, "sm__maximum_warps_per_active_cycle_pct": 100,
          "launch__registers_per_thread": 16, "launch__block_size": 256, "launch__grid_size": 4096, "gpu__time_duration.sum": 1000}
    k2 = {**k1, "launch__registers_per_thread": 64, "sm__maximum_warps_per_active_cycle_pct": 50}
    text = NCU_CSV.format(metrics=_row(m), units=_row(["x"] * len(m)), marker=_row([0] * len(m)),
                          k1=_row([k1.get(x, 0) for x in m]), k2=_row([k2.get(x, 0) for x in m]))
    rows = fv.parse_ncu_csv(text)
    assert [r["ID"] for r in rows] == ["0", "1", "2", "3"]
    got = fv.assign_ncu_rows(rows, [{"task": "t", "impl": "a"}, {"task": "t", "impl": "b"}])
    a = got[("t", "a")]["transpose_k"]
    assert a["sectors_per_request_ld"] == 4.0 and a["sectors_per_request_st"] == 32.0
    assert a["achieved_occupancy"] == 0.875 and a["theoretical_occupancy"] == 1.0
    assert got[("t", "b")]["mm_k"]["registers"] == 64


def test_static_and_measured_coalescing_are_compared():
    tasks = fv.load_tasks([REPO / "tests/kernels_harness/features/data"])
    measured = {("feat_transpose", "write_strided"): {"transpose_k": {"sectors_per_request_ld": 4.0, "sectors_per_request_st": 32.0,
                                                                      "registers": 16, "block": 256, "theoretical_occupancy": 1.0}},
                ("feat_transpose", "smem_tiled"): {"transpose_k": {"sectors_per_request_ld": 4.0, "sectors_per_request_st": 4.0,
                                                                   "registers": 64, "block": 256, "theoretical_occupancy": 0.5}}}
    c = fv.compare_coalescing(tasks, measured, {"bandwidth_GBps": 4000.0, "fp32_TFLOPs": 50.0})
    assert c["pairs"] == 2 and c["class_agreement"] == 1.0 and c["mean_abs_error"] < 0.05
    assert c["occupancy_vs_ncu"] == {"launches": 2, "agree": 2, "rows": c["occupancy_vs_ncu"]["rows"]}


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_occupancy_corpus_builds_with_varied_registers_and_smem(tmp_path):
    out = fv.stage_occupancy(tmp_path, dry=True)
    assert out.get("skipped") and set(out["ptxas"]) == set(out["kernels"]), out.get("error")
    regs = sorted({v["registers"] for v in out["ptxas"].values()})
    assert len(regs) >= 6 and regs[-1] > 128
    assert out["ptxas"]["smem_k<12288>"]["smem_static"] == 49152


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_dry_run_end_to_end(tmp_path):
    env = {**os.environ, "OUT": str(tmp_path)}
    p = subprocess.run([sys.executable, str(REPO / "benchmarks/features_validation.py"), "--dry-run", "--jobs", "2",
                        "--dataset-per-family", "0"],
                       capture_output=True, text=True, env=env, timeout=900, check=False)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "features_validation summary" in p.stdout.splitlines()[-8:][0] or "summary" in p.stdout
    import json
    r = json.loads((tmp_path / "features_validation.json").read_text())
    assert r["builds"]["failed"] == [] and len(r["families"]["rows"]) >= 20
