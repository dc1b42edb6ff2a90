"""experiments.train_sft on a tiny random policy and real dataset tasks: the loss goes down, kill -9 and resume
give the same metrics, load_policy of the run directory and the HF export give the trained model's logits; the same
with LoRA adapters (rank 4 on every projection, dropout 0.1): adapter-only checkpoints, the same metrics after kill -9
and a damaged checkpoint, the merged export and the PEFT adapter.

Marked slow: each packed row is 2048 tokens (a task prompt is ~1000 tokens with the tiny tokenizer), and the
module took 308 s on the shared 2-core dev machine under load (load average 4-15), 2026-12-04."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
COMPARED = ("loss", "accuracy", "grad_norm", "tokens", "lr", "epoch", "val_loss", "val_accuracy", "val_loss_initial")


def _overrides(policy):
    return {"model": str(policy), "steps": 5, "eval_every": 2, "checkpoint_every": 1, "export_dtype": "float32",
            "progress": False, "data.max_train_tasks": 3, "data.max_val_tasks": 1, "data.families": ("elementwise",),
            "data.prompt": "plain", "data.refine": 0.0,   # tiny-tokenizer prompts of ~800 tokens, one turn each
            "data.seq_len": 2048, "data.batch_rows": 2, "data.micro_rows": 1, "optim.learning_rate": 3e-3}


def _config(policy):
    from experiments.configs import sft_cpu
    c = sft_cpu.get_config()
    for k, v in _overrides(policy).items():
        *path, last = k.split(".")
        setattr(c if not path else c[path[0]], last, v)
    return c


def _metrics(workdir):
    rows = [json.loads(x) for x in (Path(workdir) / "metrics.jsonl").read_text().splitlines()]
    return [{k: r[k] for k in ("step", *COMPARED) if k in r} for r in rows]


def _train_tiny(tmp_path_factory, name: str, make_config):
    """(root, tiny policy dir, summary) of an SFT run of make_config(policy) into root/run."""
    from cudaperf_jax.sft.train import train
    from tests.experiments.test_demo import _tiny_policy_dir
    root = tmp_path_factory.mktemp(name)
    policy = _tiny_policy_dir(root / "policy")
    return root, policy, train(make_config(policy), root / "run")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return _train_tiny(tmp_path_factory, "sft", _config)


def test_loss_goes_down_and_outputs_are_written(run):
    root, _, summary = run
    rows = _metrics(root / "run")
    assert [r["step"] for r in rows] == [0, 1, 2, 3, 4]
    assert rows[-1]["loss"] < rows[0]["loss"] - 0.5, rows
    assert summary["val_loss_final"] < summary["val_loss_initial"]
    assert {"val_loss" in r for r in rows} == {True, False} and "val_loss" in rows[-1]
    assert summary["data"]["train"]["examples"] == 3 and summary["data"]["train"]["dropped_too_long"] == 0
    for name in ("loss.png", "summary.json", "policy.json", "export/model.safetensors", "tokenizer"):
        assert (root / "run" / name).exists(), name
    assert any((root / "run" / "tensorboard").iterdir())


def test_killed_run_resumes_to_the_same_metrics(run):
    root, policy, _ = run
    from cudaperf_jax.sft.train import train
    work = root / "killed"
    flags = [f"--config.{k}={','.join(v) if isinstance(v, tuple) else v}" for k, v in _overrides(policy).items()]
    cmd = [sys.executable, "-m", "experiments.train_sft", "--config=experiments/configs/sft_cpu.py",
           f"--workdir={work}", *flags]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={"JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin", "HOME": str(root)})
    deadline = time.time() + 240
    try:
        while time.time() < deadline and proc.poll() is None:   # kill once step 2 is logged, mid-way
            m = work / "metrics.jsonl"
            if m.exists() and len(m.read_text().splitlines()) >= 3:
                os.kill(proc.pid, signal.SIGKILL)
                break
            time.sleep(0.05)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read()[-3000:]
    assert not (work / "summary.json").exists()
    train(_config(policy), work)                                      # resume in this process
    assert _metrics(work) == _metrics(root / "run")
    assert len(json.loads((work / "config.json").read_text())["resumes"]) == 1


def test_load_policy_of_the_run_and_the_export_give_the_trained_logits(run):
    import torch
    import transformers

    from cudaperf_jax.models.hf_io import CheckpointError
    from cudaperf_jax.models.loading import load_policy
    root, policy, _ = run
    tokens = np.array([[5, 17, 42, 99, 7, 250, 3]], np.int32)
    from_run, tok = load_policy(root / "run")
    from_step, _ = load_policy(root / "run" / "checkpoints" / "4")
    exported, _ = load_policy(root / "run" / "export")
    base, _ = load_policy(policy)
    ref = np.asarray(from_run(tokens))
    np.testing.assert_array_equal(np.asarray(from_step(tokens)), ref)
    np.testing.assert_allclose(np.asarray(exported(tokens)), ref, rtol=1e-5, atol=1e-5)
    assert np.abs(np.asarray(base(tokens)) - ref).max() > 1e-2            # training changed the model
    assert tok is not None and tok.chat_template
    hf = transformers.AutoModelForCausalLM.from_pretrained(root / "run" / "export", dtype=torch.float32).eval()
    with torch.no_grad():
        np.testing.assert_allclose(hf(torch.tensor(tokens, dtype=torch.long)).logits.numpy(), ref, rtol=1e-4, atol=1e-4)
    # the newest checkpoint: load_policy(run) is the last step's params (the export is made from them too)
    empty = root / "empty"
    (empty / "checkpoints").mkdir(parents=True)
    (empty / "policy.json").write_text((root / "run" / "policy.json").read_text())
    with pytest.raises(CheckpointError, match="holds no checkpoint yet"):
        load_policy(empty)
    broken = root / "broken"
    import shutil
    shutil.copytree(root / "run" / "checkpoints" / "4", broken / "checkpoints" / "4")
    (broken / "policy.json").write_text((root / "run" / "policy.json").read_text())
    for f in (broken / "checkpoints" / "4").rglob("*"):
        if f.is_file() and f.stat().st_size > 100 and "metadata" not in f.name:
            f.write_bytes(b"\0" * 16)
    with pytest.raises(CheckpointError, match="could not be read.*damaged"):
        load_policy(broken)


def test_kill9_at_seeded_random_points_and_a_damaged_checkpoint(run, capfd):
    """Issue 26: SIGKILL at two seeded random points, then the newest checkpoint overwritten with garbage; the
    resumed run names it in one sentence, goes on from the one before and ends with the uninterrupted metrics."""
    import random

    from cudaperf_jax.sft.train import train
    from tests.cudaperf_jax.experiment.test_checkpoint_faults import _garbage
    from tests.experiments.test_training_faults import kill_at_random_point
    root, policy, _ = run
    work = root / "random_kills"
    flags = [f"--config.{k}={','.join(v) if isinstance(v, tuple) else v}" for k, v in _overrides(policy).items()]
    cmd = [sys.executable, "-m", "experiments.train_sft", "--config=experiments/configs/sft_cpu.py",
           f"--workdir={work}", *flags]
    env = {"JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin", "HOME": str(root)}
    rng = random.Random(7)
    for _ in range(2):
        kill_at_random_point(cmd, work, rng, 5, env, timeout_s=400)
    steps = sorted(int(p.name) for p in (work / "checkpoints").iterdir() if p.name.isdigit())
    damaged = len(steps) >= 2 and steps[-1] < 4
    if damaged:
        _garbage(work / "checkpoints" / str(steps[-1]))
    capfd.readouterr()
    train(_config(policy), work)
    said = [ln for ln in capfd.readouterr().err.splitlines() if "could not be read" in ln]
    if damaged:
        assert len(said) == 1 and f"checkpoint {steps[-1]} in " in said[0], said
        assert said[0].endswith(f"resumes from checkpoint {steps[-2]}.")
    assert _metrics(work) == _metrics(root / "run")


LORA = {"lora.rank": 4, "lora.alpha": 8.0, "lora.targets": "q,k,v,o,gate,up,down", "lora.dropout": 0.1}


def _lora_flags(policy):
    over = {**_overrides(policy), **LORA}
    return [f"--config.{k}={','.join(v) if isinstance(v, tuple) else v}" for k, v in over.items()]


def _lora_config(policy):
    c = _config(policy)
    c.lora.update(**{k.split(".")[1]: v for k, v in LORA.items()})
    return c


@pytest.fixture(scope="module")
def lora_run(tmp_path_factory):
    return _train_tiny(tmp_path_factory, "sft_lora", _lora_config)


def test_lora_run_trains_the_adapters_and_exports_the_merged_model_and_the_adapter(lora_run):
    import jax
    import torch
    import transformers
    from flax import nnx

    from cudaperf_jax.models.loading import load_policy
    root, policy, summary = lora_run
    rows = _metrics(root / "run")
    assert [r["step"] for r in rows] == [0, 1, 2, 3, 4] and rows[-1]["loss"] < rows[0]["loss"] - 0.2, rows
    meta = json.loads((root / "run" / "policy.json").read_text())
    assert meta["lora"]["rank"] == 4 and meta["base"] == str(policy.resolve())
    step = root / "run" / "checkpoints" / "4"
    disk = sum(f.stat().st_size for f in step.rglob("*") if f.is_file())
    base, _ = load_policy(policy)
    base_bytes = sum(np.asarray(x).nbytes for x in jax.tree.leaves(nnx.state(base)))
    print(f"tiny SFT LoRA checkpoint: {disk} B on disk, {summary['checkpoint_mb'] * 1e6:.0f} B of arrays; "
          f"the float32 base alone: {base_bytes} B")
    assert summary["checkpoint_mb"] * 1e6 < base_bytes / 4       # adapters + Adam + RNG + step, not the base
    tokens = np.array([[5, 17, 42, 99, 7, 250, 3]], np.int32)
    merged, _ = load_policy(root / "run")
    ref = np.asarray(merged(tokens))
    assert np.abs(np.asarray(base(tokens)) - ref).max() > 1e-2                       # the adapters changed it
    plus, _ = load_policy(f"{policy}+{root / 'run' / 'adapter'}")                  # base + the PEFT adapter
    np.testing.assert_allclose(np.asarray(plus(tokens)), ref, rtol=1e-5, atol=1e-5)
    adapter_meta = json.loads((root / "run" / "adapter" / "adapter_config.json").read_text())
    assert adapter_meta["r"] == 4 and adapter_meta["base_model_name_or_path"] == str(policy.resolve())
    hf = transformers.AutoModelForCausalLM.from_pretrained(root / "run" / "export", dtype=torch.float32).eval()
    with torch.no_grad():
        np.testing.assert_allclose(hf(torch.tensor(tokens, dtype=torch.long)).logits.numpy(), ref, rtol=1e-4,
                                   atol=1e-4)


def test_lora_run_kill9_at_seeded_random_points_and_a_damaged_checkpoint(lora_run, capfd):
    """The fault test of a full fine-tune, on adapters with dropout: a resumed run restores the adapters, their Adam
    state and the RNG, so it draws the same dropout masks and ends with the uninterrupted metrics."""
    import random

    from cudaperf_jax.sft.train import train
    from tests.cudaperf_jax.experiment.test_checkpoint_faults import _garbage
    from tests.experiments.test_training_faults import kill_at_random_point
    root, policy, _ = lora_run
    work = root / "random_kills"
    cmd = [sys.executable, "-m", "experiments.train_sft", "--config=experiments/configs/sft_cpu.py",
           f"--workdir={work}", *_lora_flags(policy)]
    env = {"JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin", "HOME": str(root)}
    rng = random.Random(17)
    for _ in range(2):
        kill_at_random_point(cmd, work, rng, 5, env, timeout_s=400)
    steps = sorted(int(p.name) for p in (work / "checkpoints").iterdir() if p.name.isdigit())
    damaged = len(steps) >= 2 and steps[-1] < 4
    if damaged:
        _garbage(work / "checkpoints" / str(steps[-1]))
    capfd.readouterr()
    train(_lora_config(policy), work)
    said = [ln for ln in capfd.readouterr().err.splitlines() if "could not be read" in ln]
    if damaged:
        assert len(said) == 1 and f"checkpoint {steps[-1]} in " in said[0], said
        assert said[0].endswith(f"resumes from checkpoint {steps[-2]}.")
    print(f"killed at checkpoints {steps}, damaged newest: {damaged}")
    assert _metrics(work) == _metrics(root / "run")
