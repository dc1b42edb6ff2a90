"""LoRA run directories: policy.json records the base and the LoRA config, the checkpoints hold the adapters alone,
and load_policy rebuilds the policy (adapters merged into a plain Decoder) - also a run on top of another LoRA run
(a fresh adapter over the first's merged policy), BASE+ADAPTER paths, the PEFT export of experiments.export, and a
damaged newest adapter checkpoint falling back to the one before."""
import json
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest
from flax import nnx

from cudaperf_jax.experiment import open_run
from cudaperf_jax.models import lora
from cudaperf_jax.models.hf_io import CheckpointError
from cudaperf_jax.models.loading import base_hf_id, load_policy, write_run_policy
from cudaperf_jax.models.lora import ADAPTERS, LoRAConfig
from cudaperf_jax.training import run_state, split_model
from tests.cudaperf_jax.models import tiny

REPO = Path(__file__).resolve().parents[3]
TOKS = np.random.RandomState(2).randint(3, 320, (2, 12)).astype(np.int32)
_forward = nnx.jit(lambda m, t: m(t))


def _base(path: Path) -> Path:
    tiny.hf_model("qwen2", seed=3).save_pretrained(path)
    tiny.tokenizer().save_pretrained(path)
    return path


def _lora_run(workdir: Path, base, cfg: LoRAConfig, seed: int, steps=(0,)):
    """A run directory as training writes it: policy.json, then a checkpoint of random adapters per step; returns the
    (unmerged) model of the last step."""
    model, tok = load_policy(base)
    write_run_policy(workdir, model, tok, base=base, lora=cfg)
    lora.add_adapters(model, cfg, nnx.Rngs(0))
    run = open_run(workdir, {"seed": seed}, name="t")
    for step in steps:
        leaves, tree = jax.tree.flatten(nnx.state(model, ADAPTERS))
        keys = jax.random.split(jax.random.key(seed * 100 + step), len(leaves))
        nnx.update(model, jax.tree.unflatten(tree, [0.2 * jax.random.normal(k, x.shape) for k, x in zip(keys, leaves)]))
        _, params, _ = split_model(model, ADAPTERS)
        run.save(step, run_state(params, {"mu": jax.tree.map(np.zeros_like, params)}, seed))
    run.close()
    return model


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("lora_runs")
    base = _base(root / "base")
    sft_cfg = LoRAConfig(rank=4, alpha=8.0, targets="q,k,v,o")
    sft = _lora_run(root / "sft", base, sft_cfg, seed=1, steps=(0, 1))
    rl_cfg = LoRAConfig(rank=2, alpha=4.0, targets="v,gate,down")
    rl = _lora_run(root / "rl", root / "sft", rl_cfg, seed=2)     # an RL stage on the SFT run: a fresh adapter
    return root, sft, rl


def test_policy_json_records_the_base_and_lora_and_the_checkpoint_holds_only_adapters(runs):
    root, sft, _ = runs
    meta = json.loads((root / "sft" / "policy.json").read_text())
    assert meta["base"] == str((root / "base").resolve()) and meta["base_hf_id"] == str((root / "base").resolve())
    assert meta["lora"] == {"rank": 4, "alpha": 8.0, "targets": "q,k,v,o", "dropout": 0.0}
    rl_meta = json.loads((root / "rl" / "policy.json").read_text())
    assert rl_meta["base"] == str((root / "sft").resolve()) and rl_meta["base_hf_id"] is None   # no sft/export yet
    assert base_hf_id("qwen2.5-coder-1.5b") == "Qwen/Qwen2.5-Coder-1.5B-Instruct"
    step = root / "sft" / "checkpoints" / "1"
    disk = sum(f.stat().st_size for f in step.rglob("*") if f.is_file())
    base_bytes = sum(x.size * 4 for x in jax.tree.leaves(nnx.state(lora.merged_model(sft))))
    assert disk < base_bytes / 4, (disk, base_bytes)          # adapters + their state, not the base


def test_load_policy_of_a_lora_run_is_the_merged_newest_checkpoint(runs):
    root, sft, rl = runs
    want = np.asarray(_forward(sft, TOKS))                     # the adapted model itself, adapters unmerged
    got, tok = load_policy(root / "sft")
    assert not got.has_adapters and tok is not None and tok.chat_template
    np.testing.assert_allclose(np.asarray(_forward(got, TOKS)), want, atol=1e-4, rtol=0)
    kept, _ = load_policy(root / "sft", merge=False)
    assert lora.lora_config(kept) == LoRAConfig(rank=4, alpha=8.0)
    np.testing.assert_allclose(np.asarray(_forward(kept, TOKS)), want, atol=1e-5, rtol=0)
    older, _ = load_policy(root / "sft" / "checkpoints" / "0")
    assert np.abs(np.asarray(_forward(older, TOKS)) - want).max() > 1e-2
    # the RL stage: its adapter on the SFT-merged policy, whose reference (zeroed adapter) is the SFT policy
    rl_merged, _ = load_policy(root / "rl")
    np.testing.assert_allclose(np.asarray(_forward(rl_merged, TOKS)), np.asarray(_forward(rl, TOKS)), atol=1e-4,
                               rtol=0)
    graphdef, adapters, rest = nnx.split(rl, ADAPTERS, ...)
    reference = nnx.merge(graphdef, lora.zero_adapters(adapters), rest)
    np.testing.assert_allclose(np.asarray(_forward(reference, TOKS)), want, atol=1e-4, rtol=0)


def test_export_writes_the_merged_model_and_the_peft_adapter_and_base_plus_adapter_loads_it(runs, tmp_path):
    import peft
    import torch
    import transformers
    root, sft, _ = runs
    out = tmp_path / "export"
    proc = subprocess.run([sys.executable, "-m", "experiments.export", f"--model={root / 'sft'}", f"--out={out}",
                           "--adapter_dtype=bfloat16"], cwd=REPO, capture_output=True, text=True, timeout=300,
                          check=False, env={"JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "PEFT LoRA adapter, bfloat16" in proc.stdout
    meta = json.loads((out / "adapter" / "adapter_config.json").read_text())
    assert meta["r"] == 4 and meta["base_model_name_or_path"] == str((root / "base").resolve())
    want = np.asarray(_forward(sft, TOKS))
    hf = transformers.AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
    with torch.no_grad():
        np.testing.assert_allclose(hf(torch.tensor(TOKS, dtype=torch.long)).logits.numpy(), want, atol=1e-4, rtol=0)
        base = transformers.AutoModelForCausalLM.from_pretrained(meta["base_model_name_or_path"], dtype=torch.float32)
        adapted = peft.PeftModel.from_pretrained(base, out / "adapter").eval()
        via_peft = adapted(torch.tensor(TOKS, dtype=torch.long)).logits.numpy()
    # BASE+ADAPTER: the PEFT directory on its base (bfloat16 adapter: its rounding is the only difference)
    plus, tok = load_policy(f"{root / 'base'}+{out / 'adapter'}")
    assert not plus.has_adapters and tok is not None
    got = np.asarray(_forward(plus, TOKS))
    np.testing.assert_allclose(got, via_peft, atol=1e-4, rtol=0)
    assert 0 < np.abs(got - want).max() < 0.05
    with pytest.raises(CheckpointError, match="no adapter directory at"):
        load_policy(f"{root / 'base'}+{tmp_path / 'nothing'}")
    with pytest.raises(CheckpointError, match="has no adapter_config.json"):
        load_policy(f"{root / 'base'}+{out}")


def test_a_lora_run_whose_base_is_gone_says_so_in_one_sentence(runs, tmp_path):
    root, _, _ = runs
    moved = tmp_path / "moved"
    (moved / "checkpoints").mkdir(parents=True)
    meta = json.loads((root / "sft" / "policy.json").read_text())
    (moved / "policy.json").write_text(json.dumps({**meta, "base": str(tmp_path / "gone")}))
    import shutil
    shutil.copytree(root / "sft" / "checkpoints" / "1", moved / "checkpoints" / "1")
    with pytest.raises(CheckpointError, match=r"is built on .*gone, which could not be loaded .*; put that model "
                                              "back where policy.json says") as e:
        load_policy(moved)
    assert "\n" not in str(e.value)


def test_a_damaged_newest_adapter_checkpoint_is_named_and_the_previous_one_used(runs, tmp_path, capsys):
    import shutil

    from tests.cudaperf_jax.experiment.test_checkpoint_faults import _garbage
    root, sft, _ = runs
    work = tmp_path / "run"
    shutil.copytree(root / "sft", work)
    _garbage(work / "checkpoints" / "1")
    _, params, _ = split_model(sft, ADAPTERS)
    abstract = run_state(params, {"mu": jax.tree.map(np.zeros_like, params)}, 1)
    run = open_run(work, {"seed": 1}, name="t")
    state = run.restore(abstract)
    said = [ln for ln in capsys.readouterr().err.splitlines() if "could not be read" in ln]
    assert len(said) == 1 and said[0].endswith("resumes from checkpoint 0.") and run.restore_step() == 1
    run.close()
    older, _ = load_policy(root / "sft" / "checkpoints" / "0", merge=False)
    for a, b in zip(jax.tree.leaves(state["params"]), jax.tree.leaves(nnx.state(older, ADAPTERS))):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
