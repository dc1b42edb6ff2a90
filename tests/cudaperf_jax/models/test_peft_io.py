"""PEFT's adapter format in and out: our adapters load in peft.PeftModel with the same logits, a PEFT adapter loads in
our decoder with the same logits, merged weights export as a plain HF model, and adapters that do not fit are refused
in one sentence without touching the model."""
import json

import jax
import jax.numpy as jnp
import numpy as np
import peft
import pytest
import torch
from flax import nnx
from transformers import AutoModelForCausalLM

from cudaperf_jax.models import lora, peft_io
from cudaperf_jax.models.config import ModelConfig
from cudaperf_jax.models.hf_io import CheckpointError, model_from_hf_state, save_hf_dir
from cudaperf_jax.models.lora import ADAPTERS, LoRAConfig
from tests.cudaperf_jax.models import tiny

_forward = nnx.jit(lambda m, t: m(t))
TOKS = np.random.RandomState(3).randint(0, 320, (2, 20))
ATOL = 1e-4   # float32, the tolerance of the decoder's other parity tests against transformers


def _ours(ref):
    return model_from_hf_state(ModelConfig.from_hf(ref.config.to_dict()), tiny.state_dict(ref))


def _torch_logits(model) -> np.ndarray:
    with torch.no_grad():
        return model(torch.tensor(TOKS)).logits.numpy()


def _random_adapters(model, seed=0):
    leaves, tree = jax.tree.flatten(nnx.state(model, ADAPTERS))
    keys = jax.random.split(jax.random.key(seed), len(leaves))
    nnx.update(model, jax.tree.unflatten(tree, [0.2 * jax.random.normal(k, x.shape) for k, x in zip(keys, leaves)]))
    return model


def test_our_adapters_load_in_peft_with_the_same_logits(tmp_path):
    model = _ours(tiny.hf_model("qwen2", seed=1))
    lora.add_adapters(model, LoRAConfig(rank=4, alpha=12.0, targets="q,k,v,o,gate,up,down"), nnx.Rngs(0))
    _random_adapters(model)
    ours = np.asarray(_forward(model, jnp.asarray(TOKS)))
    peft_io.save_peft_dir(model, tmp_path, base_model_name_or_path="tiny-qwen2")
    meta = json.loads((tmp_path / "adapter_config.json").read_text())
    assert (meta["r"], meta["lora_alpha"], meta["peft_type"], meta["task_type"], meta["bias"]) == (
        4, 12.0, "LORA", "CAUSAL_LM", "none")
    got = peft.PeftModel.from_pretrained(tiny.hf_model("qwen2", seed=1), str(tmp_path)).eval()
    assert sorted(got.peft_config["default"].target_modules) == sorted(
        ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
    base = _torch_logits(tiny.hf_model("qwen2", seed=1))
    assert np.abs(ours - base).max() > 0.1   # the adapters matter
    np.testing.assert_allclose(_torch_logits(got), ours, atol=ATOL, rtol=0)


def test_a_bfloat16_adapter_file_is_half_the_size_and_loads_rounded(tmp_path):
    import ml_dtypes
    model = _ours(tiny.hf_model("qwen2", seed=1))
    lora.add_adapters(model, LoRAConfig(rank=4, alpha=12.0, targets="q,v,down"), nnx.Rngs(0))
    _random_adapters(model)
    f32 = peft_io.save_peft_dir(model, tmp_path / "f32") / peft_io.WEIGHTS_FILE
    bf16 = peft_io.save_peft_dir(model, tmp_path / "bf16", dtype="bfloat16") / peft_io.WEIGHTS_FILE
    tensors = sum(x.size for x in jax.tree.leaves(nnx.state(model, ADAPTERS)))
    assert f32.stat().st_size - 4 * tensors == bf16.stat().st_size - 2 * tensors   # the same header, half the data
    back = peft_io.load_peft_dir(_ours(tiny.hf_model("qwen2", seed=1)), tmp_path / "bf16")
    for a, b in zip(jax.tree.leaves(nnx.state(back, ADAPTERS)), jax.tree.leaves(nnx.state(model, ADAPTERS))):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b).astype(ml_dtypes.bfloat16).astype(np.float32))
    got = peft.PeftModel.from_pretrained(tiny.hf_model("qwen2", seed=1), str(tmp_path / "bf16")).eval()
    np.testing.assert_allclose(_torch_logits(got.float()), np.asarray(_forward(back, jnp.asarray(TOKS))), atol=ATOL,
                               rtol=0)
    with pytest.raises(ValueError, match="float32 or bfloat16"):
        peft_io.save_peft_dir(model, tmp_path / "f16", dtype="float16")


def test_a_peft_adapter_loads_in_our_decoder_with_the_same_logits(tmp_path):
    hf = peft.get_peft_model(tiny.hf_model("llama", seed=2), peft.LoraConfig(
        r=3, lora_alpha=5, lora_dropout=0.1, target_modules=["q_proj", "v_proj", "o_proj", "down_proj"],
        task_type="CAUSAL_LM"))
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.2)
    hf.eval()
    hf.save_pretrained(str(tmp_path))
    want = _torch_logits(hf)
    model = _ours(tiny.hf_model("llama", seed=2))
    peft_io.load_peft_dir(model, tmp_path)
    assert lora.lora_config(model) == LoRAConfig(rank=3, alpha=5.0, targets="q,v,o,down", dropout=0.1)
    np.testing.assert_allclose(np.asarray(_forward(model, jnp.asarray(TOKS))), want, atol=ATOL, rtol=0)
    # into a model that already has adapters of the same settings: replaced in place
    again = _ours(tiny.hf_model("llama", seed=2))
    lora.add_adapters(again, LoRAConfig(rank=3, alpha=5.0, targets="q,v,o,down"), nnx.Rngs(1))
    peft_io.load_peft_dir(again, tmp_path)
    np.testing.assert_allclose(np.asarray(_forward(again, jnp.asarray(TOKS))), want, atol=ATOL, rtol=0)


def test_merged_weights_export_as_a_plain_hf_model(tmp_path):
    model = _ours(tiny.hf_model("qwen3", seed=3))
    lora.add_adapters(model, LoRAConfig(rank=2, alpha=4.0, targets="k,up,down"), nnx.Rngs(0))
    _random_adapters(model, 1)
    ours = np.asarray(_forward(model, jnp.asarray(TOKS)))
    with pytest.raises(CheckpointError, match="has LoRA adapters"):
        save_hf_dir(model, tmp_path / "unmerged")
    save_hf_dir(lora.merged_model(model), tmp_path / "merged")
    hf = AutoModelForCausalLM.from_pretrained(str(tmp_path / "merged"), dtype=torch.float32).eval()
    np.testing.assert_allclose(_torch_logits(hf), ours, atol=ATOL, rtol=0)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A PEFT directory (rank 2 on q,v) of the tiny Qwen2, and a function making a fresh tiny Qwen2 decoder."""
    path = tmp_path_factory.mktemp("adapter")
    ref = tiny.hf_model("qwen2", seed=5)
    model = _ours(ref)
    lora.add_adapters(model, LoRAConfig(rank=2, alpha=4.0, targets="q,v"), nnx.Rngs(0))
    peft_io.save_peft_dir(_random_adapters(model), path)
    return path, lambda: _ours(ref)


def _copy(src, dst, config=None, drop=None):
    from safetensors.numpy import load_file, save_file
    dst.mkdir()
    meta = json.loads((src / "adapter_config.json").read_text())
    (dst / "adapter_config.json").write_text(json.dumps({**meta, **(config or {})}))
    tensors = load_file(str(src / "adapter_model.safetensors"))
    save_file({k: v for k, v in tensors.items() if k != drop}, str(dst / "adapter_model.safetensors"))
    return dst


@pytest.mark.parametrize("case,match", [
    ("no_config", "has no adapter_config.json"), ("no_weights", "has no adapter_model.safetensors"),
    ("rank", "rank 2, alpha 4.0 on q,v but the model's are rank 3"),
    ("targets", "but the model's are rank 2, alpha 4.0 on q,k,v"),
    ("dora", "sets use_dora=True"), ("module", "targets modules \\['lm_head'\\]"), ("regex", "only a list of module"),
    ("missing", "has no tensor base_model.model.model.layers.1.self_attn.v_proj.lora_B.weight"),
    ("shape", "has shape"), ("prompt", "holds a 'PROMPT_TUNING' adapter")])
def test_adapters_that_do_not_fit_are_refused_and_the_model_is_untouched(saved, tmp_path, case, match):
    src, fresh = saved
    model = fresh()
    if case == "rank":
        lora.add_adapters(model, LoRAConfig(rank=3, alpha=4.0, targets="q,v"), nnx.Rngs(0))
    if case == "targets":
        lora.add_adapters(model, LoRAConfig(rank=2, alpha=4.0, targets="q,k,v"), nnx.Rngs(0))
    before = jax.tree.map(np.asarray, nnx.state(model))
    path = {"no_config": tmp_path, "rank": src, "targets": src}.get(case)
    if case == "no_weights":
        path = tmp_path
        (tmp_path / "adapter_config.json").write_text((src / "adapter_config.json").read_text())
    elif path is None:
        config = {"dora": {"use_dora": True}, "module": {"target_modules": ["q_proj", "lm_head"]},
                  "regex": {"target_modules": ".*proj"}, "prompt": {"peft_type": "PROMPT_TUNING"}}.get(case)
        drop = "base_model.model.model.layers.1.self_attn.v_proj.lora_B.weight" if case == "missing" else None
        path = _copy(src, tmp_path / "adapter", config, drop)
        if case == "shape":   # an adapter of the same rank for a model with another hidden size
            other = model_from_hf_state(ModelConfig.from_hf(tiny.hf_config("qwen2", hidden_size=32).to_dict()),
                                        tiny.state_dict(tiny.hf_model("qwen2", hidden_size=32)))
            lora.add_adapters(other, LoRAConfig(rank=2, alpha=4.0, targets="q,v"), nnx.Rngs(0))
            path = peft_io.save_peft_dir(other, tmp_path / "other")
    with pytest.raises(CheckpointError, match=match) as err:
        peft_io.load_peft_dir(model, path)
    assert "\n" not in str(err.value) and str(err.value).count("; ") >= 1
    after = jax.tree.map(np.asarray, nnx.state(model))
    assert jax.tree.structure(after) == jax.tree.structure(before)
    assert all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(after), jax.tree.leaves(before)))
