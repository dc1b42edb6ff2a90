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
    ws = tuple(jax.random.normal(k, (d, d), jnp.bfloat16) * float(1.0 / np.sqrt(d))
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


@pytest.mark.parametrize("name,epilogue", [("qwen2.5-1.5b", "partials"), ("qwen2.5-1.5b", "fused"),
                                            ("qwen2.5-1.5b", "qkv"), ("qwen3", "partials"), ("smollm2-135m", "partials")])
def test_the_fused_decoder_with_cuda_matvecs_agrees_with_the_pallas_one(monkeypatch, name, epilogue):
    """CUDAPERF_DECODE_CUDA=on: qkv, o, gate_up and down of the fused bf16 decode step run the CUDA kernel, with
    each CUDAPERF_CUDA_EPILOGUE."""
    monkeypatch.setenv("CUDAPERF_CUDA_EPILOGUE", epilogue)
    from tests.cudaperf_jax.models import tiny
    from tests.cudaperf_jax.models.test_decode_fused_gpu import _model
    model = _model(name, jnp.bfloat16)
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


@pytest.mark.parametrize("split,cols", [(1, 256), (12, 64), (24, 256)])
def test_the_sum_epilogue_is_the_partials_summed(split, cols):
    k, n = 1536, 2048
    ks = jax.random.split(jax.random.key(split + cols), 2)
    xp = jax.random.normal(ks[0], (2, k), jnp.float32)
    w = jax.random.normal(ks[1], (k, n), jnp.bfloat16)
    f = jax.jit(lambda a, b, e: cm.matvec(a, b, split_k=split, cols=cols, pdl=True, out_cols=n + 128, epilogue=e),
                static_argnums=2)
    total, parts = f(xp, w, "sum"), f(xp, w, "partials")
    assert total.shape == (1, n + 128)
    np.testing.assert_allclose(np.asarray(total[0, :n]), np.asarray(parts[:, :n].sum(axis=0)), rtol=1e-5, atol=1e-3)
    for _ in range(3):   # the arrival counters are left at zero: launches agree
        np.testing.assert_array_equal(np.asarray(f(xp, w, "sum")[:, :n]), np.asarray(total[:, :n]))


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("split,cols", [(1, 64), (14, 64), (56, 256)])
def test_the_residual_epilogue_is_finish(split, cols, bias):
    """matvec_swiglu(..., epilogue="residual") against decode_fused.finish of the same kernel's partials."""
    from cudaperf_jax.models import decode_fused as df
    k, n = 8960, 1536
    ks = jax.random.split(jax.random.key(split + cols + bias), 4)
    parts = jax.random.normal(ks[0], (4, 2 * k), jnp.float32)
    w = jax.random.normal(ks[1], (k, n), jnp.bfloat16) * 0.02
    x = jax.random.normal(ks[2], (n,), jnp.bfloat16)
    b = jax.random.normal(ks[3], (n,), jnp.bfloat16) if bias else None
    xo, ss = jax.jit(lambda p, w, x: cm.matvec_swiglu(p, None, w, split_k=split, cols=cols, pdl=True,
                                                      epilogue="residual", residual=(x, b)))(parts, w, x)
    want_x, _ = jax.jit(lambda p, w, x: df.finish(x, cm.matvec_swiglu(p, None, w, split_k=split, cols=cols), b))(
        parts, w, x)
    assert xo.shape == (n,) and xo.dtype == jnp.bfloat16 and ss.shape == (n // cols,)
    # the same sums in another order at most flip the last bf16 bit of a few entries
    diff = np.abs(np.asarray(xo, np.float32) - np.asarray(want_x, np.float32))
    assert (diff > 0).mean() < 0.05 and diff.max() <= 0.02 * float(jnp.abs(want_x.astype(jnp.float32)).max())
    xf = np.asarray(xo, np.float32).reshape(-1, cols)
    np.testing.assert_allclose(np.asarray(ss), (xf ** 2).sum(axis=1), rtol=1e-4)


def test_a_residual_chain_with_pdl_matches_xla():
    """o -> gate_up -> down as the fused step chains them: each launch's norm prologue reads the previous
    residual epilogue's stream and sums of squares, launched with PDL."""
    d, f, steps = 1536, 8960, 4
    keys = jax.random.split(jax.random.key(3), 3 * steps + 1)
    ws = [(jax.random.normal(keys[3 * i], (d, 2 * f), jnp.bfloat16) * float(1 / np.sqrt(d)),
           jax.random.normal(keys[3 * i + 1], (f, d), jnp.bfloat16) * float(1 / np.sqrt(f)),
           jax.random.normal(keys[3 * i + 2], (d,), jnp.bfloat16)) for i in range(steps)]
    x0 = jax.random.normal(keys[-1], (d,), jnp.bfloat16)

    @jax.jit
    def chain(x, ws):
        from cudaperf_jax.models import decode_fused as df
        x, ss = df.finish(x, None, None)
        count = df.finish_count(d)
        for gu, down, scale in ws:
            parts = cm.matvec_norm(x, ss, scale, gu, n_chunks=count, eps=1e-6, split_k=8, pdl=True)
            x, ss = cm.matvec_swiglu(parts, None, down, split_k=28, cols=64, pdl=True, epilogue="residual",
                                     residual=(x, None))
            count = d // 64
        return x

    @jax.jit
    def reference(x, ws):
        for gu, down, scale in ws:
            xf = x.astype(jnp.float32)
            h = (xf * jax.lax.rsqrt(jnp.mean(xf * xf) + 1e-6)).astype(jnp.bfloat16) * scale
            gu_out = (h.astype(jnp.float32) @ gu.astype(jnp.float32)).astype(jnp.bfloat16)
            act = (jax.nn.silu(gu_out[:f]) * gu_out[f:]).astype(jnp.bfloat16)
            x = x + (act.astype(jnp.float32) @ down.astype(jnp.float32)).astype(jnp.bfloat16)
        return x

    got, want = np.asarray(chain(x0, ws), np.float32), np.asarray(reference(x0, ws), np.float32)
    np.testing.assert_allclose(got, want, rtol=3e-2, atol=3e-2 * np.abs(want).max())


@pytest.mark.parametrize("n_parts,bias", [(0, False), (1, False), (40, True)])
def test_the_cuda_finish_is_decode_fuseds(n_parts, bias):
    from cudaperf_jax.models import decode_fused as df
    n = 1536
    ks = jax.random.split(jax.random.key(n_parts), 3)
    x = jax.random.normal(ks[0], (n,), jnp.bfloat16)
    parts = jax.random.normal(ks[1], (n_parts, n + 64), jnp.float32) if n_parts else None
    b = jax.random.normal(ks[2], (n,), jnp.bfloat16) if bias else None
    xo, ss = jax.jit(lambda x, p: cm.finish(x, p, b))(x, parts)
    want_x, want_ss = jax.jit(lambda x, p: df.finish(x, None if p is None else p[:, :n], b))(x, parts)
    np.testing.assert_array_equal(np.asarray(xo, np.float32), np.asarray(want_x, np.float32))
    np.testing.assert_allclose(np.asarray(ss), np.asarray(want_ss)[: n // 128], rtol=1e-5)


@pytest.mark.parametrize("b,v,k", [(1, 151936, 50), (4, 151936, 64), (1, 49152, 1), (2, 5000, 16)])
def test_the_cuda_top_k_is_lax_top_k(b, v, k):
    x = jax.random.normal(jax.random.key(v + k), (b, v), jnp.float32)
    vals, idx = jax.jit(lambda x: cm.top_k(x, k))(x)
    want_v, want_i = jax.lax.top_k(x, k)
    np.testing.assert_array_equal(np.asarray(vals), np.asarray(want_v))
    np.testing.assert_array_equal(np.asarray(idx), np.asarray(want_i))


@pytest.mark.parametrize("b,v,k", [(1, 151936, 50), (3, 128256, 64)])
def test_the_cuda_top_k_takes_the_ties_of_smallest_index(b, v, k):
    """Six value levels: the k-th value is shared across many chunks (the select kernel's index selection)."""
    x = jax.random.randint(jax.random.key(v), (b, v), 0, 6).astype(jnp.float32)
    vals, idx = jax.jit(lambda x: cm.top_k(x, k))(x)
    xn = np.asarray(x)
    want_i = np.lexsort((np.broadcast_to(np.arange(v), (b, v)), -xn), axis=-1)[:, :k]
    np.testing.assert_array_equal(np.asarray(idx), want_i)
    np.testing.assert_array_equal(np.asarray(vals), np.take_along_axis(xn, want_i, axis=-1))


def test_the_sampler_picks_the_cuda_top_k_when_asked(monkeypatch):
    from cudaperf_jax.generation import sampling
    x = jax.random.normal(jax.random.key(5), (1, 151936), jnp.float32)
    monkeypatch.setenv("CUDAPERF_CUDA_TOPK", "on")
    assert sampling._cuda_top_k(151936, 50)
    got = jax.jit(lambda x: sampling.top_k(x, 50))(x)
    want = jax.lax.top_k(x, 50)
    np.testing.assert_array_equal(np.asarray(got[1]), np.asarray(want[1]))


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_log_probabilities_from_the_top_k_kernels_logsumexp(monkeypatch, temperature):
    """CUDAPERF_CUDA_TOPK_LSE=on: the sampler's tokens as with it off, their log-probabilities from the top-k
    kernels' logsumexp within float32 summation-order noise of log_softmax's; CUDAPERF_CUDA_SAMPLE=on as well (the
    draw inside the top-k kernel): the same tokens again, with and without top-p."""
    from cudaperf_jax.generation import sampling
    logits = 3 * jax.random.normal(jax.random.key(2), (3, 151936), jnp.float32)
    keys = jax.random.key_data(jax.random.split(jax.random.key(0), 3))
    monkeypatch.setenv("CUDAPERF_CUDA_TOPK", "on")
    def draw(top_p):
        return jax.jit(lambda x, s: sampling.choose_with_logprobs(x, keys, s, temperature, top_p, top_k=50,
                                                                  use_top_p=top_p < 1))
    for top_p in (0.9, 1.0):
        fn = draw(top_p)
        results = {}
        for mode, lse, in_kernel in (("off", "off", "off"), ("lse", "on", "off"), ("sample", "on", "on")):
            monkeypatch.setenv("CUDAPERF_CUDA_TOPK_LSE", lse)
            monkeypatch.setenv("CUDAPERF_CUDA_SAMPLE", in_kernel)
            assert cm.topk_lse_enabled() == (lse == "on") and cm.topk_sample_enabled() == (in_kernel == "on")
            jax.clear_caches()
            results[mode] = [tuple(np.asarray(a) for a in fn(logits, s)) for s in range(8)]
        for mode in ("lse", "sample"):
            for (t_off, lp_off), (t_on, lp_on) in zip(results["off"], results[mode]):
                np.testing.assert_array_equal(t_on, t_off)
                np.testing.assert_allclose(lp_on, lp_off, rtol=0, atol=2e-5)


@pytest.mark.parametrize("name", ["qwen2.5-1.5b", "smollm2-135m", "qwen3"])
def test_the_one_kernel_layer_agrees_with_the_fused_step(monkeypatch, name):
    """CUDAPERF_CUDA_LAYER=on: each layer of the bf16 step is one persistent kernel with grid barriers; =phases: the
    same kernel launched once per phase. Both against the seven-kernel fused step, and bit-equal to each other."""
    run, want = _layer_launch_case(monkeypatch, name)
    got = {}
    for mode in ("phases", "on"):
        got[mode] = run(mode)
        assert (np.argmax(got[mode], -1) == np.argmax(want, -1)).mean() >= 0.9
        np.testing.assert_allclose(got[mode], want, atol=0.1 * float(np.abs(want).max()))
    np.testing.assert_array_equal(got["on"], got["phases"])   # the barrier changes nothing but the launch count


def _layer_launch_case(monkeypatch, name):
    """(run(CUDAPERF_CUDA_LAYER value) -> its bf16 stepwise logits, the seven-kernel fused step's logits) for a small
    model of `name`'s shape; run checks that the decoder takes that layer launch."""
    from cudaperf_jax.models import decode_fused as df
    from tests.cudaperf_jax.models import tiny
    from tests.cudaperf_jax.models.test_decode_fused_gpu import _model
    model = _model(name, jnp.bfloat16)
    toks = jnp.asarray([[5, 17, 3, 60, 11, 900, 4000, 2, 8, 9]], jnp.int32)
    monkeypatch.setenv("CUDAPERF_DECODE_FUSED", "on")
    monkeypatch.setenv("CUDAPERF_DECODE_CUDA", "on")
    monkeypatch.setenv("CUDAPERF_CUDA_LAYER", "off")
    want = tiny.stepwise_logits(model, toks, 16, jnp.bfloat16)

    def run(mode):
        monkeypatch.setenv("CUDAPERF_CUDA_LAYER", mode)
        assert df._cuda_layer(model, jnp.bfloat16, jnp.zeros((1, model.cfg.num_kv_heads, 16, model.cfg.head_dim),
                                                             jnp.bfloat16)) is not None
        return tiny.stepwise_logits(model, toks, 16, jnp.bfloat16)
    return run, want


@pytest.mark.parametrize("pdl", ["on", "off", "late"])
@pytest.mark.parametrize("mode", ["kernels", "step"])
@pytest.mark.parametrize("name", ["qwen2.5-1.5b", "qwen3"])
def test_the_seven_kernel_layer_launch_agrees_with_the_fused_step(monkeypatch, name, mode, pdl):
    """CUDAPERF_CUDA_LAYER=kernels: each layer is seven standalone kernels (the CUDA attention among them) launched by
    one FFI call and chained by PDL; =step: every layer from one FFI call. Against the fused step of separate calls."""
    run, want = _layer_launch_case(monkeypatch, name)
    monkeypatch.setenv("CUDAPERF_CUDA_PDL", pdl)
    monkeypatch.setenv("CUDAPERF_CUDA_FOLD_FINISH", "off")   # the seven kernels (the default folds the finishes)
    got = run(mode)
    assert (np.argmax(got, -1) == np.argmax(want, -1)).mean() >= 0.9
    np.testing.assert_allclose(got, want, atol=0.1 * float(np.abs(want).max()))


@pytest.mark.parametrize("groups", ["2", "3", "6"])
def test_the_step_launch_with_attention_head_groups_agrees_with_the_fused_step(monkeypatch, groups):
    """CUDAPERF_CUDA_ATTEND_HEAD_GROUPS: each (KV head, cache split) of the step launch's attention split over 2 or 3
    or 6 blocks (Qwen2.5-1.5B's six query heads per KV head), chained by PDL. Against the fused step of separate calls."""
    run, want = _layer_launch_case(monkeypatch, "qwen2.5-1.5b")
    monkeypatch.setenv("CUDAPERF_CUDA_ATTEND_HEAD_GROUPS", groups)
    got = run("step")
    assert (np.argmax(got, -1) == np.argmax(want, -1)).mean() >= 0.9
    np.testing.assert_allclose(got, want, atol=0.1 * float(np.abs(want).max()))


@pytest.mark.parametrize("mode", ["kernels", "step"])
@pytest.mark.parametrize("name", ["qwen2.5-1.5b", "qwen3"])
def test_early_attention_loads_leave_the_logits_bit_equal(monkeypatch, name, mode):
    """CUDAPERF_CUDA_ATTEND_EARLY=on: the attention loads the slot index and its first key and value rows before PDL's
    wait (the call's first kernel launched without the PDL attribute); the same values as loaded after it."""
    run, _ = _layer_launch_case(monkeypatch, name)
    monkeypatch.setenv("CUDAPERF_CUDA_ATTEND_EARLY", "off")
    want = run(mode)
    monkeypatch.setenv("CUDAPERF_CUDA_ATTEND_EARLY", "on")
    np.testing.assert_array_equal(run(mode), want)


def _check_fixed_point_option(monkeypatch, name, var):
    """The step launch with `var` on (set by the caller): near the fused step of separate calls, the same logits twice
    (fixed-point integer sums: no order dependence), and near the step launch with `var` off."""
    run, want = _layer_launch_case(monkeypatch, name)
    got = run("step")
    assert (np.argmax(got, -1) == np.argmax(want, -1)).mean() >= 0.9
    np.testing.assert_allclose(got, want, atol=0.1 * float(np.abs(want).max()))
    np.testing.assert_array_equal(run("step"), got)
    monkeypatch.setenv(var, "off")
    off = run("step")
    assert (np.argmax(got, -1) == np.argmax(off, -1)).mean() >= 0.95
    np.testing.assert_allclose(got, off, atol=0.05 * float(np.abs(off).max()))


@pytest.mark.parametrize("name", ["qwen2.5-1.5b", "qwen3"])
def test_the_step_launch_with_folded_finishes_agrees_with_the_fused_step(monkeypatch, name):
    """CUDAPERF_CUDA_FOLD_FINISH=on: five kernels a layer (o and down add fixed-point sums that the next norm prologue
    turns back into the residual stream). Against the fused step of separate calls, near the step launch with finish
    kernels, and the same logits twice (integer sums: no order dependence)."""
    from cudaperf_jax.models import cuda_matvec as cm
    from tests.cudaperf_jax.models.test_decode_fused_gpu import CONFIGS
    c = CONFIGS[name]
    tilings = cm.kernels_tilings(c["hidden_size"], (c["num_heads"] + 2 * c["num_kv_heads"]) * c["head_dim"],
                                 c["num_heads"] * c["head_dim"], c["intermediate_size"])
    monkeypatch.setenv("CUDAPERF_CUDA_FOLD_FINISH", "on")
    assert cm.fold_finish(tilings[1][2], tilings[3][2])   # o and down split: the fold really runs
    _check_fixed_point_option(monkeypatch, name, "CUDAPERF_CUDA_FOLD_FINISH")


@pytest.mark.parametrize("name", ["qwen2.5-1.5b", "qwen3"])
def test_the_step_launch_with_qkv_sums_as_fixed_point_agrees_with_the_fused_step(monkeypatch, name):
    """CUDAPERF_CUDA_QKV_FIXED=on: after the first layer qkv adds fixed-point column sums that the attention reads
    (the o kernel clears them): near the fused step of separate calls and the step with partials, the same logits
    twice."""
    monkeypatch.setenv("CUDAPERF_CUDA_QKV_FIXED", "on")
    _check_fixed_point_option(monkeypatch, name, "CUDAPERF_CUDA_QKV_FIXED")


@pytest.mark.parametrize("mode", ["on", "rotate", "lean", "gm", "gm_lean", "gm768"])
@pytest.mark.parametrize("name", ["qwen2.5-1.5b", "qwen3"])
def test_the_step_launch_with_the_one_kernel_mlp_agrees_with_the_fused_step(monkeypatch, name, mode):
    """CUDAPERF_CUDA_MLP=on: each layer's gate_up and down as one kernel (blocks owning ranges of intermediate features,
    down's sums added as fixed point) in the folded step launch. Against the fused step of separate calls, near the
    two-kernel fold, and the same logits twice; =rotate (staggered adds) and =lean (48 registers): bit-equal to `on`;
    =gm (gate_up group-major: the gate and up sums in another order; also gm_lean and gm768): near `on`, the same
    logits twice."""
    monkeypatch.setenv("CUDAPERF_CUDA_FOLD_FINISH", "on")
    monkeypatch.setenv("CUDAPERF_CUDA_MLP", mode)
    reordered = mode.startswith("gm")
    if mode != "on":
        run, _ = _layer_launch_case(monkeypatch, name)
        got = run("step")
        if reordered:
            np.testing.assert_array_equal(run("step"), got)
        monkeypatch.setenv("CUDAPERF_CUDA_MLP", "on")
        want = run("step")
        if reordered:
            assert (np.argmax(got, -1) == np.argmax(want, -1)).mean() >= 0.95
            np.testing.assert_allclose(got, want, atol=0.02 * float(np.abs(want).max()))
        else:
            np.testing.assert_array_equal(want, got)
        return
    _check_fixed_point_option(monkeypatch, name, "CUDAPERF_CUDA_MLP")


def test_auto_takes_the_step_launch_from_hidden_size_1024(monkeypatch):
    """CUDAPERF_CUDA_LAYER=auto (the default): the whole-step launch for Qwen2.5-1.5B's and the Qwen3-style shapes
    (hidden 1536 and 1024), the fused step's separate calls for SmolLM2-135M's (hidden 576, measured slower)."""
    from cudaperf_jax.models import decode_fused as df
    from tests.cudaperf_jax.models.test_decode_fused_gpu import _model
    monkeypatch.delenv("CUDAPERF_CUDA_LAYER", raising=False)
    monkeypatch.setenv("CUDAPERF_DECODE_CUDA", "on")
    for name, whole in (("qwen2.5-1.5b", True), ("qwen3", True), ("smollm2-135m", False)):
        model = _model(name, jnp.bfloat16)
        cache = jnp.zeros((1, model.cfg.num_kv_heads, 16, model.cfg.head_dim), jnp.bfloat16)
        got = df._cuda_layer(model, jnp.bfloat16, cache)
        assert getattr(got, "whole_step", False) is whole, name


@pytest.mark.parametrize("spec", ["gu=60,down=30,o=100", "gu=50,from=qkv,o=100", "kv", "kv=early,from=qkv,gu=10"])
def test_l2_prefetch_leaves_the_step_launchs_logits_bit_equal(monkeypatch, spec):
    """CUDAPERF_CUDA_L2_PREFETCH: the step launch's kernels request later weights (and the attention's cache rows) into
    L2 before or after their waits; the prefetches are hints, so the logits are those of the step without them, bit
    for bit."""
    run, _ = _layer_launch_case(monkeypatch, "qwen2.5-1.5b")
    monkeypatch.setenv("CUDAPERF_CUDA_L2_PREFETCH", "off")
    want = run("step")
    monkeypatch.setenv("CUDAPERF_CUDA_L2_PREFETCH", spec)
    np.testing.assert_array_equal(run("step"), want)
