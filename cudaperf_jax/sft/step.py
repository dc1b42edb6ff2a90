"""The SFT objective for the training core, and the eval step.

    loss_fn = token_nll_loss(remat=True, attention=AttentionConfig())   # for training.make_train_step
    eval_step = make_eval_step(graphdef, attention=AttentionConfig())   # (params, rest, batch) -> sums

A batch is a packed one (cudaperf_jax.sft.packing), all [B, L]: tokens int32, positions int32,
segment_ids int32 (0 = padding), targets int32 (next token of the same example), weights float32
(1 on predictions of response tokens). The loss is the mean negative log-likelihood over weighted tokens of the
whole step (training.step divides the summed nll by the summed weights once, over all micro-batches).

The LM head runs over `chunk` positions at a time (models.lm_head: float32 logits [B, L, V] never exist at once) and
the attention is `attention`'s (models.attention: a fused kernel never builds the [B, H, L, L] scores).
"""
from __future__ import annotations

import jax
from flax import nnx

from cudaperf_jax.models.attention import AttentionConfig
from cudaperf_jax.models.lm_head import DEFAULT_CHUNK, target_logprobs
from cudaperf_jax.training.step import DROPOUT_RNG

__all__ = ["make_eval_step", "token_nll", "token_nll_loss"]


def token_nll(model, batch: dict, remat: bool = False, attention: AttentionConfig | None = None,
              chunk: int = DEFAULT_CHUNK) -> tuple[jax.Array, jax.Array]:
    """(nll float32[B, L] of batch['targets'] under the model, correct bool[B, L]: argmax == target); the LoRA
    adapters' dropout with batch[DROPOUT_RNG] when the train step hands one (training.step); attention: the
    cache-free attention (None: XLA's)."""
    h, _ = model.hidden(batch["tokens"], batch["positions"], segment_ids=batch["segment_ids"], remat=remat,
                        dropout_rng=batch.get(DROPOUT_RNG), attention=attention)
    logp, correct = target_logprobs(model, h, batch["targets"], chunk, hits=True)
    return -logp, correct


def token_nll_loss(remat: bool = False, attention: AttentionConfig | None = None, chunk: int = DEFAULT_CHUNK):
    """loss_fn(model, micro_batch) -> (sum of weighted nll, sum of weights, {"accuracy": (weighted correct, weights)})."""
    def loss_fn(model, batch):
        nll, correct = token_nll(model, batch, remat, attention, chunk)
        w = batch["weights"]
        return (nll * w).sum(), w.sum(), {"accuracy": ((correct * w).sum(), w.sum())}
    return loss_fn


def make_eval_step(graphdef, attention: AttentionConfig | None = None, chunk: int = DEFAULT_CHUNK):
    """A jitted `(params, rest, batch) -> (sum of weighted nll, sum of weighted correct, sum of weights)`, float32."""
    @jax.jit
    def fn(params, rest, batch):
        nll, correct = token_nll(nnx.merge(graphdef, params, rest), batch, attention=attention, chunk=chunk)
        w = batch["weights"]
        return (nll * w).sum(), (correct * w).sum(), w.sum()
    return fn
