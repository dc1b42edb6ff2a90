"""experiments.train_rl on a tiny random policy and the cpu harness: a run killed with SIGKILL at any point
resumes to the metrics of an uninterrupted run (a full fine-tune and LoRA adapters with dropout); the memory fraction
is set from the config and recorded."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _policy(path: Path) -> Path:
    from tests.cudaperf_jax.models import tiny
    tiny.hf_model("llama").save_pretrained(path)
    tiny.tokenizer().save_pretrained(path)
    return path


def _cmd(workdir, model, *over):
    return [sys.executable, "-m", "experiments.train_rl", "--config=experiments/configs/rl_tiny.py",
            f"--config.model={model}", f"--workdir={workdir}", *over]


ENV = {"JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin"}


def _rows(workdir):
    p = Path(workdir) / "metrics.jsonl"
    rows = [json.loads(x) for x in p.read_text().splitlines()] if p.exists() else []
    return [{k: v for k, v in r.items() if not k.startswith(("time/", "_"))} for r in rows]


@pytest.mark.slow
def test_sigkilled_run_resumes_to_the_same_metrics(tmp_path):
    model = _policy(tmp_path / "policy")
    full = subprocess.run(_cmd(tmp_path / "full", model), cwd=REPO, capture_output=True, text=True, timeout=600,
                          env={**ENV, "HOME": str(tmp_path)}, check=False)
    assert full.returncode == 0, full.stderr[-3000:]
    ref = _rows(tmp_path / "full")
    assert [r["step"] for r in ref] == [0, 1, 2] and ref[-1]["kl"] > 0 and "turn1/reward/total" in ref[0]
    assert ref[0]["notes/ranker"] == "off" and ref[0]["notes/speed"].startswith("off: the cpu backend")
    # kill -9 in the middle of step 1 (after step 0's checkpoint), then once more right after a checkpoint
    work = tmp_path / "killed"
    for wait_rows in (1, 2):
        proc = subprocess.Popen(_cmd(work, model), cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env={**ENV, "HOME": str(tmp_path)}, start_new_session=True)
        deadline = time.time() + 400
        while len(_rows(work)) < wait_rows and time.time() < deadline and proc.poll() is None:
            time.sleep(0.2)
        time.sleep(1.0 if wait_rows == 1 else 0.0)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    again = subprocess.run(_cmd(work, model), cwd=REPO, capture_output=True, text=True, timeout=600,
                           env={**ENV, "HOME": str(tmp_path)}, check=False)
    assert again.returncode == 0, again.stderr[-3000:]
    assert _rows(work) == ref
    meta = json.loads((work / "config.json").read_text())
    assert len(meta["resumes"]) == 2 and (work / "rl_curves.png").stat().st_size > 1000


LORA = ("--config.lora.rank=4", "--config.lora.alpha=8.0", "--config.lora.targets=q,k,v,o,gate,up,down",
        "--config.lora.dropout=0.1")


@pytest.mark.slow
@pytest.mark.parametrize("over", [(), LORA], ids=["full", "lora"])
def test_kill9_at_seeded_random_points_and_a_damaged_checkpoint(tmp_path, over):
    """Issue 26: SIGKILL at two seeded random points, then the newest checkpoint overwritten with garbage; the
    resumed run names it in one sentence, goes on from the one before and ends with the uninterrupted metrics. With
    LoRA (and adapter dropout drawn from the checkpointed RNG) the checkpoints hold the adapters alone."""
    import random

    from tests.cudaperf_jax.experiment.test_checkpoint_faults import _garbage
    from tests.experiments.test_training_faults import kill_at_random_point
    model = _policy(tmp_path / "policy")
    env = {**ENV, "HOME": str(tmp_path)}
    full = subprocess.run(_cmd(tmp_path / "full", model, *over), cwd=REPO, capture_output=True, text=True,
                          timeout=600, env=env, check=False)
    assert full.returncode == 0, full.stderr[-3000:]
    work = tmp_path / "killed"
    rng = random.Random(11)
    for _ in range(2):
        kill_at_random_point(_cmd(work, model, *over), work, rng, 3, env, timeout_s=400)
    steps = sorted(int(p.name) for p in (work / "checkpoints").iterdir() if p.name.isdigit())
    damaged = len(steps) >= 2 and steps[-1] < 2
    if damaged:
        _garbage(work / "checkpoints" / str(steps[-1]))
    again = subprocess.run(_cmd(work, model, *over), cwd=REPO, capture_output=True, text=True, timeout=600,
                           env=env, check=False)
    assert again.returncode == 0, again.stderr[-3000:]
    said = [ln for ln in again.stderr.splitlines() if "could not be read" in ln]
    if damaged:
        assert len(said) == 1 and f"checkpoint {steps[-1]} in " in said[0], said
        assert said[0].endswith(f"resumes from checkpoint {steps[-2]}.")
    assert _rows(work) == _rows(tmp_path / "full")
    if over:   # the run directory rebuilds the policy: base + the adapters of the newest checkpoint, merged
        import numpy as np

        from cudaperf_jax.models.loading import load_policy
        meta = json.loads((work / "policy.json").read_text())
        assert meta["lora"]["rank"] == 4 and meta["base"] == str(model.resolve())
        disk = sum(f.stat().st_size for f in (work / "checkpoints" / "2").rglob("*") if f.is_file())
        print(f"tiny RL LoRA checkpoint: {disk} B on disk")
        tokens = np.array([[5, 17, 42, 99, 7]], np.int32)
        merged, _ = load_policy(work)
        plus, _ = load_policy(f"{model}+{work / 'adapter'}")
        exported, _ = load_policy(work / "policy")
        np.testing.assert_allclose(np.asarray(plus(tokens)), np.asarray(merged(tokens)), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(np.asarray(exported(tokens)), np.asarray(merged(tokens)), rtol=1e-5, atol=1e-5)


def test_memory_fraction_is_set_from_the_config_and_recorded(tmp_path):
    code = ("import os, sys; from ml_collections import ConfigDict; from experiments.train_rl import set_memory_fraction;"
            f"set_memory_fraction(ConfigDict({{'memory_fraction': 0.4}}), {str(tmp_path)!r});"
            "import jax; print(os.environ['XLA_PYTHON_CLIENT_MEM_FRACTION'], jax._src.xla_bridge.backends_are_initialized())")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60,
                         env={**ENV, "HOME": str(tmp_path)}, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["0.400", "False"]       # set before JAX's backend started (the typed config
                                                          # file imports jax; its client reads the fraction later)
    assert json.loads((tmp_path / "environment.json").read_text())["XLA_PYTHON_CLIENT_MEM_FRACTION"] == "0.400"
