"""The decode kernels on a real GPU (H200 / Hopper for the CUDA ones), against XLA and against each other:
the Pallas matvec and fused layers (path pallas), the CUDA matvecs and top-k, the whole-step launch (path cuda), and
the Sampler with the default config. Run by benchmarks/gpu_check.py (`pytest -m gpu`)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from cudaperf_jax.kernels import DecodeKernels, cuda_ffi, cuda_step, gemv
from cudaperf_jax.kernels import fused as df
from cudaperf_jax.kernels import step as kstep
from cudaperf_jax.kernels.config import cuda_available, tilings
from cudaperf_jax.models.config import ModelConfig
from cudaperf_jax.models.decoder import Decoder
from tests.cudaperf_jax.models import tiny

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(jax.default_backend() != "gpu", reason="needs a GPU backend for JAX")]
needs_cuda = pytest.mark.skipif(jax.default_backend() != "gpu" or not cuda_available(),
                                reason="needs a compute capability 9.x GPU and nvcc")

PALLAS, CUDA, XLA = DecodeKernels(path="pallas"), DecodeKernels(path="cuda"), DecodeKernels(path="xla")
CONFIGS = {  # Qwen2.5-1.5B and SmolLM2-135M shapes with fewer layers and vocabulary, and a Qwen3-style one
    "qwen2.5-1.5b": {"model_type": "qwen2", "hidden_size": 1536, "intermediate_size": 8960, "num_heads": 12,
                     "num_kv_heads": 2, "head_dim": 128, "qkv_bias": True, "tie_word_embeddings": True},
    "smollm2-135m": {"model_type": "llama", "hidden_size": 576, "intermediate_size": 1536, "num_heads": 9,
                     "num_kv_heads": 3, "head_dim": 64, "tie_word_embeddings": True},
    "qwen3": {"model_type": "qwen3", "hidden_size": 1024, "intermediate_size": 3072, "num_heads": 16, "num_kv_heads": 8,
              "head_dim": 128, "qk_norm": True},
}
TOKS = jnp.asarray([[5, 17, 3, 60, 11, 900, 4000, 2, 8, 9]], jnp.int32)


def _model(name, dtype):
    cfg = ModelConfig(vocab_size=4096, num_layers=3, **CONFIGS[name])
    model = Decoder(cfg, rngs=nnx.Rngs(0), dtype=dtype, param_dtype=dtype)
    leaves, tdef = jax.tree.flatten(nnx.state(model))
    keys = jax.random.split(jax.random.key(1), len(leaves))
    nnx.update(model, jax.tree.unflatten(tdef, [x + 0.05 * jax.random.normal(k, x.shape, x.dtype)
                                                for x, k in zip(leaves, keys)]))
    return model


# ------------------------------------------------------------------------------------------ Pallas
@pytest.mark.parametrize("k,n,transposed", [(576, 960, False), (1536, 576, False), (576, 49152, True),
                                            (1536, 2048, False), (1536, 17920, False), (8960, 1536, False),
                                            (1536, 151936, True)])
def test_the_pallas_matvec_matches_xla(k, n, transposed):
    x = jax.random.normal(jax.random.key(0), (k,), jnp.bfloat16)
    w = jax.random.normal(jax.random.key(1), (n, k) if transposed else (k, n), jnp.bfloat16)
    eq = "k,nk->n" if transposed else "k,kn->n"
    want = np.asarray(jnp.einsum(eq, x.astype(jnp.float32), w.astype(jnp.float32),
                                 precision=jax.lax.Precision.HIGHEST))
    for cfg in {gemv.default_config(k, n, transposed), gemv.config_for(k, n, transposed, tilings())}:
        got = np.asarray(jax.jit(lambda x, w, cfg=cfg: gemv.gemv_raw(x, w, transposed=transposed, config=cfg))(x, w))
        np.testing.assert_allclose(got, want, atol=1e-2 * np.sqrt(k), rtol=1e-2, err_msg=str(cfg))


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_the_fused_pallas_steps_match_xla_float32(name):
    model = _model(name, jnp.float32)
    with jax.default_matmul_precision("highest"):  # XLA's float32 dots default to TF32 on the GPU
        want = tiny.stepwise_logits(model, TOKS, 16)
    assert kstep.applies(model.cfg, PALLAS.resolve(1), 1, 1)
    got = tiny.stepwise_logits(model, TOKS, 16, kernels=PALLAS)
    np.testing.assert_allclose(got, want, atol=2e-3, rtol=2e-3)


# ------------------------------------------------------------------------------------------ CUDA matvecs, top-k
def _reference(xp, w):
    x = xp.sum(axis=0)[: w.shape[0]].astype(jnp.bfloat16).astype(jnp.float32)
    return jnp.dot(x, w.astype(jnp.float32), precision="highest")


@needs_cuda
@pytest.mark.parametrize("k,n,split", [(1536, 2048, 12), (1536, 1536, 6), (1536, 17920, 4), (8960, 1536, 35),
                                       (576, 960, 2), (1536, 192, 3)])
def test_the_cuda_matvec_matches_xla(k, n, split):
    ks = jax.random.split(jax.random.key(k + n + split), 2)
    xp = jax.random.normal(ks[0], (3, k + 64), jnp.float32)
    w = jax.random.normal(ks[1], (k, n), jnp.bfloat16)
    got = jax.jit(lambda a, b: cuda_ffi.matvec(a, b, split_k=split))(xp, w)
    assert got.shape == (split, n) and got.dtype == jnp.float32
    want = _reference(xp, w)
    np.testing.assert_allclose(np.asarray(got.sum(axis=0)), np.asarray(want), rtol=1e-4,
                               atol=1e-4 * float(jnp.abs(want).max()))


@needs_cuda
@pytest.mark.parametrize("k,n,split", [(1536, 2048, 6), (1536, 17920, 4), (576, 960, 9)])
def test_the_cuda_norm_prologue_is_the_fused_ones(k, n, split):
    ks = jax.random.split(jax.random.key(k + n), 3)
    x = jax.random.normal(ks[0], (k,), jnp.bfloat16)
    scale = jax.random.normal(ks[1], (k,), jnp.bfloat16)
    w = jax.random.normal(ks[2], (k, n), jnp.bfloat16)
    x, ss = jax.jit(lambda x: df.finish(x, None, None))(x)
    got = jax.jit(lambda *a: cuda_ffi.matvec_norm(*a, n_chunks=df.finish_count(k), eps=1e-6, split_k=split,
                                                  out_cols=n + 64))(x, ss, scale, w)
    assert got.shape == (split, n + 64)
    want = df.norm_from(x, ss, scale, 1e-6).astype(jnp.float32) @ w.astype(jnp.float32)
    np.testing.assert_allclose(np.asarray(got[:, :n].sum(axis=0)), np.asarray(want), rtol=2e-3,
                               atol=2e-3 * float(jnp.abs(want).max()))


@needs_cuda
@pytest.mark.parametrize("b,v,k", [(1, 151936, 50), (4, 151936, 64), (1, 49152, 1), (2, 5000, 16)])
def test_the_cuda_top_k_is_lax_top_k(b, v, k):
    x = jax.random.normal(jax.random.key(v + k), (b, v), jnp.float32)
    vals, idx = jax.jit(lambda x: cuda_ffi.top_k(x, k))(x)
    want_v, want_i = jax.lax.top_k(x, k)
    np.testing.assert_array_equal(np.asarray(vals), np.asarray(want_v))
    np.testing.assert_array_equal(np.asarray(idx), np.asarray(want_i))


@needs_cuda
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_log_probabilities_from_the_top_k_kernels_logsumexp(temperature):
    """top_k cuda: the sampler's tokens as with XLA's top-k, their log-probabilities from the top-k kernels'
    logsumexp within float32 summation-order noise of log_softmax's, with and without top-p."""
    from cudaperf_jax.generation import sampling
    logits = 3 * jax.random.normal(jax.random.key(2), (3, 151936), jnp.float32)
    keys = jax.random.key_data(jax.random.split(jax.random.key(0), 3))
    for top_p in (0.9, 1.0):
        def draw(cuda, top_p=top_p):
            return jax.jit(lambda x, step: sampling.choose_with_logprobs(
                x, keys, step, temperature, top_p, top_k=50, use_top_p=top_p < 1, cuda_top_k=cuda))
        xla, cuda = draw(False), draw(True)
        for i in range(8):
            (t0, lp0), (t1, lp1) = xla(logits, i), cuda(logits, i)
            np.testing.assert_array_equal(np.asarray(t1), np.asarray(t0))
            np.testing.assert_allclose(np.asarray(lp1), np.asarray(lp0), rtol=0, atol=2e-5)


# ------------------------------------------------------------------------------------------ the CUDA decode step
@needs_cuda
@pytest.mark.parametrize("name", ["qwen2.5-1.5b", "qwen3", "smollm2-135m"])
def test_the_cuda_path_agrees_with_the_pallas_step(name):
    """path cuda: the whole-step launch for hidden sizes >= 1024 (five kernels a layer, PDL late, folded finishes,
    qkv fixed-point sums, the one-kernel MLP on the group-major gate_up), the separate CUDA matvec calls below. Near
    the Pallas step (bf16 roundings in another order) and the same logits twice (fixed-point sums: no order
    dependence)."""
    model = _model(name, jnp.bfloat16)
    whole = cuda_step.supported(model.cfg.hidden_size, model.cfg.num_heads, model.cfg.num_kv_heads,
                                model.cfg.head_dim, model.cfg.intermediate_size, 16, tilings())
    assert whole == (name != "smollm2-135m")
    assert bool(model.kernel_layouts(CUDA, 1, (1, model.cfg.num_kv_heads, 16, model.cfg.head_dim),
                                     jnp.bfloat16)) == whole
    want = tiny.stepwise_logits(model, TOKS, 16, jnp.bfloat16, kernels=PALLAS)
    got = tiny.stepwise_logits(model, TOKS, 16, jnp.bfloat16, kernels=CUDA)
    # greedy picks equal up to near-ties (on the CPU emulation one of ten flips, 0.3-1.2% of the largest logit apart)
    picked = np.take_along_axis(want, np.argmax(got, -1)[..., None], -1)[..., 0]
    assert (want.max(-1) - picked <= 0.03 * float(np.abs(want).max())).all(), (np.argmax(got, -1), np.argmax(want, -1))
    np.testing.assert_allclose(got, want, atol=0.1 * float(np.abs(want).max()))
    if whole:
        np.testing.assert_array_equal(tiny.stepwise_logits(model, TOKS, 16, jnp.bfloat16, kernels=CUDA), got)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_the_sampler_bf16_agrees_with_xla(name):
    """The sampler's greedy decode with the default config (auto: the CUDA step on an H200) picks, at every step,
    XLA's choice up to a near-tie: teacher-forced XLA logits of the prompt and the continuation put each picked token
    within 4% of the largest logit of its step (bf16 sums in another order flip near-ties, and a flip changes the rest
    of a greedy continuation, so the two continuations are not compared token by token)."""
    from cudaperf_jax.generation.sampler import Sampler, SamplingParams
    model = _model(name, jnp.bfloat16)
    n = 24
    params = SamplingParams(max_new_tokens=n, temperature=0.0, stop_token_ids=())
    prompts = [[int(t) for t in np.random.RandomState(0).randint(3, 4096, 40)]]
    want = Sampler(model, prompt_bucket=64, kernels=XLA).generate(prompts, params)
    sampler = Sampler(model, prompt_bucket=64)
    assert sampler.kernels.resolve(1).on
    got = sampler.generate(prompts, params)
    assert sampler.kernels.path == "auto"   # no fallback
    assert got.tokens[0, 0] == want.tokens[0, 0]   # from the prefill's logits
    seq = jnp.asarray([prompts[0] + got.tokens[0].tolist()], jnp.int32)
    rows = np.asarray(model(seq)[0], np.float32)[len(prompts[0]) - 1:len(prompts[0]) - 1 + n]
    picked = rows[np.arange(n), got.tokens[0]]
    tol = 0.04 * np.abs(rows).max()
    assert (picked >= rows.max(-1) - tol).all(), (got.tokens, picked - rows.max(-1), tol)
    assert (picked == rows.max(-1)).mean() >= 0.75


@needs_cuda
@pytest.mark.parametrize("name", ["qwen2.5-1.5b", "qwen3"])
def test_the_sampler_builds_the_kernel_layouts_once_per_set_of_weights(name):
    """The step launch's group-major gate_up (Decoder.kernel_layouts) is built once by the Sampler and given to every
    decode program: kept across calls with the same weights, rebuilt after update_weights, none for a batch of two."""
    from cudaperf_jax.generation.sampler import Sampler, SamplingParams
    model = _model(name, jnp.bfloat16)
    params = SamplingParams(max_new_tokens=12, temperature=0.0, stop_token_ids=())
    prompts = [[int(t) for t in np.random.RandomState(0).randint(3, 4096, 40)]]
    sampler = Sampler(model, prompt_bucket=64, kernels=CUDA)
    got = sampler.generate(prompts, params)
    (layouts,) = sampler._layouts.values()
    assert len(layouts) == model.cfg.num_layers and layouts[0].ndim == 3
    again = sampler.generate(prompts, params)
    assert next(iter(sampler._layouts.values()))[0] is layouts[0]        # the same arrays: not rebuilt
    np.testing.assert_array_equal(again.tokens, got.tokens)
    sampler.update_weights(model)
    assert not sampler._layouts
    sampler.generate([prompts[0], prompts[0][:30]], params)              # batch 2: no step launch, no layouts
    assert all(v == () for v in sampler._layouts.values())
