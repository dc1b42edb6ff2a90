"""The batch-1 decode kernel (Pallas), run by Pallas' interpreter on the CPU: values, tilings, gradients,
and the decoder with and without it (the same numbers the GPU path must give)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from cudaperf_jax.kernels import DecodeKernels, gemv
from cudaperf_jax.kernels import config as kconfig
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


def test_gradient_goes_through_plain_matmuls():
    x = jax.random.normal(jax.random.key(0), (1, 64))
    w = jax.random.normal(jax.random.key(1), (64, 32))
    wt = jax.random.normal(jax.random.key(2), (48, 64))

    def f(x, w, wt):
        kw = {"on": True, "interpret": True}
        return jnp.sum(gemv.matmul(x, w, **kw) ** 2) + jnp.sum(gemv.matmul(x, wt, transposed=True, **kw) ** 3)

    def g(x, w, wt):
        return jnp.sum((x @ w) ** 2) + jnp.sum((x @ wt.T) ** 3)

    for a, b in zip(jax.grad(f, argnums=(0, 1, 2))(x, w, wt), jax.grad(g, argnums=(0, 1, 2))(x, w, wt)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


def test_use_gemv_and_the_resolved_paths():
    one, two = jnp.zeros((1, 1, 8)), jnp.zeros((2, 1, 8))
    assert gemv.use_gemv(one, True) and not gemv.use_gemv(two, True) and not gemv.use_gemv(one, False)
    auto = DecodeKernels().resolve(1)
    assert auto.on == (jax.default_backend() == "gpu" and jax.device_count() == 1)
    assert DecodeKernels(path="pallas", interpret=True).resolve(1).on
    assert not DecodeKernels(path="xla").resolve(1).on
    with pytest.raises(ValueError, match="auto, xla, pallas, cuda"):
        DecodeKernels(path="fast")
    with pytest.raises(ValueError, match="unknown fields"):
        DecodeKernels.from_config({"path": "xla", "speed": 2})
    assert DecodeKernels.from_config({"path": "xla", "unroll": 2}) == DecodeKernels(path="xla", unroll=2)
    assert hash(DecodeKernels()) == hash(DecodeKernels())   # a static argument of jit


@pytest.mark.parametrize("tied", [True, False])
def test_decoder_decode_step_same_with_kernel(tied):
    cfg = ModelConfig(model_type="qwen2", vocab_size=96, hidden_size=64, intermediate_size=96, num_layers=2,
                      num_heads=4, num_kv_heads=2, head_dim=16, qkv_bias=True, tie_word_embeddings=tied)
    model = Decoder(cfg, rngs=nnx.Rngs(0))
    toks = jnp.asarray([[5, 17, 3, 60, 11]], jnp.int32)

    want = tiny.stepwise_logits(model, toks, 8)
    got = tiny.stepwise_logits(model, toks, 8, kernels=DecodeKernels(path="pallas", interpret=True))
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=1e-4)


def test_tuned_table_overrides_the_default_tiling(tmp_path):
    import json
    table = tmp_path / "t.json"
    table.write_text(json.dumps([{"kernel": "gemv", "K": 128, "N": 64,
                                  "config": {"block_n": 16, "split_k": 2, "block_k": 32, "num_warps": 8, "num_stages": 2}}]))
    assert gemv.config_for(128, 64, False, kconfig.tilings()) == gemv.default_config(128, 64, False)
    rows = kconfig.tilings(str(table))
    assert gemv.config_for(128, 64, False, rows) == gemv.GemvConfig(16, 2, 32, 8, 2)
    assert gemv.config_for(128, 32, False, rows) == gemv.default_config(128, 32, False)  # other shapes: heuristic
    x, w = jnp.ones((128,)), jnp.ones((128, 64))
    np.testing.assert_allclose(gemv.gemv_raw(x, w, config=gemv.config_for(128, 64, False, rows), interpret=True),
                               np.full(64, 128.0))


def test_packaged_table_entries_are_valid_tilings():
    from cudaperf_jax.kernels import cuda_ffi
    table = kconfig.tilings()
    assert table, "the packaged tilings table is empty"
    for (kernel, k, n), rec in table.items():
        if kernel.startswith("gemv"):
            cfg = gemv.GemvConfig(**rec)
            assert n % cfg.block_n == 0 and k % cfg.split_k == 0 and (k // cfg.split_k) % cfg.block_k == 0
        elif kernel.startswith("cuda"):
            assert cuda_ffi.tiling_for(k, n, table, step=kernel == "cuda_step") == \
                (rec["split_k"], rec["cols"], rec["unroll"])


def test_sampler_falls_back_to_xla_when_the_kernel_fails(monkeypatch):
    """A real failure: auto mode believes it is on one GPU, so the kernel is compiled for Triton on the CPU,
    which Pallas refuses; the sampler warns, holds path xla from then on and gives the XLA path's tokens."""
    import dataclasses

    from cudaperf_jax.generation.sampler import Sampler, SamplingParams
    cfg = ModelConfig(model_type="llama", vocab_size=64, hidden_size=32, intermediate_size=48, num_layers=2,
                      num_heads=4, num_kv_heads=2, head_dim=8)
    model = Decoder(cfg, rngs=nnx.Rngs(0))
    prompt = [[5, 9, 2, 7]]
    params = SamplingParams(max_new_tokens=6, temperature=0.0, stop_token_ids=())
    want = Sampler(model, prompt_bucket=4, kernels=DecodeKernels(path="xla")).generate(prompt, params).tokens
    real = kconfig._resolve

    def on_one_gpu(kc, batch):   # what auto resolves to on one GPU without the CUDA library
        run = real(kc, batch)
        return dataclasses.replace(run, path="pallas", lm_head="pallas") if kc.path == "auto" else run
    monkeypatch.setattr(kconfig, "_resolve", on_one_gpu)
    sampler = Sampler(model, prompt_bucket=4)
    with pytest.warns(RuntimeWarning, match="decode kernel failed"):
        got = sampler.generate(prompt, params).tokens
    np.testing.assert_array_equal(got, want)
    assert sampler.kernels.path == "xla" and not sampler.kernels.resolve(1).on
    forced = Sampler(model, prompt_bucket=4, kernels=DecodeKernels(path="pallas"))   # a failure is the user's to see
    with pytest.raises(Exception, match="interpret"):
        forced.generate(prompt, params)


@pytest.mark.parametrize("kind", ["llama", "qwen3"])
def test_decoder_with_every_decode_kernel_matches_xla(kind):
    cfg = ModelConfig(model_type=kind, vocab_size=96, hidden_size=64, intermediate_size=96, num_layers=2,
                      num_heads=4, num_kv_heads=2, head_dim=16, qk_norm=kind == "qwen3")
    model = Decoder(cfg, rngs=nnx.Rngs(2))
    toks = jnp.asarray([[5, 17, 3, 60, 11, 7]], jnp.int32)

    want = tiny.stepwise_logits(model, toks, 8)
    got = tiny.stepwise_logits(model, toks, 8, kernels=DecodeKernels(path="pallas", interpret=True))
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=1e-4)
