"""The measured-times store: tensorstore zarr round trip, speedups against the baseline, table, plot."""
import math

import pytest

from kernels_harness.datasets import times

pytest.importorskip("tensorstore")


def _records():
    # two tasks as measure.py writes them: impl 0 is the baseline; "neg" is a labelled negative
    return [
        {"task": "a", "family": "matmul", "track": "c2cuda", "split": "train", "impls": ["naive", "tiled", "neg"],
         "strategies": [["naive"], ["smem_tiled"], ["smem_tiled"]], "expected": ["correct", "correct", "wrong"],
         "baseline": 0, "configs": ["small", "medium", "large"],
         "time_ms": [[0.01, 0.02, 0.02], [1.0, 0.25, 0.2], [40.0, 5.0, None]],
         "iqr_ms": [[0.0, 0.0, 0.0], [0.01, 0.01, 0.0], [0.1, 0.1, None]],
         "agrees": [[True, True, False], [True, True, False], [True, True, None]],
         "max_err": [[0, 0, 1], [0, 0, 1], [0, 0, None]], "errors": []},
        {"task": "b", "family": "scan", "track": "c2cuda", "split": "test", "impls": ["naive", "warp", "block", "x"],
         "strategies": [["naive"], ["warp_shuffle"], ["smem_tiled"], ["unrolled"]],
         "expected": ["correct"] * 4, "baseline": 0, "configs": ["small", "medium", "large"],
         "time_ms": [[0.1, 0.05, 0.05, None], [2.0, 0.5, 1.0, None], [8.0, 1.0, 0.5, 4.0]],
         "iqr_ms": [[0.0] * 4] * 3, "agrees": [[True, True, True, None], [True, True, True, None],
                                               [True, True, False, True]],
         "max_err": [[0.0] * 4] * 3, "errors": []},
    ]


def test_store_round_trip_and_speedups(tmp_path):
    recs = _records()
    (tmp_path / "results.jsonl").write_text("\n".join(__import__("json").dumps(r) for r in recs) + "\n")
    assert [r["task"] for r in times.read_results(tmp_path / "results.jsonl")] == ["a", "b"]
    times.write_store(recs, tmp_path / "times", {"gpu": "NVIDIA H200", "driver_version": 13000})
    m = times.load(tmp_path / "times")
    assert m.time_ms.shape == (2, 4, 3)
    assert m.time("a", "tiled", 2) == pytest.approx(5.0)
    assert m.time("a", "neg", 2) is None and m.time("zzz", "naive", 0) is None
    assert m.provenance["gpu"] == "NVIDIA H200"
    sp = {(t, i, c): s for t, i, c, _, s in m.speedups()}
    assert sp[("a", "tiled", 2)] == pytest.approx(8.0)             # 40 / 5
    assert ("a", "neg", 0) not in sp                              # negatives are no speedups
    assert ("b", "block", 2) not in sp                            # disagrees with the baseline there
    assert sp[("b", "warp", 1)] == pytest.approx(4.0)
    assert ("b", "x", 2) in sp and ("b", "x", 0) not in sp        # untimed configs are left out
    assert math.isnan(m.time_ms[1, 3, 0]) and m.agrees[1, 2, 2] == 0 and m.agrees[1, 3, 0] == -1


def test_table_and_plot(tmp_path):
    recs = _records()
    text = times.table(recs, {"gpu": "NVIDIA H200"})
    assert "NVIDIA H200" in text
    row = next(ln for ln in text.splitlines() if ln.startswith("matmul"))
    assert "1/1" in row          # the negative disagreed with the baseline: caught
    png = times.plot_speedups(recs, tmp_path / "s.png")
    assert png.is_file() and png.stat().st_size > 1000


def test_missing_store_is_a_one_line_error(tmp_path):
    from kernels_harness.tasks.errors import TaskError
    with pytest.raises(TaskError, match="no measured times"):
        times.load(tmp_path)
