"""The fused one-token decode layers (kernels/fused.py, kernels/step.py) in Pallas' interpreter: each prologue against plain
XLA ops, and whole decode steps and sampled tokens against the XLA path for Llama, Qwen2 and Qwen3."""
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from cudaperf_jax.kernels import DecodeKernels, step
from cudaperf_jax.kernels import fused as df
from cudaperf_jax.kernels.config import tilings
from cudaperf_jax.kernels.gemv import GemvConfig
from cudaperf_jax.models.config import ModelConfig
from cudaperf_jax.models.decoder import Decoder
from cudaperf_jax.models.ops import rms_norm
from tests.cudaperf_jax.models import tiny

PALLAS = DecodeKernels(path="pallas", interpret=True)


def _model(kind, dtype=jnp.float32, **over):
    cfg = ModelConfig.from_hf(tiny.hf_config(kind, head_dim=32, **over).to_dict())
    model = Decoder(cfg, rngs=nnx.Rngs(0), dtype=dtype, param_dtype=dtype)
    leaves, tdef = jax.tree.flatten(nnx.state(model))  # random norm scales and biases too
    keys = jax.random.split(jax.random.key(1), len(leaves))
    nnx.update(model, jax.tree.unflatten(tdef, [x + 0.1 * jax.random.normal(k, x.shape, x.dtype)
                                                for x, k in zip(leaves, keys)]))
    return model


def _reference(kind, w, x, parts, bias):
    """float32 x_in @ w with the prologue done by plain XLA ops (plain and swiglu)."""
    if kind == "plain":
        xin = x[: w.shape[0]]
    else:
        f = w.shape[0]
        gu = jnp.sum(parts, axis=0).astype(jnp.bfloat16) + bias
        xin = jax.nn.silu(gu[:f]) * gu[f:]
    return jnp.einsum("k,kn->n", xin.astype(jnp.float32), w.astype(jnp.float32))


def _table(tmp_path, rows):
    path = tmp_path / "t.json"
    path.write_text(json.dumps(rows))
    return str(path)


@pytest.mark.parametrize("kind", ["plain", "swiglu"])
def test_matvec_prologues_match_xla(kind):
    k, n = 64, 96
    ks = jax.random.split(jax.random.key(0), 4)
    w = jax.random.normal(ks[0], (k, n), jnp.bfloat16)
    x = jax.random.normal(ks[1], (k + 32,), jnp.bfloat16)
    parts = jax.random.normal(ks[2], (3, 2 * k), jnp.float32)
    bias = jax.random.normal(ks[3], (2 * k,), jnp.bfloat16)
    want = np.asarray(_reference(kind, w, x, parts, bias))
    out = df.matvec(w, kind, x=x, parts=parts, bias=bias, config=GemvConfig(32, 2, 16), interpret=True, extra_cols=8)
    assert out.shape == (2, n + 8)
    got = np.asarray(out[:, :n].sum(axis=0))
    np.testing.assert_allclose(got, want, atol=2e-2 * np.abs(want).max(), rtol=2e-2)


@pytest.mark.parametrize("n_parts,bias", [(0, False), (3, False), (3, True)])
def test_finish_is_residual_then_rmsnorm(n_parts, bias):
    d = 96
    ks = jax.random.split(jax.random.key(1), 4)
    x = jax.random.normal(ks[0], (d,), jnp.bfloat16)
    parts = jax.random.normal(ks[1], (n_parts, d), jnp.float32) if n_parts else None
    b = jax.random.normal(ks[2], (d,), jnp.bfloat16) if bias else None
    scale = jax.random.normal(ks[3], (d,), jnp.bfloat16)
    got_x, ss = df.finish(x, parts, b, interpret=True)
    want_x = x if parts is None else x + (parts.sum(axis=0).astype(jnp.bfloat16) + (b if bias else 0))
    np.testing.assert_array_equal(np.asarray(got_x, np.float32), np.asarray(want_x, np.float32))
    want_n = np.asarray(rms_norm(want_x, scale, 1e-6, jnp.bfloat16), np.float32)
    np.testing.assert_allclose(np.asarray(df.norm_from(got_x, ss, scale, 1e-6), np.float32), want_n, atol=1e-2, rtol=1e-2)
    w = jax.random.normal(ks[0], (d, 64), jnp.bfloat16)  # the matvec's norm prologue applies the same RMSNorm
    got = df.matvec(w, "norm", x=got_x, ss=ss, scale=scale, eps=1e-6, config=GemvConfig(32, 3, 32), interpret=True)
    # against norm_from's values (checked above to a bf16 step of XLA's): one bf16 step of a normalised entry
    # times |w| ~ 2 would already be 0.06; XLA on the CPU may also skip the bf16 rounding (excess precision)
    mine = np.asarray(df.norm_from(got_x, ss, scale, 1e-6), np.float32)
    np.testing.assert_allclose(np.asarray(got.sum(axis=0)), mine @ np.asarray(w, np.float32), atol=0.05, rtol=1e-2)


@pytest.mark.parametrize("splits,block_s,index", [(1, 16, 37), (4, 16, 37), (4, 8, 3), (2, 32, 0)])
def test_split_attention_merges_to_the_reference(splits, block_s, index):
    h, hkv, dh, s_len = 6, 2, 32, 40
    g = h // hkv
    ks = jax.random.split(jax.random.key(index), 4)
    rows = h + 2 * hkv
    parts = jax.random.normal(ks[0], (2, (rows + 16 - g) * dh), jnp.float32)
    kc, vc = (jax.random.normal(k, (1, hkv, s_len, dh), jnp.float32) for k in ks[1:3])
    mask = jnp.arange(s_len) != 5
    pos = jnp.full((1, 1), index + 3, jnp.int32)
    from cudaperf_jax.models.rope import apply_rope, cos_sin
    cos, sin = cos_sin(pos, np.linspace(1, 0.01, dh // 2).astype(np.float32), 1.0)
    (acc, ml), kc2, vc2 = df.attend(parts, kc, vc, mask, index, cos[0, 0], sin[0, 0], num_heads=h, dtype=jnp.float32,
                                    config=df.AttnConfig(block_s, splits), interpret=True)
    y = parts.sum(axis=0)[: rows * dh].reshape(1, 1, rows, dh)
    q = apply_rope(y[:, :, :h], cos, sin)
    kn = apply_rope(y[:, :, h:h + hkv], cos, sin)
    want, wk, wv = tiny.attention_reference(q, kn, y[:, :, h + hkv:], kc, vc, mask[None], index)
    np.testing.assert_allclose(np.asarray(df.merge_heads(acc, ml, h, jnp.float32)), np.asarray(want[0, 0]), atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(kc2), np.asarray(wk), atol=1e-6)
    np.testing.assert_allclose(np.asarray(vc2), np.asarray(wv), atol=1e-6)
    o = jax.random.normal(ks[3], (h * dh, 64), jnp.float32)  # the o projection's prologue merges the same way
    got = df.matvec(o, "attn", attn=(acc, ml), group=g, config=GemvConfig(32, 2, 16), interpret=True).sum(axis=0)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want[0, 0] @ o), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("kind,over", [("llama", {}), ("qwen2", {}), ("qwen3", {"num_key_value_heads": 1})])
def test_decode_steps_match_xla(kind, over):
    model = _model(kind, **over)
    toks = jnp.asarray([[5, 17, 3, 60, 11]], jnp.int32)
    want = tiny.stepwise_logits(model, toks, 8)
    kc = PALLAS.resolve(1)
    assert step.applies(model.cfg, kc, 1, 1) and not step.applies(model.cfg, kc, 2, 1)
    assert not step.applies(model.cfg, kc, 1, 2)
    got = tiny.stepwise_logits(model, toks, 8, kernels=PALLAS)
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=1e-4)


def test_sampler_gives_the_same_tokens():
    """(Before the config was a static argument, this test compared the XLA path with itself: the second Sampler
    reused the first one's compiled program. In bf16 the fused path's roundings flip a near-tie at the 6th token.)"""
    from cudaperf_jax.generation.sampler import Sampler, SamplingParams
    model = _model("qwen2")
    params = SamplingParams(max_new_tokens=6, temperature=0.0, stop_token_ids=())
    prompts = [[7, 8, 9, 10, 11]]
    want = Sampler(model, prompt_bucket=8, kernels=DecodeKernels(path="xla")).generate(prompts, params)
    got = Sampler(model, prompt_bucket=8, kernels=PALLAS).generate(prompts, params)
    np.testing.assert_array_equal(got.tokens, want.tokens)
    np.testing.assert_allclose(got.logprobs, want.logprobs, atol=1e-3)


def test_unsupported_shapes_and_auto_mode_stay_on_xla():
    cfg = ModelConfig.from_hf(tiny.hf_config("llama").to_dict())  # head_dim 16: the score product needs >= 32
    assert not step.applies(cfg, PALLAS.resolve(1), 1, 1)
    auto = DecodeKernels().resolve(1)   # auto: only on one GPU
    assert auto.path == ("xla" if jax.default_backend() != "gpu" else auto.path)
    if jax.default_backend() != "gpu":
        assert not step.applies(ModelConfig.from_hf(tiny.hf_config("llama", head_dim=32).to_dict()), auto, 1, 1)
    with pytest.raises(ValueError, match="DecodeKernels.path"):
        DecodeKernels(path="sometimes")


def test_a_tiling_table_that_does_not_fit_is_a_clear_error(tmp_path):
    cfg = ModelConfig.from_hf(tiny.hf_config("llama", head_dim=32).to_dict())
    bad = _table(tmp_path, [{"kernel": "fused_swiglu", "K": 96, "N": 64,
                             "config": {"block_n": 48, "split_k": 1, "block_k": 32}}])
    kc = DecodeKernels(path="pallas", interpret=True, tilings=bad).resolve(1)
    with pytest.raises(ValueError, match="does not divide fused_swiglu K=96 N=64"):
        step.applies(cfg, kc, 1, 1)
    with pytest.raises(ValueError, match="is not a file"):
        DecodeKernels(tilings=str(tmp_path / "missing.json"))


@pytest.mark.parametrize("kind,over", [("llama", {"attention_bias": True, "mlp_bias": True}), ("qwen2", {})])
def test_residual_epilogue_without_split_k_matches_xla(tmp_path, kind, over):
    """Tilings with split_k 1 for o and down put the residual add into their epilogue (no finish kernel)."""
    model = _model(kind, **over)
    cfg = model.cfg
    tiles = {"block_n": 16, "split_k": 1, "block_k": 32}
    table = _table(tmp_path, [
        {"kernel": "fused_attn", "K": cfg.num_heads * cfg.head_dim, "N": cfg.hidden_size, "config": tiles},
        {"kernel": "fused_swiglu", "K": cfg.intermediate_size, "N": cfg.hidden_size, "config": tiles}])
    toks = jnp.asarray([[5, 17, 3, 60, 11]], jnp.int32)
    want = tiny.stepwise_logits(model, toks, 8)
    assert df._config(cfg.intermediate_size, cfg.hidden_size, "swiglu", 0, tilings(table)).split_k == 1
    got = tiny.stepwise_logits(model, toks, 8, kernels=DecodeKernels(path="pallas", interpret=True, tilings=table))
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=1e-4)
    # the epilogue's stream and sums of squares are finish's
    ks = jax.random.split(jax.random.key(3), 3)
    w = jax.random.normal(ks[0], (64, 48), jnp.bfloat16)
    x = jax.random.normal(ks[1], (80,), jnp.bfloat16)
    xr = jax.random.normal(ks[2], (48,), jnp.bfloat16)
    bias = xr[::-1]
    got_x, got_ss = df.matvec(w, "plain", x=x, residual=(xr, bias), config=GemvConfig(16, 1, 32), interpret=True)
    want_x, want_ss = df.finish(xr, df.matvec(w, "plain", x=x, config=GemvConfig(16, 1, 32), interpret=True), bias,
                                interpret=True)
    np.testing.assert_array_equal(np.asarray(got_x, np.float32), np.asarray(want_x, np.float32))
    np.testing.assert_allclose(float(got_ss[:3].sum()), float(want_ss[:df.finish_count(48)].sum()), rtol=1e-5)
    with pytest.raises(ValueError, match="split_k 1"):
        df.matvec(w, "plain", x=x, residual=(xr, bias), config=GemvConfig(16, 2, 32), interpret=True)


@pytest.mark.parametrize("kind,over", [("llama", {"mlp_bias": True}), ("qwen3", {})])
def test_swiglu_epilogue_in_gate_up_matches_xla(tmp_path, kind, over):
    """A gate_up tiling without split-K applies SwiGLU in its epilogue; down then reads a plain vector."""
    model = _model(kind, **over)
    cfg = model.cfg
    table = _table(tmp_path, [{"kernel": "fused_norm", "K": cfg.hidden_size, "N": 2 * cfg.intermediate_size,
                               "config": {"block_n": 32, "split_k": 1, "block_k": 16}}])
    toks = jnp.asarray([[5, 17, 3, 60, 11]], jnp.int32)
    want = tiny.stepwise_logits(model, toks, 8)
    assert df.swiglu_in_gate_up(cfg, tilings(table))
    assert ("plain", cfg.intermediate_size, cfg.hidden_size) in df.layer_keys(cfg, tilings(table))
    got = tiny.stepwise_logits(model, toks, 8, kernels=DecodeKernels(path="pallas", interpret=True, tilings=table))
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=1e-4)
    # the epilogue's activation is what the swiglu prologue computes from the same projection's partials
    ks = jax.random.split(jax.random.key(4), 3)
    w = jax.random.normal(ks[0], (64, 192), jnp.bfloat16)
    x = jax.random.normal(ks[1], (64,), jnp.bfloat16)
    bias = jax.random.normal(ks[2], (192,), jnp.bfloat16)
    act = df.matvec(w, "plain", x=x, bias=bias, swiglu_out=True, config=GemvConfig(32, 1, 16), interpret=True)
    parts = df.matvec(w, "plain", x=x, config=GemvConfig(32, 1, 16), interpret=True)
    eye = jnp.eye(96, dtype=jnp.bfloat16)  # the swiglu prologue's input, read back through an identity matvec
    want_act = df.matvec(eye, "swiglu", parts=parts, bias=bias, config=GemvConfig(32, 1, 16), interpret=True)[0]
    assert act.shape == (96,) and act.dtype == jnp.bfloat16
    np.testing.assert_array_equal(np.asarray(act, np.float32), np.asarray(want_act, np.float32))
    with pytest.raises(ValueError, match="swiglu epilogue"):
        df.matvec(w, "plain", x=x, swiglu_out=True, config=GemvConfig(64, 1, 16), interpret=True)  # 64 does not divide 96


def test_cuda_matvecs_stay_off_in_the_interpreter():
    """path cuda only takes effect on a GPU: with interpret the Pallas matvecs run."""
    model = _model("qwen2")
    toks = jnp.asarray([[5, 17, 3]], jnp.int32)
    want = tiny.stepwise_logits(model, toks, 8, kernels=PALLAS)
    assert DecodeKernels(path="cuda", interpret=True).resolve(1).path == "pallas"
    got = tiny.stepwise_logits(model, toks, 8, kernels=DecodeKernels(path="cuda", interpret=True))
    np.testing.assert_array_equal(got, want)
