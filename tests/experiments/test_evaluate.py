"""experiments/evaluate.py on a directory of solution files (cpu backend): verdicts of known-good and
known-bad solutions become correctness, pass@k and per-turn numbers in eval.json/md/png."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ for the cpu backend")
def test_evaluate_solution_directory(tmp_path):
    suite = REPO / "experiments/suites/smoke"
    sols = tmp_path / "sols"
    sols.mkdir()
    saxpy = json.loads((suite / "smoke_saxpy.json").read_text())
    good = saxpy["implementations"][0]["source"]
    (sols / "smoke_saxpy").mkdir()
    (sols / "smoke_saxpy" / "a_good.cu").write_text(good)
    (sols / "smoke_saxpy" / "b_wrong.cu").write_text(good.replace("a * x[i]", "a * x[i] + 1.0f"))
    (sols / "smoke_transpose.cu").write_text("this is not CUDA")
    work = tmp_path / "run"
    cmd = [sys.executable, "-m", "experiments.evaluate", f"--workdir={work}", f"--config.suite={suite}",
           f"--config.solutions={sols}", "--config.backend=cpu", "--config.workers=1", "--config.group_by=family"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600,
                          env={"JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                               "PYTHONPATH": str(REPO)}, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    cands = {(c["task"], c["sample"]): c for c in map(json.loads, (work / "candidates.jsonl").read_text().splitlines())}
    assert cands[("smoke_saxpy", 0)]["status"] == "ok" and cands[("smoke_saxpy", 1)]["status"] == "wrong"
    assert cands[("smoke_transpose", 0)]["status"] == "compile_error"
    s = json.loads((work / "eval.json").read_text())
    assert s["tasks"] == 3 and s["candidates"] == 3
    assert s["best_of_n"]["correct"] == pytest.approx(1 / 3)       # row_sum has no solution: counts as failed
    assert s["pass_at_k"] == {"pass@1": pytest.approx((1 / 2 + 0 + 0) / 3)}  # saxpy: 1 of 2 samples correct
    assert (work / "eval.md").read_text().startswith("# Evaluation") and (work / "eval_turns.png").stat().st_size > 0
    bad = subprocess.run([sys.executable, "-m", "experiments.evaluate", f"--workdir={tmp_path / 'r2'}",
                          f"--config.suite={suite}"], cwd=REPO, capture_output=True, text=True, timeout=300,
                         env={"JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}, check=False)
    assert bad.returncode == 2 and "give exactly one of" in bad.stderr


@pytest.mark.slow
def test_evaluate_policy_multi_turn(tmp_path):
    """A tiny random policy through the rollout (2 samples x 2 turns): per-turn rows and pass@2 exist and
    every candidate carries a harness verdict."""
    from tests.cudaperf_jax.models import tiny
    model = tmp_path / "policy"
    tiny.hf_model("llama").save_pretrained(model)
    tiny.tokenizer().save_pretrained(model)
    work = tmp_path / "run"
    cmd = [sys.executable, "-m", "experiments.evaluate", f"--workdir={work}",
           f"--config.suite={REPO / 'experiments/suites/smoke'}", f"--config.model={model}", "--config.max_tasks=1",
           "--config.rollout.samples_per_task=2", "--config.rollout.turns=2", "--config.rollout.max_new_tokens=16",
           "--config.rollout.top_k=5", "--config.rollout.history=last", "--config.rollout.feedback_chars=300",
           "--config.backend=cpu", "--config.workers=1"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900,
                          env={"JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                               "PYTHONPATH": str(REPO)}, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    s = json.loads((work / "eval.json").read_text())
    assert s["candidates"] == 4 and [r["turn"] for r in s["per_turn"]] == [0, 1]
    assert set(s["pass_at_k"]) == {"pass@1", "pass@2"} and sum(s["statuses"].values()) == 4
    rollout = json.loads((work / "config.json").read_text())["config"]["rollout"]   # the resolved RolloutConfig
    assert (rollout["top_k"], rollout["history"], rollout["feedback_chars"]) == (5, "last", 300)
