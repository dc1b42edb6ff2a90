"""The training forward's fused attention (models.attention) against the decoder's XLA attention: the Pallas flash
kernel in Pallas' interpreter on the CPU (float32, tight tolerances), values and gradients, packed SFT rows (segment
ids) and RL's left-padded rows (kv_mask), grouped heads, lengths that are not a multiple of the blocks; the config's
validation and resolution. On a GPU (marked gpu) the compiled pallas and cudnn kernels in bfloat16."""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from cudaperf_jax.experiment.config import ConfigFieldError
from cudaperf_jax.models.attention import (
    XLA_ATTENTION,
    AttentionConfig,
    flash,
    segments_of,
)
from cudaperf_jax.models.config import ModelConfig
from cudaperf_jax.models.decoder import Decoder
from cudaperf_jax.models.lora import ADAPTERS, LoRAConfig, add_adapters

PALLAS = AttentionConfig(implementation="pallas", interpret=True, block_q=16, block_k=16, block_bwd=16)
CFG = ModelConfig(model_type="qwen2", vocab_size=64, hidden_size=32, intermediate_size=48, num_layers=2,
                  num_heads=4, num_kv_heads=2, head_dim=8, qkv_bias=True, tie_word_embeddings=True)


def reference(q, k, v, segments):
    """Plain-JAX causal same-segment attention, float32: q [B, T, H, Dh], k/v [B, T, Hkv, Dh] -> [B, T, H, Dh]."""
    g = q.shape[2] // k.shape[2]
    k, v = jnp.repeat(k, g, axis=2), jnp.repeat(v, g, axis=2)
    s = jnp.einsum("bthd,bshd->bhts", q, k) * q.shape[-1] ** -0.5
    t = q.shape[1]
    mask = (jnp.arange(t)[:, None] >= jnp.arange(t)[None, :])[None] & (segments[:, :, None] == segments[:, None, :])
    p = jax.nn.softmax(jnp.where(mask[:, None], s, -jnp.inf), axis=-1)
    return jnp.einsum("bhts,bshd->bthd", p, v)


def packed(b: int, t: int, seed: int = 0):
    """tokens, positions, segment_ids int32[B, T] of packed rows (several examples a row, 0 = padding at the end)."""
    r = np.random.RandomState(seed)
    seg = np.zeros((b, t), np.int32)
    pos = np.zeros((b, t), np.int32)
    for i in range(b):
        at, s = 0, 1
        while at < t - 4:
            n = int(r.randint(3, t // 2))
            n = min(n, t - 3 - at)
            seg[i, at:at + n], pos[i, at:at + n] = s, np.arange(n)
            at, s = at + n, s + 1
    return jnp.asarray(r.randint(0, CFG.vocab_size, (b, t))), jnp.asarray(pos), jnp.asarray(seg)


@jax.jit
def _pallas_value_and_grads(q, k, v, seg, w):
    out = flash(q, k, v, seg, PALLAS)
    val, grads = jax.value_and_grad(lambda *a: (flash(*a, seg, PALLAS) * w).sum(), argnums=(0, 1, 2))(q, k, v)
    return out, val, grads


def test_pallas_kernel_matches_the_reference_values_and_gradients():
    r = np.random.RandomState(0)
    b, t, h, hkv, dh = 2, 37, 4, 2, 8          # t not a multiple of the blocks: padded inside, cut after
    q = jnp.asarray(r.randn(b, t, h, dh), jnp.float32)
    k, v = (jnp.asarray(r.randn(b, t, hkv, dh), jnp.float32) for _ in range(2))
    seg = jnp.asarray(np.r_[[1] * 12 + [2] * 20 + [0] * 5, [0] * 9 + [1] * 28].reshape(2, t), jnp.int32)
    w = jnp.asarray(r.randn(b, t, h, dh), jnp.float32)
    out, got, grads = _pallas_value_and_grads(q, k, v, seg, w)
    want, wgrads = jax.value_and_grad(lambda *a: (reference(*a, seg) * w).sum(), argnums=(0, 1, 2))(q, k, v)
    np.testing.assert_allclose(np.asarray(out), np.asarray(reference(q, k, v, seg)), atol=2e-6, rtol=0)
    assert got == pytest.approx(float(want), abs=1e-4)
    for a, e in zip(grads, wgrads):
        np.testing.assert_allclose(np.asarray(a), np.asarray(e), atol=1e-5, rtol=0)


def test_packed_rows_give_the_xla_logits_and_adapter_gradients():
    cfg = dataclasses.replace(CFG, num_layers=1)   # the kernel's own gradients are checked above
    model = add_adapters(Decoder(cfg, rngs=nnx.Rngs(0)), LoRAConfig(rank=2, alpha=4.0, targets="q,k,v,o"),
                         nnx.Rngs(1))
    graphdef, adapters, rest = nnx.split(model, ADAPTERS, ...)
    adapters = jax.tree.map(lambda x: x + 0.05, adapters)      # B nonzero: the adapters act on the output
    toks, pos, seg = packed(2, 24)
    real = np.asarray(seg) > 0

    def loss(p, attention, remat):
        logits = nnx.merge(graphdef, p, rest)(toks, pos, segment_ids=seg, remat=remat, attention=attention)
        return (jax.nn.log_softmax(logits)[..., 3] * real).sum(), logits

    grad = jax.jit(jax.value_and_grad(loss, has_aux=True), static_argnums=(1, 2))
    (lx, logits_x), gx = grad(adapters, XLA_ATTENTION, False)
    (lp, logits_p), gp = grad(adapters, PALLAS, True)
    np.testing.assert_allclose(np.asarray(logits_p), np.asarray(logits_x), atol=2e-5, rtol=0)
    assert float(lp) == pytest.approx(float(lx), abs=1e-4)
    for (path, a), (_, e) in zip(nnx.to_flat_state(gp), nnx.to_flat_state(gx)):
        np.testing.assert_allclose(np.asarray(a[...]), np.asarray(e[...]), atol=1e-5, rtol=0, err_msg=str(path))


def test_left_padded_rows_give_the_xla_logits_on_real_tokens():
    model = Decoder(CFG, rngs=nnx.Rngs(2))
    r = np.random.RandomState(3)
    b, t = 3, 20
    lengths = np.array([20, 13, 6])
    kv_mask = np.arange(t)[None, :] >= (t - lengths)[:, None]               # left padding, as RL's batches
    pos = np.maximum(np.cumsum(kv_mask, 1) - 1, 0).astype(np.int32)
    toks = jnp.asarray(r.randint(0, CFG.vocab_size, (b, t)))
    kw = {"kv_mask": jnp.asarray(kv_mask)}
    forward = nnx.jit(lambda m, attention: m(toks, jnp.asarray(pos), attention=attention, **kw), static_argnums=1)
    want, got = np.asarray(forward(model, XLA_ATTENTION)), np.asarray(forward(model, PALLAS))
    np.testing.assert_allclose(got[kv_mask], want[kv_mask], atol=2e-5, rtol=0)
    seg = np.asarray(segments_of(b, t, jnp.asarray(kv_mask), None))
    assert (seg == kv_mask).all()
    both = np.asarray(segments_of(b, t, jnp.asarray(kv_mask), jnp.asarray(kv_mask * 2)))
    assert set(np.unique(both[kv_mask])) == {3} and (both[~kv_mask] == 0).all()


def test_config_is_validated_and_resolves_to_xla_on_the_cpu():
    with pytest.raises(ConfigFieldError, match="implementation"):
        AttentionConfig(implementation="flash2")
    with pytest.raises(ConfigFieldError, match="block_q"):
        AttentionConfig(block_q=48)
    assert jax.default_backend() == "cpu"
    assert AttentionConfig().resolve().implementation == "xla"
    assert AttentionConfig(interpret=True).resolve().implementation == "pallas"
    assert AttentionConfig(implementation="cudnn").resolve().implementation == "cudnn"
    assert not XLA_ATTENTION.fused and PALLAS.fused
    with pytest.raises(ValueError, match="bfloat16"):
        flash(*(jnp.zeros((1, 8, 2, 8)) for _ in range(3)), jnp.zeros((1, 8), jnp.int32),
              AttentionConfig(implementation="cudnn"))


def test_a_pallas_config_on_a_mesh_is_refused_in_one_sentence():
    from cudaperf_jax.experiment.config import from_configdict
    from cudaperf_jax.sft.config import SFTConfig
    with pytest.raises(ConfigFieldError, match="one device"):
        from_configdict(SFTConfig, {"attention": {"implementation": "pallas"}, "mesh": {"fsdp": 2}})


@pytest.mark.gpu
@pytest.mark.parametrize("implementation", ["pallas", "cudnn"])
def test_fused_kernels_on_the_gpu_match_the_reference_in_bfloat16(implementation):
    r = np.random.RandomState(0)
    b, t, h, hkv, dh = 2, 1024, 12, 2, 128                                  # Qwen2.5-1.5B's heads
    q = jnp.asarray(r.randn(b, t, h, dh), jnp.bfloat16)
    k, v = (jnp.asarray(r.randn(b, t, hkv, dh), jnp.bfloat16) for _ in range(2))
    seg = jnp.asarray(np.r_[[1] * 400 + [2] * 500 + [0] * 124, [0] * 100 + [1] * 924].reshape(2, t), jnp.int32)
    w = jnp.asarray(r.randn(b, t, h, dh), jnp.float32)
    cfg = AttentionConfig(implementation=implementation)
    got, grads = jax.jit(jax.value_and_grad(lambda *a: (flash(*a, seg, cfg).astype(jnp.float32) * w).sum(),
                                            argnums=(0, 1, 2)))(q, k, v)
    f32 = [x.astype(jnp.float32) for x in (q, k, v)]
    want, wgrads = jax.value_and_grad(lambda *a: (reference(*a, seg) * w).sum(), argnums=(0, 1, 2))(*f32)
    assert float(got) == pytest.approx(float(want), rel=2e-2, abs=2.0)
    for a, e in zip(grads, wgrads):
        a, e = np.asarray(a, np.float32), np.asarray(e)
        assert np.abs(a - e).max() <= 0.05 * np.abs(e).max() + 1e-3


@pytest.mark.gpu
@pytest.mark.parametrize("implementation", ["pallas", "cudnn"])
def test_sft_loss_and_adapter_gradients_on_the_gpu_match_xla(implementation):
    """Qwen2.5-1.5B's attention shape (12/2 heads of 128) in a 2-layer bf16 decoder with q,k,v,o adapters, packed rows
    of 1,024 tokens, remat: SFT's loss and its adapter gradients as with XLA's attention (bf16 rounding apart)."""
    from cudaperf_jax.sft.step import token_nll_loss
    cfg = ModelConfig(model_type="qwen2", vocab_size=512, hidden_size=1536, intermediate_size=1024, num_layers=2,
                      num_heads=12, num_kv_heads=2, head_dim=128, qkv_bias=True, tie_word_embeddings=True)
    model = add_adapters(Decoder(cfg, rngs=nnx.Rngs(0), dtype=jnp.bfloat16, param_dtype=jnp.bfloat16),
                         LoRAConfig(rank=16, alpha=32.0, targets="q,k,v,o"), nnx.Rngs(1))
    graphdef, adapters, rest = nnx.split(model, ADAPTERS, ...)
    adapters = jax.tree.map(lambda x: x + 0.01, adapters)
    toks, pos, seg = packed(2, 1024, seed=5)
    toks = toks % cfg.vocab_size
    batch = {"tokens": toks, "positions": pos, "segment_ids": seg, "targets": jnp.roll(toks, -1, axis=1),
             "weights": (seg > 0).astype(jnp.float32)}

    def grads(attention):
        loss = token_nll_loss(remat=True, attention=attention)
        return jax.jit(jax.value_and_grad(lambda p: loss(nnx.merge(graphdef, p, rest), batch)[0]))(adapters)

    want, g_want = grads(XLA_ATTENTION)
    got, g_got = grads(AttentionConfig(implementation=implementation))
    assert float(got) == pytest.approx(float(want), rel=1e-2)
    a = np.concatenate([np.ravel(x) for x in jax.tree.leaves(g_got)])
    e = np.concatenate([np.ravel(x) for x in jax.tree.leaves(g_want)])
    assert np.dot(a, e) / (np.linalg.norm(a) * np.linalg.norm(e)) > 0.99
    assert np.linalg.norm(a - e) <= 0.1 * np.linalg.norm(e)
