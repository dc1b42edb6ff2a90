"""The batch-1 decode kernel (Pallas), run by Pallas' interpreter on the CPU: values, tilings, gradients,
and the decoder with and without it (the same numbers the GPU path must give)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from cudaperf_jax.models import gemv
from cudaperf_jax.models.config import ModelConfig
from cudaperf_jax.models.decoder import Decoder
from tests.cudaperf_jax.models import tiny


@pytest.mark.parametrize("k,n,transposed", [(96, 160, False), (192, 64, False), (448, 96, True), (64, 48, True),
                                            (1536, 2048, False), (8960, 1536, False)])
def test_gemv_matches_dot(k, n, transposed):
    kx, kw = jax.random.split(jax.random.key(k + n))
    x = jax.random.normal(kx, (k,), jnp.float32)
    w = jax.random.normal(kw, (n, k) if transposed else (k, n), jnp.float32)
    want = np.asarray(w, np.float64) @ np.asarray(x, np.float64) if transposed else \
        np.asarray(x, np.float64) @ np.asarray(w, np.float64)
    got = np.asarray(gemv.gemv_raw(x, w, transposed=transposed, interpret=True))
    np.testing.assert_allclose(got, want, atol=2e-3 * np.sqrt(k), rtol=1e-4)


def test_explicit_config_and_bad_shapes():
    x = jnp.arange(128, dtype=jnp.float32) / 128
    w = jnp.ones((128, 64), jnp.float32)
    cfg = gemv.GemvConfig(block_n=16, split_k=4, block_k=16)
    np.testing.assert_allclose(gemv.gemv_raw(x, w, config=cfg, interpret=True), np.full(64, float(x.sum())), rtol=1e-6)
    with pytest.raises(ValueError, match="x has shape"):
        gemv.gemv_raw(x[:5], w, interpret=True)
    with pytest.raises(ValueError, match="no tiling"):
        gemv.gemv_raw(x, w, config=gemv.GemvConfig(block_n=48, split_k=1, block_k=16), interpret=True)
    assert not gemv.tileable(100, 7)  # odd N: the decoder keeps XLA's dot


@pytest.mark.parametrize("k,n,tr", [(1536, 2048, False), (1536, 1536, False), (1536, 17920, False),
                                    (8960, 1536, False), (1536, 151936, True), (576, 1536, False), (1536, 576, False),
                                    (576, 49152, True), (4096, 28672, False), (896, 4864, False)])
def test_default_configs_tile_real_model_shapes(k, n, tr):
    cfg = gemv.default_config(k, n, tr)
    assert cfg is not None
    assert n % cfg.block_n == 0 and k % cfg.split_k == 0 and (k // cfg.split_k) % cfg.block_k == 0
    assert cfg.block_k >= 16 and cfg.block_n >= 8


def test_gradient_goes_through_plain_matmuls(monkeypatch):
    monkeypatch.setenv("CUDAPERF_DECODE_GEMV", "interpret")
    x = jax.random.normal(jax.random.key(0), (1, 64))
    w = jax.random.normal(jax.random.key(1), (64, 32))
    wt = jax.random.normal(jax.random.key(2), (48, 64))

    def f(x, w, wt):
        return jnp.sum(gemv.matmul(x, w) ** 2) + jnp.sum(gemv.matmul(x, wt, transposed=True) ** 3)

    def g(x, w, wt):
        return jnp.sum((x @ w) ** 2) + jnp.sum((x @ wt.T) ** 3)

    for a, b in zip(jax.grad(f, argnums=(0, 1, 2))(x, w, wt), jax.grad(g, argnums=(0, 1, 2))(x, w, wt)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


def test_use_gemv_modes(monkeypatch):
    one, two = jnp.zeros((1, 1, 8)), jnp.zeros((2, 1, 8))
    monkeypatch.setenv("CUDAPERF_DECODE_GEMV", "auto")
    assert gemv.use_gemv(one) == (jax.default_backend() == "gpu" and jax.device_count() == 1)
    monkeypatch.setenv("CUDAPERF_DECODE_GEMV", "interpret")
    assert gemv.use_gemv(one) and not gemv.use_gemv(two)
    monkeypatch.setenv("CUDAPERF_DECODE_GEMV", "off")
    assert not gemv.use_gemv(one)
    monkeypatch.setenv("CUDAPERF_DECODE_GEMV", "fast")
    with pytest.raises(ValueError, match="auto, off, on or interpret"):
        gemv.use_gemv(one)


@pytest.mark.parametrize("tied", [True, False])
def test_decoder_decode_step_same_with_kernel(monkeypatch, tied):
    cfg = ModelConfig(model_type="qwen2", vocab_size=96, hidden_size=64, intermediate_size=96, num_layers=2,
                      num_heads=4, num_kv_heads=2, head_dim=16, qkv_bias=True, tie_word_embeddings=tied)
    model = Decoder(cfg, rngs=nnx.Rngs(0))
    toks = jnp.asarray([[5, 17, 3, 60, 11]], jnp.int32)

    monkeypatch.setenv("CUDAPERF_DECODE_GEMV", "off")
    want = tiny.stepwise_logits(model, toks, 8)
    monkeypatch.setenv("CUDAPERF_DECODE_GEMV", "interpret")
    got = tiny.stepwise_logits(model, toks, 8)
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=1e-4)


def test_tuned_table_overrides_the_default_tiling(tmp_path, monkeypatch):
    import json
    table = tmp_path / "t.json"
    table.write_text(json.dumps([{"K": 128, "N": 64, "transposed": False,
                                  "config": {"block_n": 16, "split_k": 2, "block_k": 32, "num_warps": 8, "num_stages": 2}}]))
    assert gemv.config_for(128, 64, False) == gemv.default_config(128, 64, False)
    monkeypatch.setenv("CUDAPERF_GEMV_TABLE", str(table))
    assert gemv.config_for(128, 64, False) == gemv.GemvConfig(16, 2, 32, 8, 2)
    assert gemv.config_for(128, 32, False) == gemv.default_config(128, 32, False)  # other shapes: heuristic
    x, w = jnp.ones((128,)), jnp.ones((128, 64))
    np.testing.assert_allclose(gemv.gemv_raw(x, w, interpret=True), np.full(64, 128.0))
    monkeypatch.setenv("CUDAPERF_GEMV_TABLE", str(tmp_path / "missing.json"))
    with pytest.raises(FileNotFoundError, match="CUDAPERF_GEMV_TABLE"):
        gemv.config_for(128, 64, False)


def test_packaged_table_entries_are_valid_tilings():
    for (k, n, tr), cfg in gemv._tuned(None).items():
        assert n % cfg.block_n == 0 and k % cfg.split_k == 0 and (k // cfg.split_k) % cfg.block_k == 0


def test_sampler_falls_back_to_xla_when_the_kernel_fails(monkeypatch):
    """A real failure: auto mode believes it is on one GPU, so the kernel is compiled for Triton on the CPU,
    which Pallas refuses; the sampler warns, turns the kernel off and gives the XLA path's tokens."""
    from cudaperf_jax.generation.sampler import Sampler, SamplingParams
    cfg = ModelConfig(model_type="llama", vocab_size=64, hidden_size=32, intermediate_size=48, num_layers=2,
                      num_heads=4, num_kv_heads=2, head_dim=8)
    model = Decoder(cfg, rngs=nnx.Rngs(0))
    prompt = [[5, 9, 2, 7]]
    params = SamplingParams(max_new_tokens=6, temperature=0.0, stop_token_ids=())
    monkeypatch.setitem(gemv._state, "disabled", None)
    monkeypatch.setenv("CUDAPERF_DECODE_GEMV", "off")
    want = Sampler(model, prompt_bucket=4).generate(prompt, params).tokens
    jax.clear_caches()
    monkeypatch.setenv("CUDAPERF_DECODE_GEMV", "auto")
    monkeypatch.setattr(gemv, "_auto_ok", lambda: True)
    with pytest.warns(RuntimeWarning, match="decode kernel failed"):
        got = Sampler(model, prompt_bucket=4).generate(prompt, params).tokens
    np.testing.assert_array_equal(got, want)
    assert gemv._state["disabled"] and not gemv.use_gemv(jnp.zeros((1, 1, 8)))
    monkeypatch.setenv("CUDAPERF_DECODE_GEMV", "on")  # forced: a failure is the user's to see
    monkeypatch.setitem(gemv._state, "disabled", None)
    jax.clear_caches()
    with pytest.raises(Exception, match="interpret"):
        Sampler(model, prompt_bucket=4).generate(prompt, params)


@pytest.mark.parametrize("kind", ["llama", "qwen3"])
def test_decoder_with_every_decode_kernel_matches_xla(monkeypatch, kind):
    cfg = ModelConfig(model_type=kind, vocab_size=96, hidden_size=64, intermediate_size=96, num_layers=2,
                      num_heads=4, num_kv_heads=2, head_dim=16, qk_norm=kind == "qwen3")
    model = Decoder(cfg, rngs=nnx.Rngs(2))
    toks = jnp.asarray([[5, 17, 3, 60, 11, 7]], jnp.int32)

    for var in ("CUDAPERF_DECODE_GEMV", "CUDAPERF_DECODE_FUSED"):
        monkeypatch.setenv(var, "off")
    want = tiny.stepwise_logits(model, toks, 8)
    monkeypatch.setenv("CUDAPERF_DECODE_GEMV", "interpret")
    np.testing.assert_allclose(tiny.stepwise_logits(model, toks, 8), want, atol=1e-4, rtol=1e-4)
