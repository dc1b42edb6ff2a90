"""HF directories: export -> transformers.AutoModelForCausalLM gives the same logits; re-import is exact."""
import json

import jax.numpy as jnp
import numpy as np
import pytest
import torch
import transformers as tf

from cudaperf_jax.models.config import ModelConfig
from cudaperf_jax.models.hf_io import (
    CheckpointError,
    model_from_hf_state,
    model_to_hf_state,
    read_hf_dir,
    save_hf_dir,
)
from cudaperf_jax.models.loading import load_policy
from tests.cudaperf_jax.models import tiny


@pytest.mark.parametrize("kind", ["llama", "qwen2", "qwen3"])
def test_export_loads_in_transformers_with_same_logits(tmp_path, kind):
    src = tiny.hf_model(kind, seed=7)
    model = model_from_hf_state(ModelConfig.from_hf(src.config.to_dict()), tiny.state_dict(src))
    out = save_hf_dir(model, tmp_path / "export", tokenizer=tiny.tokenizer())
    assert {"config.json", "model.safetensors", "generation_config.json", "tokenizer.json"} <= {
        p.name for p in out.iterdir()}
    assert json.loads((out / "config.json").read_text())["model_type"] == kind

    ref = tf.AutoModelForCausalLM.from_pretrained(str(out), dtype=torch.float32).eval()
    toks = np.random.RandomState(3).randint(0, 320, (2, 30))
    with torch.no_grad():
        want = ref(torch.tensor(toks)).logits.numpy()
        source = src(torch.tensor(toks)).logits.numpy()
    got = np.asarray(model(jnp.asarray(toks)))
    np.testing.assert_allclose(want, got, atol=1e-4, rtol=0)
    np.testing.assert_allclose(want, source, atol=1e-4, rtol=0)

    again, tok = load_policy(out)
    assert again.cfg == model.cfg and tok is not None and tok.eos_token == "<|im_end|>"
    a, b = model_to_hf_state(model), model_to_hf_state(again)
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def test_bfloat16_export_and_errors(tmp_path):
    src = tiny.hf_model("qwen2", seed=1)
    model = model_from_hf_state(ModelConfig.from_hf(src.config.to_dict()), tiny.state_dict(src))
    out = save_hf_dir(model, tmp_path / "bf16", dtype="bfloat16")
    _, tensors = read_hf_dir(out)
    assert tensors["model.embed_tokens.weight"].dtype.name == "bfloat16"
    again, tok = load_policy(out)
    assert tok is None
    np.testing.assert_allclose(np.asarray(again.embed[...]), np.asarray(model.embed[...]), rtol=1e-2, atol=1e-3)
    with pytest.raises(CheckpointError, match="no config.json"):
        read_hf_dir(tmp_path)
    broken = dict(tensors)
    broken.pop("model.layers.1.mlp.up_proj.weight")
    with pytest.raises(CheckpointError, match="no tensor"):
        model_from_hf_state(model.cfg, broken)
