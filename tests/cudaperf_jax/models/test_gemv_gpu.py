"""The batch-1 Pallas kernel compiled by Triton on a real GPU: values against XLA's dot for the shapes of the
default policy and of Qwen2.5-1.5B (default and tuned tilings), and a decode step with it against without."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from cudaperf_jax.models import gemv
from cudaperf_jax.models.config import ModelConfig
from cudaperf_jax.models.decoder import Decoder
from tests.cudaperf_jax.models import tiny

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(jax.default_backend() != "gpu", reason="needs a GPU backend for JAX")]

SHAPES = [(576, 960, False), (576, 576, False), (576, 3072, False), (1536, 576, False), (576, 49152, True),
          (1536, 2048, False), (1536, 1536, False), (1536, 17920, False), (8960, 1536, False), (1536, 151936, True)]


@pytest.mark.parametrize("k,n,transposed", SHAPES)
def test_kernel_matches_xla_on_gpu(k, n, transposed):
    x = jax.random.normal(jax.random.key(0), (k,), jnp.bfloat16)
    w = jax.random.normal(jax.random.key(1), (n, k) if transposed else (k, n), jnp.bfloat16)
    eq = "k,nk->n" if transposed else "k,kn->n"
    want = np.asarray(jnp.einsum(eq, x.astype(jnp.float32), w.astype(jnp.float32),
                                 precision=jax.lax.Precision.HIGHEST))
    for cfg in {gemv.default_config(k, n, transposed), gemv.config_for(k, n, transposed)}:
        got = np.asarray(jax.jit(lambda x, w, cfg=cfg: gemv.gemv_raw(x, w, transposed=transposed, config=cfg))(x, w))
        np.testing.assert_allclose(got, want, atol=1e-2 * np.sqrt(k), rtol=1e-2, err_msg=str(cfg))


@pytest.mark.parametrize("k,n,transposed", [(576, 3072, False), (1536, 2048, False), (1536, 17920, False)])
def test_rmsnorm_prologue_on_gpu(k, n, transposed):
    x = jax.random.normal(jax.random.key(0), (k,), jnp.bfloat16) * 3
    scale = (1 + 0.1 * jax.random.normal(jax.random.key(2), (k,))).astype(jnp.bfloat16)
    w = jax.random.normal(jax.random.key(1), (k, n), jnp.bfloat16)
    got = jax.jit(lambda x, s, w: gemv.gemv_raw(x, w, norm=(s, 1e-6)))(x, scale, w)
    want = gemv._norm_then_dot(x.astype(jnp.float32), scale.astype(jnp.float32), w.astype(jnp.float32), False, 1e-6)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=3e-2 * np.sqrt(k), rtol=3e-2)


@pytest.mark.parametrize("fused", [(), ("CUDAPERF_DECODE_ATTENTION", "CUDAPERF_DECODE_NORM")])
def test_decode_step_with_kernel_matches_without(monkeypatch, fused):
    cfg = ModelConfig(model_type="qwen2", vocab_size=4096, hidden_size=512, intermediate_size=1536, num_layers=4,
                      num_heads=8, num_kv_heads=2, head_dim=64, qkv_bias=True, tie_word_embeddings=True)
    model = Decoder(cfg, rngs=nnx.Rngs(0), dtype=jnp.float32, param_dtype=jnp.float32)
    toks = jnp.asarray([[5, 17, 3, 60, 11, 900, 4000, 2]], jnp.int32)

    for var in ("CUDAPERF_DECODE_GEMV", "CUDAPERF_DECODE_ATTENTION", "CUDAPERF_DECODE_NORM"):
        monkeypatch.setenv(var, "off")
    want = tiny.stepwise_logits(model, toks, 16)
    monkeypatch.setenv("CUDAPERF_DECODE_GEMV", "auto")
    for var in fused:
        monkeypatch.setenv(var, "on")
    got = tiny.stepwise_logits(model, toks, 16)
    assert gemv.use_gemv(jnp.zeros((1, 1, 8)))
    np.testing.assert_allclose(got, want, atol=2e-3, rtol=2e-3)


@pytest.mark.parametrize("h,hkv,dh,s,idx,pad", [(12, 2, 128, 384, 200, 17), (9, 3, 64, 384, 383, 0)])
def test_fused_decode_attention_matches_xla_on_gpu(h, hkv, dh, s, idx, pad):
    from cudaperf_jax.models import decode_attention as da
    ks = jax.random.split(jax.random.key(idx), 5)
    q = jax.random.normal(ks[0], (1, 1, h, dh), jnp.bfloat16)
    kn, vn = (jax.random.normal(k, (1, 1, hkv, dh), jnp.bfloat16) for k in ks[1:3])
    kc, vc = (jax.random.normal(k, (1, hkv, s, dh), jnp.bfloat16) for k in ks[3:5])
    mask = (jnp.arange(s) >= pad)[None]
    got = jax.jit(lambda *a: da.attend(*a, interpret=False))(q, kn, vn, kc, vc, mask, jnp.int32(idx))
    f32 = [a.astype(jnp.float32) for a in (q, kn, vn, kc, vc)]
    want, kc2, vc2 = tiny.attention_reference(*f32, mask, idx)
    np.testing.assert_allclose(np.asarray(got[0], np.float32), np.asarray(want), atol=3e-2, rtol=3e-2)
    np.testing.assert_array_equal(np.asarray(got[1], np.float32), np.asarray(kc2))  # bf16 -> f32 is exact
    np.testing.assert_array_equal(np.asarray(got[2], np.float32), np.asarray(vc2))
