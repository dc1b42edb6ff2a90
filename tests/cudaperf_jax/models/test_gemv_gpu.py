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


def test_decode_step_with_kernel_matches_without(monkeypatch):
    cfg = ModelConfig(model_type="qwen2", vocab_size=4096, hidden_size=512, intermediate_size=1536, num_layers=4,
                      num_heads=8, num_kv_heads=2, head_dim=64, qkv_bias=True, tie_word_embeddings=True)
    model = Decoder(cfg, rngs=nnx.Rngs(0), dtype=jnp.float32, param_dtype=jnp.float32)
    toks = jnp.asarray([[5, 17, 3, 60, 11, 900, 4000, 2]], jnp.int32)

    for var in ("CUDAPERF_DECODE_GEMV", "CUDAPERF_DECODE_FUSED"):
        monkeypatch.setenv(var, "off")
    with jax.default_matmul_precision("highest"):  # XLA's float32 dots default to TF32 on the GPU
        want = tiny.stepwise_logits(model, toks, 16)
    monkeypatch.setenv("CUDAPERF_DECODE_GEMV", "auto")
    got = tiny.stepwise_logits(model, toks, 16)
    assert gemv.use_gemv(jnp.zeros((1, 1, 8)))
    np.testing.assert_allclose(got, want, atol=2e-3, rtol=2e-3)
