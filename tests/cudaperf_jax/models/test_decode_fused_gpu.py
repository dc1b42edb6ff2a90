"""The fused one-token decode layers (decode_fused.py) compiled by Triton on a real GPU, against the XLA path."""
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from cudaperf_jax.models import decode_fused as df
from cudaperf_jax.models.config import ModelConfig
from cudaperf_jax.models.decoder import Decoder
from tests.cudaperf_jax.models import tiny

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(jax.default_backend() != "gpu", reason="needs a GPU backend for JAX")]

CONFIGS = {  # Qwen2.5-1.5B and SmolLM2-135M shapes with fewer layers and vocabulary, and a Qwen3-style one
    "qwen2.5-1.5b": {"model_type": "qwen2", "hidden_size": 1536, "intermediate_size": 8960, "num_heads": 12,
                     "num_kv_heads": 2, "head_dim": 128, "qkv_bias": True, "tie_word_embeddings": True},
    "smollm2-135m": {"model_type": "llama", "hidden_size": 576, "intermediate_size": 1536, "num_heads": 9,
                     "num_kv_heads": 3, "head_dim": 64, "tie_word_embeddings": True},
    "qwen3": {"model_type": "qwen3", "hidden_size": 1024, "intermediate_size": 3072, "num_heads": 16, "num_kv_heads": 8,
              "head_dim": 128, "qk_norm": True},
}


def _model(name, dtype):
    cfg = ModelConfig(vocab_size=4096, num_layers=3, **CONFIGS[name])
    model = Decoder(cfg, rngs=nnx.Rngs(0), dtype=dtype, param_dtype=dtype)
    leaves, tdef = jax.tree.flatten(nnx.state(model))
    keys = jax.random.split(jax.random.key(1), len(leaves))
    nnx.update(model, jax.tree.unflatten(tdef, [x + 0.05 * jax.random.normal(k, x.shape, x.dtype)
                                                for x, k in zip(leaves, keys)]))
    return model


@pytest.mark.parametrize("name,epilogue", [(n, "") for n in sorted(CONFIGS)]
                         + [("qwen2.5-1.5b", "residual"), ("qwen2.5-1.5b", "swiglu"), ("qwen3", "both")])
def test_fused_steps_match_xla_float32(tmp_path, monkeypatch, name, epilogue):
    model = _model(name, jnp.float32)
    c, tiles = model.cfg, {"block_n": 16, "split_k": 1, "block_k": 128, "num_warps": 4, "num_stages": 4}
    table = []
    if epilogue in ("residual", "both"):  # o and down without split-K: the residual add in their epilogue
        table += [{"kind": "attn", "K": c.num_heads * c.head_dim, "N": c.hidden_size, "config": tiles},
                  {"kind": "swiglu", "K": c.intermediate_size, "N": c.hidden_size, "config": tiles},
                  {"kind": "plain", "K": c.intermediate_size, "N": c.hidden_size, "config": tiles}]
    if epilogue in ("swiglu", "both"):  # gate_up without split-K: SwiGLU in its epilogue, down's input plain
        table += [{"kind": "norm", "K": c.hidden_size, "N": 2 * c.intermediate_size, "config": tiles}]
    if table:
        (tmp_path / "t.json").write_text(json.dumps(table))
        monkeypatch.setenv("CUDAPERF_FUSED_TABLE", str(tmp_path / "t.json"))
    toks = jnp.asarray([[5, 17, 3, 60, 11, 900, 4000, 2, 8, 9]], jnp.int32)
    monkeypatch.setenv("CUDAPERF_DECODE_FUSED", "off")
    monkeypatch.setenv("CUDAPERF_DECODE_GEMV", "off")
    with jax.default_matmul_precision("highest"):  # XLA's float32 dots default to TF32 on the GPU
        want = tiny.stepwise_logits(model, toks, 16)
    monkeypatch.setenv("CUDAPERF_DECODE_FUSED", "on")
    monkeypatch.setenv("CUDAPERF_DECODE_GEMV", "auto")
    assert df.applies(model.cfg, 1, 1)
    got = tiny.stepwise_logits(model, toks, 16)
    np.testing.assert_allclose(got, want, atol=2e-3, rtol=2e-3)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_fused_sampler_bf16_agrees_with_xla(monkeypatch, name):
    """The sampler's greedy decode through the fused kernels (the step launch for the Qwen shapes) picks, at every
    step, XLA's choice up to a near-tie: teacher-forced XLA logits of the prompt and the fused continuation put each
    picked token within 4% of the largest logit of its step (bf16 sums in another order flip near-ties, and a flip
    changes the rest of a greedy continuation, so the two continuations are not compared token by token)."""
    from cudaperf_jax.generation.sampler import Sampler, SamplingParams
    model = _model(name, jnp.bfloat16)
    n = 24
    params = SamplingParams(max_new_tokens=n, temperature=0.0, stop_token_ids=())
    prompts = [[int(t) for t in np.random.RandomState(0).randint(3, 4096, 40)]]
    monkeypatch.setenv("CUDAPERF_DECODE_FUSED", "off")
    want = Sampler(model, prompt_bucket=64).generate(prompts, params)
    jax.clear_caches()   # the decode program traced afresh: the setting is read while tracing
    monkeypatch.setenv("CUDAPERF_DECODE_FUSED", "on")
    got = Sampler(model, prompt_bucket=64).generate(prompts, params)
    assert got.tokens[0, 0] == want.tokens[0, 0]   # from the prefill's logits (not fused)
    monkeypatch.setenv("CUDAPERF_DECODE_FUSED", "off")
    seq = jnp.asarray([prompts[0] + got.tokens[0].tolist()], jnp.int32)
    rows = np.asarray(model(seq)[0], np.float32)[len(prompts[0]) - 1:len(prompts[0]) - 1 + n]
    picked = rows[np.arange(n), got.tokens[0]]
    tol = 0.04 * np.abs(rows).max()
    assert (picked >= rows.max(-1) - tol).all(), (got.tokens, picked - rows.max(-1), tol)
    assert (picked == rows.max(-1)).mean() >= 0.75


@pytest.mark.parametrize("name", ["qwen2.5-1.5b", "qwen3"])
def test_the_sampler_builds_the_step_layouts_once_per_set_of_weights(name):
    """The step launch's group-major gate_up (decode_fused.step_layouts) is computed once by the Sampler and given to
    every decode program: the same tokens and log-probabilities as building it inside the program, kept across calls
    with the same weights, rebuilt after update_weights, and not computed for a batch of two (no step launch)."""
    from cudaperf_jax.generation import sampler as sampler_mod
    jax.clear_caches()   # decode programs traced afresh (jit does not see the settings read while tracing)
    model = _model(name, jnp.bfloat16)
    params = sampler_mod.SamplingParams(max_new_tokens=12, temperature=0.0, stop_token_ids=())
    prompts = [[int(t) for t in np.random.RandomState(0).randint(3, 4096, 40)]]
    sampler = sampler_mod.Sampler(model, prompt_bucket=64)
    got = sampler.generate(prompts, params)
    layouts = sampler._layouts
    assert len(layouts) == model.cfg.num_layers and layouts[0].ndim == 3
    again = sampler.generate(prompts, params)
    assert sampler._layouts[0] is layouts[0]                               # the same arrays: not rebuilt
    np.testing.assert_array_equal(again.tokens, got.tokens)
    toks, mask = sampler.pad(prompts)
    keys = jax.random.split(jax.random.PRNGKey(0), 1)
    sampler._step_layouts = lambda b, s: ()                                  # the program builds them itself
    jax.clear_caches()
    built = sampler.generate_tokens(toks, mask, params, keys)
    del sampler._step_layouts
    cached = sampler.generate_tokens(toks, mask, params, keys)
    np.testing.assert_array_equal(np.asarray(cached[0]), np.asarray(built[0]))
    np.testing.assert_array_equal(np.asarray(cached[1]), np.asarray(built[1]))
    sampler.update_weights(model)
    assert sampler._layouts is None
    sampler.generate([prompts[0], prompts[0][:30]], params)                  # batch 2: no step launch, no layouts
    assert sampler._layouts is None
