"""Decoder parity against transformers (PyTorch) on tiny random Llama, Qwen2 and Qwen3 checkpoints."""
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from flax import nnx

from cudaperf_jax.models.config import ConfigError, ModelConfig, RopeConfig
from cudaperf_jax.models.decoder import Decoder, KVCache
from cudaperf_jax.models.hf_io import model_from_hf_state
from cudaperf_jax.models.rope import inv_frequencies
from tests.cudaperf_jax.models import tiny

_forward = nnx.jit(lambda m, t: m(t))


@pytest.mark.parametrize("kind", ["llama", "qwen2", "qwen3"])
def test_logits_match_transformers(kind):
    ref = tiny.hf_model(kind)
    cfg = ModelConfig.from_hf(ref.config.to_dict())
    assert cfg.qk_norm == (kind == "qwen3") and cfg.qkv_bias == (kind == "qwen2")
    model = model_from_hf_state(cfg, tiny.state_dict(ref))
    toks = np.random.RandomState(1).randint(0, cfg.vocab_size, (2, 40))
    with torch.no_grad():
        want = ref(torch.tensor(toks)).logits.numpy()
    got = np.asarray(_forward(model, jnp.asarray(toks)))
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=0)


def test_llama_biases_and_untied_head_match_transformers():
    ref = tiny.hf_model("llama", attention_bias=True, mlp_bias=True, seed=3)
    cfg = ModelConfig.from_hf(ref.config.to_dict())
    assert cfg.qkv_bias and cfg.o_bias and cfg.mlp_bias and not cfg.tie_word_embeddings
    model = model_from_hf_state(cfg, tiny.state_dict(ref))
    toks = np.random.RandomState(2).randint(0, cfg.vocab_size, (1, 17))
    with torch.no_grad():
        want = ref(torch.tensor(toks)).logits.numpy()
    np.testing.assert_allclose(np.asarray(_forward(model, jnp.asarray(toks))), want, atol=1e-4, rtol=0)


@pytest.mark.parametrize("kind", ["llama", "qwen2", "qwen3"])
def test_rope_frequencies_match_transformers(kind):
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    hf_cfg = tiny.hf_config(kind)
    cfg = ModelConfig.from_hf(hf_cfg.to_dict())
    want, want_att = ROPE_INIT_FUNCTIONS[cfg.rope.type](hf_cfg, "cpu")
    got, att = inv_frequencies(cfg.rope, cfg.head_dim, cfg.max_position_embeddings)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-6)
    assert att == pytest.approx(want_att)


def test_cached_decode_equals_full_forward():
    cfg = ModelConfig(model_type="qwen3", vocab_size=64, hidden_size=32, intermediate_size=48, num_layers=2,
                      num_heads=4, num_kv_heads=2, head_dim=8, qk_norm=True)
    model = Decoder(cfg, rngs=nnx.Rngs(0))
    toks = jnp.asarray(np.random.RandomState(0).randint(0, 64, (2, 10)))
    full = np.asarray(_forward(model, toks))
    step = nnx.jit(lambda m, t, p, c, i: m(t, p, cache=c, cache_index=i))
    cache = KVCache.zeros(cfg, 2, 16, jnp.float32)
    pos = jnp.broadcast_to(jnp.arange(6, dtype=jnp.int32), (2, 6))
    logits, cache = step(model, toks[:, :6], pos, cache, 0)
    steps = [np.asarray(logits)]
    for t in range(6, 10):
        logits, cache = step(model, toks[:, t:t + 1], jnp.full((2, 1), t, jnp.int32), cache, jnp.int32(t))
        steps.append(np.asarray(logits))
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, atol=1e-5)


def test_config_round_trip_and_errors():
    cfg = ModelConfig.from_hf(tiny.hf_config("llama").to_dict())
    assert ModelConfig.from_hf(cfg.to_hf()) == cfg
    with pytest.raises(ConfigError, match="not supported"):
        ModelConfig.from_hf({**cfg.to_hf(), "model_type": "gpt2"})
    with pytest.raises(ConfigError, match="multiple"):
        ModelConfig(num_heads=6, num_kv_heads=4)
    with pytest.raises(ConfigError, match="rope_type"):
        ModelConfig(rope=RopeConfig(type="longrope"))
    assert cfg.num_params == sum(v.size for v in tiny.state_dict(tiny.hf_model("llama")).values())
