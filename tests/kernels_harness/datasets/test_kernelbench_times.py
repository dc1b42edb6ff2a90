"""KernelBench eager/torch.compile timing on the CPU (--device cpu): workers, queue, resume, deadline, store."""
import json
from pathlib import Path

import pytest

from kernels_harness.datasets import kernelbench_times as kbt
from kernels_harness.datasets import times as times_lib

pytest.importorskip("torch")

RELU = Path(__file__).resolve().parents[3] / "data/kernelbench/tasks/level1_19_relu.json"
SOURCE = '''import os, time
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
{body}

batch_size = 4096
dim = 393216

def get_inputs():
    time.sleep({sleep})
    return [torch.rand(batch_size, dim)]

def get_init_inputs():
    return []
'''


def _task(d: Path, tid: str, body: str = "        return torch.relu(x) * 2.0", sleep: float = 0.0, n_configs=2):
    t = json.loads(RELU.read_text())
    t["id"] = tid
    t["source"] = SOURCE.format(body=body, sleep=sleep)
    t["configs"] = [dict(c, name=f"c{i}", batch_size=4 * (i + 1), dim=64, x_d0=4 * (i + 1), x_d1=64,
                         out_d0=4 * (i + 1), out_d1=64) for i, c in enumerate(t["configs"][:n_configs])]
    (d / f"{tid}.json").write_text(json.dumps(t))


def _records(out: Path) -> dict:
    return {r["task"]: r for r in times_lib.iter_results(out / "results.jsonl")}


def test_cpu_run_times_compiles_survives_crashes_and_memory_and_resumes(tmp_path):
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    _task(tasks, "level1_1_ok")
    _task(tasks, "level1_2_crash", body="        os._exit(7)")
    _task(tasks, "level1_3_oom", body="        raise RuntimeError('CUDA out of memory (simulated)')")
    _task(tasks, "level1_4_seeded")
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    (earlier / "results.0.jsonl").write_text(json.dumps(
        {"task": "level1_4_seeded", "impls": ["torch_eager", "torch_compile"], "configs": ["c0", "c1"],
         "time_ms": [[1.0, None], [2.0, 1.5]], "iqr_ms": [[0.1, None], [0.1, 0.1]],
         "agrees": [[1, None], [1, 1]], "family": "kernelbench", "track": "torch2cuda", "split": "kernelbench",
         "strategies": [["pytorch_eager"], ["torch_compile"]], "expected": ["correct", "correct"],
         "baseline": 0, "errors": []}) + "\n")
    (earlier / "provenance.json").write_text(json.dumps({"gpu": "NVIDIA H200", "problems": 1}))
    out = tmp_path / "out"
    rc = kbt.main(["--tasks", str(tasks), "--out", str(out), "--device", "cpu", "--workers", "2",
                   "--resume_from", str(earlier), "--recheck", "1", "--max_seconds", "300", "--budget_s", "0.02",
                   "--inductor_cache", str(tmp_path / "inductor"), "--archive", str(tmp_path / "o" / "kb.tgz")])
    assert rc == 0
    recs = _records(out)
    ok = recs["level1_1_ok"]
    assert [row[0] is not None for row in ok["time_ms"]] == [True, True]       # eager on every config
    assert [row[1] is not None for row in ok["time_ms"]] == [False, True]      # compiled on the largest
    assert ok["agrees"][1] == [1, 1] and ok["errors"] == []
    assert recs["level1_2_crash"]["fatal"] and "exit code 7" in recs["level1_2_crash"]["errors"][0]
    oom = recs["level1_3_oom"]                       # shared: sent to the alone phase; alone: recorded
    assert oom["time_ms"][0] == [None, None] and "out of memory" in oom["errors"][0]
    assert [r["task"] for r in times_lib.iter_results(out / "alone.jsonl")] == ["level1_3_oom"]
    assert recs["level1_4_seeded"]["seeded_from"] == str(earlier)
    again = list(times_lib.iter_results(out / "recheck.jsonl"))            # timed again, kept apart
    assert [r["task"] for r in again] == ["level1_4_seeded"] and again[0]["time_ms"][1][1] is not None
    prov = json.loads((out / "provenance.json").read_text())
    assert [p["workers"] for p in prov["protocol"]["phases"]] == [2, 1]
    assert prov["protocol"]["phases"][0]["restarts"] in (0, 1)  # 1 if the queue still had work then
    assert prov["earlier_runs"][0]["provenance"]["gpu"] == "NVIDIA H200"
    assert prov["protocol"]["fatal"] == ["level1_2_crash"]
    assert prov["protocol"]["recheck"]["torch_eager"]["pairs"] == 2
    assert prov["protocol"]["recheck"]["torch_compile"]["pairs"] == 1
    m = times_lib.load(out / "times")
    assert sorted(m.tasks()) == ["level1_1_ok", "level1_3_oom", "level1_4_seeded"]
    assert m.time("level1_4_seeded", "torch_compile", 1) == 1.5
    assert m.time("level1_1_ok", "torch_eager", 0) == pytest.approx(ok["time_ms"][0][0])
    assert (tmp_path / "o" / "kb.tgz").stat().st_size > 0
    table = (out / "summary.md").read_text()
    assert "| 1 | 2 | 1 | 1 | 1 |" in table and "| all | 3 | 2 | 2 | 2 |" in table   # the oom one: untimed
    assert (out / "compile_speedup.png").stat().st_size > 0


@pytest.mark.slow
def test_deadline_leaves_an_unfinished_task_for_the_next_run(tmp_path):
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    _task(tasks, "level1_1_slow", sleep=1.5, n_configs=3)
    out = tmp_path / "out"
    args = ["--tasks", str(tasks), "--out", str(out), "--device", "cpu", "--workers", "1",
            "--compile_configs", "none", "--budget_s", "0.02", "--write_s", "0"]
    assert kbt.main(args + ["--max_seconds", "2"]) == 0
    assert "level1_1_slow" not in _records(out)                  # stopped between configs: no record
    first = json.loads((out / "provenance.json").read_text())
    assert kbt.main(args + ["--max_seconds", "120"]) == 0
    rec = _records(out)["level1_1_slow"]
    assert all(row[0] is not None for row in rec["time_ms"])
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["earlier_runs"][-1]["provenance"]["started_utc"] == first["started_utc"]


def test_compile_falls_back_to_plain_torch_compile_when_the_locked_backend_fails(tmp_path, monkeypatch):
    from kernels_harness.datasets import kernelbench_measure as kbm
    from kernels_harness.tasks.schema import load_task

    def broken(lock_path, sync=None):
        def backend(gm, example_inputs):
            raise RuntimeError("locked backend broke")
        return backend
    monkeypatch.setattr(kbm, "locked_inductor", broken)
    _task(tmp_path, "level1_1_ok")
    m = kbm.Measurer("cpu", str(tmp_path / "gpu.lock"), timing={"budget_s": 0.01})
    rec = m.measure_task(load_task(tmp_path / "level1_1_ok.json"))
    assert rec["time_ms"][1][1] is not None and rec["agrees"][1] == [1, 1]
    assert "compiled without the GPU lock" in rec["errors"][0] and "locked backend broke" in rec["errors"][0]


def test_seeding_never_mixes_the_times_of_two_gpus(tmp_path):
    partial = Path(__file__).resolve().parents[3] / "benchmarks/results/kernelbench_times_h200_partial"
    (tmp_path / "a").mkdir()
    other = kbt.seed(tmp_path / "a", [str(partial)], gpu="NVIDIA H100 80GB HBM3")
    assert other[0]["records_seeded"] == 0 and not (tmp_path / "a" / "results.jsonl").exists()
    (tmp_path / "b").mkdir()
    same = kbt.seed(tmp_path / "b", [str(partial)], gpu="NVIDIA H200")
    assert same[0]["records_seeded"] == 24 == len(_records(tmp_path / "b"))
    assert kbt.seed(tmp_path / "b", [str(partial)], gpu="NVIDIA H200")[0]["records_seeded"] == 0  # already there
