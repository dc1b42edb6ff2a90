"""The fused one-token attention kernel (Pallas) in Pallas' interpreter on the CPU: against a plain
reference, and the decoder/sampler with it against without (left padding, GQA, Qwen3 q/k norms)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from cudaperf_jax.models import decode_attention as da
from cudaperf_jax.models.config import ModelConfig
from cudaperf_jax.models.decoder import Decoder
from tests.cudaperf_jax.models import tiny


@pytest.mark.parametrize("b,h,hkv,dh,s,idx,pad", [(1, 12, 2, 128, 70, 40, 5), (1, 9, 3, 64, 384, 200, 0),
                                                  (1, 4, 4, 16, 16, 0, 0), (2, 8, 2, 32, 100, 99, 10),
                                                  (1, 6, 2, 32, 64, 63, 63)])
def test_kernel_matches_reference(b, h, hkv, dh, s, idx, pad):
    ks = jax.random.split(jax.random.key(s + idx), 5)
    q = jax.random.normal(ks[0], (b, 1, h, dh))
    kn, vn = jax.random.normal(ks[1], (b, 1, hkv, dh)), jax.random.normal(ks[2], (b, 1, hkv, dh))
    kc, vc = jax.random.normal(ks[3], (b, hkv, s, dh)), jax.random.normal(ks[4], (b, hkv, s, dh))
    mask = jnp.broadcast_to(jnp.arange(s) >= pad, (b, s))
    got = da.attend(q, kn, vn, kc, vc, mask, jnp.int32(idx), interpret=True)
    for g, w in zip(got, tiny.attention_reference(q, kn, vn, kc, vc, mask, idx)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), atol=2e-5, rtol=1e-5)


def test_modes_and_applicability(monkeypatch):
    monkeypatch.delenv("CUDAPERF_DECODE_ATTENTION", raising=False)
    assert da.mode() == "off" and not da.applies(1, 1, 64)
    monkeypatch.setenv("CUDAPERF_DECODE_ATTENTION", "interpret")
    assert da.applies(1, 1, 64) and not da.applies(2, 1, 64) and not da.applies(1, 4, 64) and not da.applies(1, 1, 96)
    monkeypatch.setenv("CUDAPERF_DECODE_ATTENTION", "yes")
    with pytest.raises(ValueError, match="off, on or interpret"):
        da.mode()


@pytest.mark.parametrize("kind", ["qwen2", "qwen3"])
def test_sampler_tokens_and_logprobs_same_with_fused_kernels(monkeypatch, kind):
    from cudaperf_jax.generation.sampler import Sampler, SamplingParams
    cfg = ModelConfig(model_type=kind, vocab_size=96, hidden_size=64, intermediate_size=96, num_layers=2,
                      num_heads=6, num_kv_heads=2, head_dim=16, qkv_bias=kind == "qwen2", qk_norm=kind == "qwen3")
    model = Decoder(cfg, rngs=nnx.Rngs(1))
    params = SamplingParams(max_new_tokens=7, temperature=1.0, top_p=0.9, top_k=20, stop_token_ids=())

    def run():
        jax.clear_caches()
        out = Sampler(model, prompt_bucket=8).generate([[5, 9, 2, 7, 33]], params, seed=3)  # 3 left pads
        return out.tokens, out.logprobs

    monkeypatch.setenv("CUDAPERF_DECODE_ATTENTION", "off")
    monkeypatch.setenv("CUDAPERF_DECODE_GEMV", "off")
    want_t, want_lp = run()
    monkeypatch.setenv("CUDAPERF_DECODE_ATTENTION", "interpret")
    monkeypatch.setenv("CUDAPERF_DECODE_GEMV", "interpret")
    got_t, got_lp = run()
    np.testing.assert_array_equal(got_t, want_t)
    np.testing.assert_allclose(got_lp, want_lp, atol=1e-4)
