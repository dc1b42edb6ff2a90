"""Top-k / top-p masks against transformers' logits processors; greedy is argmax; per-sample keys."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from transformers.generation.logits_process import TopKLogitsWarper, TopPLogitsWarper

from cudaperf_jax.generation.sampling import choose as _choose
from cudaperf_jax.generation.sampling import (
    token_logprobs,
    top_k,
    top_k_mask,
    top_p_mask,
)

choose = jax.jit(_choose, static_argnames=("top_k", "greedy", "use_top_p"))


def _logits(b=4, v=50, seed=0):
    return np.random.RandomState(seed).randn(b, v).astype(np.float32) * 3


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9, 0.99])
def test_top_p_mask_matches_transformers(p):
    x = _logits()
    want = np.isfinite(TopPLogitsWarper(p)(None, torch.tensor(x)).numpy())
    got = np.asarray(top_p_mask(jnp.asarray(x), p)) > -1e29
    np.testing.assert_array_equal(got, want)
    assert got.sum(axis=1).min() >= 1


@pytest.mark.parametrize("k", [1, 5, 20])
def test_top_k_mask_matches_transformers(k):
    x = _logits(seed=1)
    want = np.isfinite(TopKLogitsWarper(k)(None, torch.tensor(x)).numpy())
    got = np.asarray(top_k_mask(jnp.asarray(x), k)) > -1e29
    np.testing.assert_array_equal(got, want)
    assert (got.sum(axis=1) == k).all()


def test_choose_greedy_and_filters_and_keys():
    x = jnp.asarray(_logits(b=3, v=30, seed=2))
    keys = jax.random.split(jax.random.PRNGKey(0), 3)
    np.testing.assert_array_equal(np.asarray(choose(x, keys, 0, 1.0, 1.0, greedy=True)), np.argmax(x, axis=1))
    # top_k=1 and a tiny nucleus both leave only the argmax.
    np.testing.assert_array_equal(np.asarray(choose(x, keys, 0, 1.0, 1.0, top_k=1)), np.argmax(x, axis=1))
    np.testing.assert_array_equal(np.asarray(choose(x, keys, 5, 1.0, 1e-6, use_top_p=True)), np.argmax(x, axis=1))
    # With top_k=5 every draw lies in the row's top 5; draws of one sample do not depend on the others.
    top5 = np.argsort(-np.asarray(x), axis=1)[:, :5]
    steps = jnp.arange(40)
    draws = np.asarray(jax.vmap(lambda s: _choose(x, keys, s, 1.0, 0.95, top_k=5))(steps))
    assert all(np.isin(draws[:, b], top5[b]).all() for b in range(3))
    alone = np.asarray(jax.vmap(lambda s: _choose(x[1:2], keys[1:2], s, 1.0, 0.95, top_k=5))(steps))
    np.testing.assert_array_equal(alone[:, 0], draws[:, 1])
    assert len(set(draws[:, 0].tolist())) > 1  # it does sample


def test_sampling_frequencies_follow_the_tempered_distribution():
    logits = jnp.log(jnp.asarray([[0.5, 0.3, 0.15, 0.05]], jnp.float32))
    keys = jax.random.split(jax.random.PRNGKey(1), 4000)
    draws = np.asarray(choose(jnp.repeat(logits, 4000, axis=0), keys, 0, 1.0, 0.7, use_top_p=True))
    freq = np.bincount(draws, minlength=4) / 4000
    # top-p 0.7 keeps {0.5, 0.3} (0.5 < 0.7 <= 0.8), renormalised to 0.625 / 0.375.
    np.testing.assert_allclose(freq, [0.625, 0.375, 0, 0], atol=0.03)
    lp = np.asarray(token_logprobs(logits[0], jnp.asarray(2)))
    assert lp == pytest.approx(np.log(0.15), abs=1e-6)


@pytest.mark.parametrize("method", ["chunks", "maxes"])
def test_two_stage_top_k_equals_lax_top_k_on_a_large_vocabulary(method):
    x = np.random.RandomState(5).randn(3, 50_000).astype(np.float32)
    x[1, 1000:1100] += 8  # the whole top 50 inside two neighbouring chunks
    x = jnp.asarray(x)
    vals, ids = top_k(x, 50, method)
    want_vals, want_ids = jax.lax.top_k(x, 50)
    np.testing.assert_array_equal(np.asarray(vals), np.asarray(want_vals))
    np.testing.assert_array_equal(np.asarray(ids), np.asarray(want_ids))


@pytest.mark.parametrize("top_k,greedy", [(50, False), (0, False), (7, True)])
def test_choose_with_logprobs_is_choose_and_token_logprobs_off_the_cuda_path(top_k, greedy):
    """Without the CUDA top-k the sampler's pick is choose's token and log_softmax's log-probability of it."""
    from cudaperf_jax.generation.sampling import choose_with_logprobs
    logits = 2 * jax.random.normal(jax.random.key(3), (2, 20000), jnp.float32)
    keys = jax.random.key_data(jax.random.split(jax.random.key(1), 2))
    tok, lp = choose_with_logprobs(logits, keys, 5, 0.8, 0.9, top_k=top_k, greedy=greedy)
    want = _choose(logits, keys, 5, 0.8, 0.9, top_k=top_k, greedy=greedy)
    np.testing.assert_array_equal(tok, want)
    np.testing.assert_array_equal(lp, token_logprobs(logits, want))
