"""The CUDA FFI matvec (cuda_matvec.py) on a real GPU against XLA: every decode shape, with and without
programmatic dependent launch, and chains in which each launch reads the previous one's partials."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cudaperf_jax.models import cuda_matvec as cm

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(jax.default_backend() != "gpu", reason="needs a GPU backend for JAX")]

SHAPES = [(1536, 2048, 12), (1536, 1536, 6), (1536, 17920, 4), (8960, 1536, 35), (8960, 1536, 1), (576, 960, 2),
          (576, 576, 1), (1536, 192, 3)]


def _reference(xp, w):
    x = xp.sum(axis=0)[: w.shape[0]].astype(jnp.bfloat16).astype(jnp.float32)
    return jnp.dot(x, w.astype(jnp.float32), precision="highest")


@pytest.mark.parametrize("pdl", [False, True])
@pytest.mark.parametrize("k,n,split", SHAPES)
def test_matches_xla(k, n, split, pdl):
    ks = jax.random.split(jax.random.key(k + n + split), 2)
    xp = jax.random.normal(ks[0], (3, k + 64), jnp.float32)
    w = jax.random.normal(ks[1], (k, n), jnp.bfloat16)
    got = jax.jit(lambda a, b: cm.matvec(a, b, split_k=split, pdl=pdl))(xp, w)
    assert got.shape == (split, n) and got.dtype == jnp.float32
    want = _reference(xp, w)
    np.testing.assert_allclose(np.asarray(got.sum(axis=0)), np.asarray(want), rtol=1e-4,
                               atol=1e-4 * float(jnp.abs(want).max()))


@pytest.mark.parametrize("pdl", [False, True])
def test_a_chain_of_launches_reads_each_producers_finished_partials(pdl):
    """Each launch consumes the previous one's partials directly: with PDL it starts before its producer has
    finished and must wait for it before reading (a missing wait gives stale or mixed inputs)."""
    d, steps = 1536, 12
    # separate arrays: slicing one stacked array would make each weight the output of a copy kernel just
    # before the launch, which the PDL prefetch may not read (cuda_matvec.matvec's contract)
    ws = tuple(jax.random.normal(k, (d, d), jnp.bfloat16) * (1.0 / np.sqrt(d))
               for k in jax.random.split(jax.random.key(0), steps))
    x0 = jax.random.normal(jax.random.key(1), (1, d), jnp.float32)

    @jax.jit
    def chain(x, ws):
        for i in range(steps):
            x = cm.matvec(x, ws[i], split_k=6 if i % 2 else 4, pdl=pdl)
        return x.sum(axis=0)

    @jax.jit
    def reference(x, ws):
        for i in range(steps):
            x = _reference(x, ws[i])[None, :]
        return x[0]

    got, want = chain(x0, ws), reference(x0, ws)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=3e-2, atol=3e-2 * float(jnp.abs(want).max()))


@pytest.mark.parametrize("k,n,split", [(1536, 2048, 6), (1536, 17920, 4), (576, 960, 9)])
def test_the_norm_prologue_is_decode_fuseds(k, n, split):
    from cudaperf_jax.models import decode_fused as df
    ks = jax.random.split(jax.random.key(k + n), 3)
    x = jax.random.normal(ks[0], (k,), jnp.bfloat16)
    scale = jax.random.normal(ks[1], (k,), jnp.bfloat16)
    w = jax.random.normal(ks[2], (k, n), jnp.bfloat16)
    x, ss = jax.jit(lambda x: df.finish(x, None, None))(x)
    got = jax.jit(lambda *a: cm.matvec_norm(*a, n_chunks=df.finish_count(k), eps=1e-6, split_k=split, pdl=True,
                                            out_cols=n + 64))(x, ss, scale, w)
    assert got.shape == (split, n + 64)
    want = df.norm_from(x, ss, scale, 1e-6).astype(jnp.float32) @ w.astype(jnp.float32)
    np.testing.assert_allclose(np.asarray(got[:, :n].sum(axis=0)), np.asarray(want), rtol=2e-3,
                               atol=2e-3 * float(jnp.abs(want).max()))


@pytest.mark.parametrize("bias", [False, True])
def test_the_swiglu_prologue_is_decode_fuseds(bias):
    from cudaperf_jax.models import decode_fused as df
    from cudaperf_jax.models.gemv import GemvConfig
    k, n = 8960, 1536
    ks = jax.random.split(jax.random.key(7), 3)
    parts = jax.random.normal(ks[0], (4, 2 * k), jnp.float32)
    b = jax.random.normal(ks[1], (2 * k,), jnp.bfloat16) if bias else None
    w = jax.random.normal(ks[2], (k, n), jnp.bfloat16)
    got = jax.jit(lambda p, w: cm.matvec_swiglu(p, b, w, split_k=56, pdl=True))(parts, w).sum(axis=0)
    want = jax.jit(lambda p, w: df.matvec(w, "swiglu", parts=p, bias=b, config=GemvConfig(64, 14, 128)))(parts, w).sum(axis=0)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-3, atol=2e-3 * float(jnp.abs(want).max()))


def test_the_fused_decoder_with_cuda_matvecs_agrees_with_the_pallas_one(monkeypatch):
    """CUDAPERF_DECODE_CUDA=on: qkv, o, gate_up and down of the fused bf16 decode step run the CUDA kernel."""
    from tests.cudaperf_jax.models import tiny
    from tests.cudaperf_jax.models.test_decode_fused_gpu import _model
    model = _model("qwen2.5-1.5b", jnp.bfloat16)
    toks = jnp.asarray([[5, 17, 3, 60, 11, 900, 4000, 2, 8, 9]], jnp.int32)
    monkeypatch.setenv("CUDAPERF_DECODE_FUSED", "on")
    monkeypatch.setenv("CUDAPERF_DECODE_CUDA", "off")
    want = tiny.stepwise_logits(model, toks, 16)
    monkeypatch.setenv("CUDAPERF_DECODE_CUDA", "on")
    got = tiny.stepwise_logits(model, toks, 16)
    # bf16 roundings in another summation order: compare as the bf16 sampler tests do, plus a loose bound
    assert (np.argmax(got, -1) == np.argmax(want, -1)).mean() >= 0.9
    np.testing.assert_allclose(got, want, atol=0.1 * float(np.abs(want).max()))


def test_the_attention_merge_prologue_is_decode_fuseds():
    from cudaperf_jax.models import decode_fused as df
    from cudaperf_jax.models.gemv import GemvConfig
    hkv, splits, gp, dh, g = 2, 4, 16, 128, 6
    ks = jax.random.split(jax.random.key(9), 4)
    acc = jax.random.normal(ks[0], (hkv, splits, gp, dh), jnp.float32)
    m = jax.random.normal(ks[1], (hkv, splits, 1, gp), jnp.float32)
    l = jnp.abs(jax.random.normal(ks[2], (hkv, splits, 1, gp), jnp.float32)) + 0.5
    ml = jnp.concatenate([m, l], axis=2)
    w = jax.random.normal(ks[3], (hkv * g * dh, 1536), jnp.bfloat16)
    got = jax.jit(lambda a, b, w: cm.matvec_attn(a, b, w, group=g, split_k=24, pdl=True))(acc, ml, w).sum(axis=0)
    want = (df.merge_heads(acc, ml, hkv * g).astype(jnp.float32) @ w.astype(jnp.float32))
    pallas = jax.jit(lambda a, b, w: df.matvec(w, "attn", attn=(a, b), group=g, config=GemvConfig(64, 6, 128)))(acc, ml, w)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-3, atol=2e-3 * float(jnp.abs(want).max()))
    np.testing.assert_allclose(np.asarray(got), np.asarray(pallas.sum(axis=0)), rtol=2e-3,
                               atol=2e-3 * float(jnp.abs(want).max()))
