"""The fused one-token decode layers (decode_fused.py) in Pallas' interpreter: each prologue against plain
XLA ops, and whole decode steps and sampled tokens against the XLA path for Llama, Qwen2 and Qwen3."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from cudaperf_jax.models import decode_fused as df
from cudaperf_jax.models.config import ModelConfig
from cudaperf_jax.models.decoder import Decoder
from cudaperf_jax.models.gemv import GemvConfig
from tests.cudaperf_jax.models import tiny


def _model(kind, dtype=jnp.float32, **over):
    cfg = ModelConfig.from_hf(tiny.hf_config(kind, head_dim=32, **over).to_dict())
    model = Decoder(cfg, rngs=nnx.Rngs(0), dtype=dtype, param_dtype=dtype)
    leaves, tdef = jax.tree.flatten(nnx.state(model))  # random norm scales and biases too
    keys = jax.random.split(jax.random.key(1), len(leaves))
    nnx.update(model, jax.tree.unflatten(tdef, [x + 0.1 * jax.random.normal(k, x.shape, x.dtype)
                                                for x, k in zip(leaves, keys)]))
    return model


@pytest.mark.parametrize("kind", ["plain", "resid_norm", "swiglu"])
def test_matvec_prologues_match_xla(kind):
    import importlib.util
    from pathlib import Path
    spec = importlib.util.spec_from_file_location("bench_fused", Path(__file__).parents[3] / "benchmarks" / "decode_fused.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    k, n = 64, 96
    ks = jax.random.split(jax.random.key(0), 5)
    w = jax.random.normal(ks[0], (k, n), jnp.bfloat16)
    width = 2 * k if kind == "swiglu" else k
    x = jax.random.normal(ks[1], (k + 32,) if kind == "plain" else (k,), jnp.bfloat16)
    parts = jax.random.normal(ks[2], (3, width), jnp.float32)
    bias = jax.random.normal(ks[3], (width,), jnp.bfloat16)
    scale = jax.random.normal(ks[4], (k,), jnp.bfloat16)
    want = np.asarray(bench.reference(kind, w, x, parts, bias, scale, 1e-6))
    out = df.matvec(w, kind, x=x, parts=parts, bias=bias, scale=scale, config=GemvConfig(32, 2, 16), interpret=True)
    got = np.asarray((out[0] if kind == "resid_norm" else out).sum(axis=0))
    np.testing.assert_allclose(got, want, atol=2e-2 * np.abs(want).max(), rtol=2e-2)
    if kind == "resid_norm":  # the residual stream it writes for the next kernel
        y = jnp.sum(parts, axis=0).astype(jnp.bfloat16) + bias
        np.testing.assert_array_equal(np.asarray(out[1], np.float32), np.asarray(x + y, np.float32))


@pytest.mark.parametrize("kind,over", [("llama", {}), ("qwen2", {}), ("qwen3", {"num_key_value_heads": 1})])
def test_decode_steps_match_xla(monkeypatch, kind, over):
    model = _model(kind, **over)
    toks = jnp.asarray([[5, 17, 3, 60, 11]], jnp.int32)
    monkeypatch.setenv("CUDAPERF_DECODE_FUSED", "off")
    want = tiny.stepwise_logits(model, toks, 8)
    monkeypatch.setenv("CUDAPERF_DECODE_FUSED", "interpret")
    assert df.applies(model.cfg, 1, 1) and not df.applies(model.cfg, 2, 1) and not df.applies(model.cfg, 1, 2)
    got = tiny.stepwise_logits(model, toks, 8)
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=1e-4)


def test_sampler_gives_the_same_tokens(monkeypatch):
    from cudaperf_jax.generation.sampler import Sampler, SamplingParams
    model = _model("qwen2", jnp.bfloat16)
    params = SamplingParams(max_new_tokens=6, temperature=0.0, stop_token_ids=())
    prompts = [[7, 8, 9, 10, 11]]
    monkeypatch.setenv("CUDAPERF_DECODE_FUSED", "off")
    want = Sampler(model, prompt_bucket=8).generate(prompts, params)
    monkeypatch.setenv("CUDAPERF_DECODE_FUSED", "interpret")
    got = Sampler(model, prompt_bucket=8).generate(prompts, params)
    np.testing.assert_array_equal(got.tokens, want.tokens)
    np.testing.assert_allclose(got.logprobs, want.logprobs, atol=0.1)


def test_unsupported_shapes_and_auto_mode_stay_on_xla(monkeypatch):
    cfg = ModelConfig.from_hf(tiny.hf_config("llama").to_dict())  # head_dim 16: the score product needs >= 32
    monkeypatch.setenv("CUDAPERF_DECODE_FUSED", "interpret")
    assert not df.applies(cfg, 1, 1)
    monkeypatch.setenv("CUDAPERF_DECODE_FUSED", "auto")  # auto: only on one GPU
    assert not df.applies(ModelConfig.from_hf(tiny.hf_config("llama", head_dim=32).to_dict()), 1, 1)
    monkeypatch.setenv("CUDAPERF_DECODE_FUSED", "sometimes")
    with pytest.raises(ValueError, match="CUDAPERF_DECODE_FUSED"):
        df.mode()
