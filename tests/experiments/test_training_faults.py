"""Training faults (issue 26) on the toy JAX + Optax job of tests/experiments/toy: `kill -9` at seeded random
points (between steps, inside a checkpoint save) and a damaged newest checkpoint; the resumed run writes the
metrics of an uninterrupted one. The same faults on tiny SFT and RL runs: test_train_sft.py, test_train_rl.py."""
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.cudaperf_jax.experiment.test_checkpoint_faults import _garbage

REPO = Path(__file__).resolve().parents[2]
ENV = {"JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin"}


def _cmd(workdir):
    return [sys.executable, "-m", "tests.experiments.toy.run", f"--workdir={workdir}"]


def _rows(workdir):
    p = Path(workdir) / "metrics.jsonl"
    try:
        lines = p.read_text().splitlines() if p.exists() else []
    except OSError:
        return []
    return [json.loads(x) for x in lines if x.strip()]


def _losses(workdir):
    return [(r["step"], r["loss"]) for r in _rows(workdir)]


def kill_at_random_point(cmd, workdir, rng: random.Random, max_rows: int, env: dict, timeout_s: float = 300):
    """Starts `cmd`, waits for a random number (< max_rows) of metric rows and a random delay, then SIGKILLs its
    process group. Returns (rows seen when killed, exit status: None if it finished first)."""
    want, delay = rng.randrange(max_rows), rng.uniform(0.0, 0.4)
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                            start_new_session=True)
    deadline = time.time() + timeout_s
    try:
        while len(_rows(workdir)) < want and proc.poll() is None and time.time() < deadline:
            time.sleep(0.02)
        time.sleep(delay)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return want, proc.returncode


def test_kill9_at_seeded_random_points_resumes_to_the_same_metrics(tmp_path):
    env = {**ENV, "HOME": str(tmp_path)}
    full = subprocess.run(_cmd(tmp_path / "full"), cwd=REPO, check=False, capture_output=True, text=True, timeout=300, env=env)
    assert full.returncode == 0, full.stderr[-3000:]
    ref = _losses(tmp_path / "full")
    assert [s for s, _ in ref] == list(range(6))
    rng = random.Random(2026)
    work = tmp_path / "killed"
    statuses = [kill_at_random_point(_cmd(work), work, rng, 6, env)[1] for _ in range(3)]
    assert -signal.SIGKILL in statuses
    again = subprocess.run(_cmd(work), cwd=REPO, check=False, capture_output=True, text=True, timeout=300, env=env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert _losses(work) == ref
    leftovers = [p.name for p in (work / "checkpoints").iterdir() if not p.name.isdigit()]
    assert not [n for n in leftovers if "tmp" in n], leftovers  # unfinished saves were cleaned up or replaced


def test_damaged_newest_checkpoint_is_reported_and_the_previous_one_used(tmp_path):
    env = {**ENV, "HOME": str(tmp_path)}
    full = subprocess.run(_cmd(tmp_path / "full"), cwd=REPO, check=False, capture_output=True, text=True, timeout=300, env=env)
    assert full.returncode == 0, full.stderr[-3000:]
    work = tmp_path / "resumed"
    crashed = subprocess.run(_cmd(work), cwd=REPO, check=False, capture_output=True, text=True, timeout=300,
                             env={**env, "TOY_CRASH_AT": "4"})
    assert crashed.returncode == 17 and [s for s, _ in _losses(work)] == [0, 1, 2, 3]
    _garbage(work / "checkpoints" / "3")
    again = subprocess.run(_cmd(work), cwd=REPO, check=False, capture_output=True, text=True, timeout=300, env=env)
    assert again.returncode == 0, again.stderr[-3000:]
    said = [ln for ln in again.stderr.splitlines() if "checkpoint" in ln]
    assert len(said) == 1 and "checkpoint 3 in " in said[0] and "resumes from checkpoint 2." in said[0], said
    assert _losses(work) == _losses(tmp_path / "full")
