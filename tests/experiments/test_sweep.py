"""experiments/sweep.py with the toy entry point: grid x seeds in their own workdirs, two at once; a
killed sweep's runs resume from their checkpoints; finished runs are skipped; mean/std over seeds."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from experiments import sweep

REPO = Path(__file__).resolve().parents[2]


def test_plan_grid_and_random():
    import ml_collections
    c = ml_collections.ConfigDict({"grid": {"a": [1, 2], "b": [3]}, "mode": "grid", "seeds": [0, 1],
                                   "samples": 3, "sweep_seed": 0})
    assert [r["name"] for r in sweep.plan(c)] == ["a=1,b=3,seed=0", "a=1,b=3,seed=1", "a=2,b=3,seed=0",
                                                  "a=2,b=3,seed=1"]
    c.mode = "random"
    runs = sweep.plan(c)
    assert 1 <= len({r["name"] for r in runs}) <= 6 and all(r["point"]["b"] == 3 for r in runs)
    c.mode = "nope"
    with pytest.raises(ValueError, match="grid"):
        sweep.plan(c)


SWEEP_FILE = """
import ml_collections
from experiments.configs import sweep


def get_config():
    c = sweep.get_config()
    c.entry = "tests.experiments.toy.run"
    c.base_config = "tests/experiments/toy/config.py"
    c.overrides = ml_collections.ConfigDict()
    c.grid = ml_collections.ConfigDict({"opt": {"lr": (0.1, 0.02)}})
    c.seeds = (0, 1)
    c.max_parallel = 2
    c.metric = "loss"
    return c
"""


def _sweep(workdir, env_extra=None):
    cfg = Path(workdir).parent / "sweep_file.py"
    cfg.write_text(SWEEP_FILE)
    cmd = [sys.executable, "-m", "experiments.sweep", f"--config={cfg}", f"--workdir={workdir}"]
    env = {k: v for k, v in os.environ.items() if k != "TOY_CRASH_AT"}
    env.update({"JAX_PLATFORMS": "cpu", "PYTHONPATH": str(REPO), **(env_extra or {})})
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600, env=env, check=False)


@pytest.mark.slow
def test_sweep_runs_resumes_and_summarizes(tmp_path):
    work = tmp_path / "sw"
    p = _sweep(work, {"TOY_CRASH_AT": "3"})   # every run is killed after 3 of its 6 steps
    assert p.returncode == 0, p.stderr[-3000:]
    st = json.loads((work / "runs" / "lr=0.1,seed=0" / "sweep_status.json").read_text())
    assert st["status"] == "failed" and st["returncode"] == 17
    p = _sweep(work)
    assert p.returncode == 0, p.stderr[-3000:]
    runs = sorted((work / "runs").iterdir())
    assert len(runs) == 4
    for r in runs:
        st = json.loads((r / "sweep_status.json").read_text())
        assert st["status"] == "done" and st["resumed"]
        steps = [json.loads(x)["step"] for x in (r / "metrics.jsonl").read_text().splitlines()]
        assert steps == list(range(6))     # resumed at step 3, nothing lost or repeated
    s = json.loads((work / "summary.json").read_text())
    pts = {json.dumps(g["point"]): g["stats"]["loss"] for g in s["points"]}
    assert len(pts) == 2 and all(v["n"] == 2 and v["std"] >= 0 for v in pts.values())
    assert pts['{"opt.lr": 0.1}']["mean"] < pts['{"opt.lr": 0.02}']["mean"]   # the larger step gets closer
    assert (work / "summary.png").stat().st_size > 0 and "mean ± std" in (work / "summary.md").read_text()
    p = _sweep(work)                           # everything finished: skipped
    assert p.returncode == 0 and "4 already done" in p.stderr
