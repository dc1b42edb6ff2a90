"""Roofline numbers against hand computation, and the peaks cache."""
import json

import pytest

from kernels_harness.features import roofline
from kernels_harness.tasks.schema import Task


def task(flops, min_bytes, dtype="float32"):
    return Task.from_dict({"id": "t", "track": "c2cuda", "entry": "f", "source": "",
                           "signature": [{"name": "x", "role": "in", "dtype": dtype, "shape": ["N"]},
                                         {"name": "y", "role": "out", "dtype": dtype, "shape": ["N"]}],
                           "configs": [{"N": 1000}, {"N": 10 ** 6}], "flops": flops, "min_bytes": min_bytes})


PEAKS = {"bandwidth_GBps": 2000.0, "fp32_TFLOPs": 40.0, "bf16_TFLOPs": 800.0, "fp64_TFLOPs": 20.0}


def test_memory_and_compute_bound_tasks():
    r = roofline.analyse(task("2*N", "8*N"), [None, 0.01], PEAKS)
    assert r["ridge"] == pytest.approx(40e12 / 2000e9)          # 20 FLOP/byte
    assert r["bound"] == "memory" and r["intensity"] == 0.25
    c = r["configs"][1]
    assert c["bound_ms"] == pytest.approx(8e6 / 2000e9 * 1e3)    # 0.004 ms
    assert c["fraction"] == pytest.approx(0.4) and c["achieved_GBps"] == pytest.approx(800.0)
    assert r["configs"][0]["fraction"] is None and r["fraction"] == pytest.approx(0.4)
    heavy = roofline.analyse(task("N*N", "8*N"), [None, 100.0], PEAKS)
    assert heavy["bound"] == "compute"
    assert heavy["configs"][1]["bound_ms"] == pytest.approx(1e12 / 40e12 * 1e3)
    assert heavy["fraction"] == pytest.approx(25.0 / 100.0)
    # bf16 tasks are held to the tensor-core roof
    bf = roofline.analyse(task("N*N", "4*N", "bfloat16"), None, PEAKS)
    assert bf["ridge"] == pytest.approx(800e12 / 2000e9) and bf["fraction"] is None
    # faster than the bound (a cache-resident small config) is clipped to 1
    assert roofline.analyse(task("2*N", "8*N"), [None, 1e-6], PEAKS)["fraction"] == 1.0


def test_peaks_cache_round_trip(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDAPERF_PEAKS", str(tmp_path / "peaks.json"))
    monkeypatch.setenv("CUDAPERF_CACHE", str(tmp_path / "cache"))
    packaged = json.loads(roofline.PACKAGED.read_text())
    first = roofline.load_peaks()  # no env file, no cached peaks: the H200 peaks shipped with the package
    assert first["bandwidth_GBps"] == packaged["bandwidth_GBps"]
    roofline.save_peaks({"bandwidth_GBps": 4321.0, "fp32_TFLOPs": 55.5, "source": "measured"}, tmp_path / "peaks.json")
    p = roofline.load_peaks()
    assert (p["bandwidth_GBps"], p["fp32_TFLOPs"], p["source"]) == (4321.0, 55.5, "measured")
    assert p["bf16_TFLOPs"] == roofline.H200_DATASHEET["bf16_TFLOPs"]  # unmeasured keys fall back
    (tmp_path / "peaks.json").write_text("not json")
    assert roofline.load_peaks()["bandwidth_GBps"] == packaged["bandwidth_GBps"]
