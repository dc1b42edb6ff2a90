"""SFT's token NLL runs the LM head in chunks of positions (models.lm_head): the values, accuracy and gradients of the
whole [B, L, V] log_softmax, with a chunk that does not divide the row length."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from cudaperf_jax.sft.step import make_eval_step, token_nll, token_nll_loss
from cudaperf_jax.training import split_model
from tests.cudaperf_jax.training.test_step import sft_batch, tiny_model


def full_nll(model, batch):
    """The unchunked reference: float32 logits [B, L, V] at once."""
    logits = model(batch["tokens"], batch["positions"], segment_ids=batch["segment_ids"]).astype(jnp.float32)
    logp = jax.nn.log_softmax(logits, axis=-1)
    nll = -jnp.take_along_axis(logp, batch["targets"][..., None], axis=-1)[..., 0]
    return nll, jnp.argmax(logits, axis=-1) == batch["targets"]


def test_chunked_token_nll_equals_the_full_log_softmax():
    chunk = 5                                            # rows of 24 positions: the last chunk is short
    graphdef, params, rest = split_model(tiny_model(3))
    batch = {k: jnp.asarray(v) for k, v in sft_batch(rows=2, length=24).items()}
    w = batch["weights"]
    nll, correct = jax.jit(lambda p: token_nll(nnx.merge(graphdef, p, rest), batch, chunk=chunk))(params)
    want_nll, want_correct = jax.jit(lambda p: full_nll(nnx.merge(graphdef, p, rest), batch))(params)
    np.testing.assert_allclose(np.asarray(nll), np.asarray(want_nll), rtol=1e-5, atol=1e-5)
    assert (np.asarray(correct) == np.asarray(want_correct)).all()

    loss = token_nll_loss(chunk=chunk)
    g = jax.jit(jax.grad(lambda p: loss(nnx.merge(graphdef, p, rest), batch)[0]))(params)
    g_want = jax.jit(jax.grad(lambda p: (full_nll(nnx.merge(graphdef, p, rest), batch)[0] * w).sum()))(params)
    for a, b in zip(jax.tree.leaves(g), jax.tree.leaves(g_want)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-5)

    s_nll, s_correct, s_w = make_eval_step(graphdef, chunk=chunk)(params, rest, batch)
    assert float(s_nll) == pytest.approx(float((want_nll * w).sum()), rel=1e-5)
    assert float(s_correct) == float((want_correct * w).sum()) and float(s_w) == float(w.sum())
