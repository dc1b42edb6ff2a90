"""The policy's log-probabilities of sampled sequences, and the GRPO objective the training core differentiates.

    loss_fn = grpo_objective(GRPOConfig())                 # for training.make_train_step
    logp = make_logprob_fn(graphdef)(params, rest, tokens, positions, kv_mask)   # float32[B, L-1]

A batch (rl.batch.micro_batches; B sequences of length L = prompt + completion, prompt left padded):
    tokens int32[B, L], positions int32[B, L], kv_mask bool[B, L] (real tokens),
    loss_mask float32[B, L-1] (1 on completion tokens of real rows, aligned with the predicted token tokens[:, 1:]),
    old_logp, ref_logp float32[B, L-1] (sampler / reference log-probabilities of tokens[:, 1:]),
    advantages float32[B].
"""
from __future__ import annotations

import jax
from flax import nnx

from cudaperf_jax.models.attention import AttentionConfig
from cudaperf_jax.models.lm_head import DEFAULT_CHUNK, target_logprobs
from cudaperf_jax.rl.grpo import POLICY_LOSSES, GRPOConfig
from cudaperf_jax.training.step import DROPOUT_RNG

TRAIN_KEYS = ("tokens", "positions", "kv_mask", "loss_mask", "old_logp", "ref_logp", "advantages")


def sequence_logprobs(model, tokens: jax.Array, positions: jax.Array, kv_mask: jax.Array,
                      chunk: int = DEFAULT_CHUNK, remat: bool = True, dropout_rng: jax.Array | None = None,
                      attention: AttentionConfig | None = None) -> jax.Array:
    """log p(tokens[:, t+1] | tokens[:, :t+1]): float32[B, L-1].

    remat: recompute each layer's activations in the backward pass (kept for every layer, a long multi-turn
    sequence's activations dominate the memory). The LM head and the log-normaliser run over `chunk` positions at a
    time (models.lm_head), so float32 logits [B, L, V] (V ~ 50-150k) never exist at once. dropout_rng: the LoRA
    adapters' dropout key of a train step (None: none). attention: the cache-free attention (models.attention; None:
    XLA's, whose scores [B, H, L, L] are float32)."""
    h, _ = model.hidden(tokens, positions, kv_mask=kv_mask, remat=remat, dropout_rng=dropout_rng,
                        attention=attention)
    return target_logprobs(model, h[:, :-1], tokens[:, 1:], chunk)[0]


def grpo_objective(cfg: GRPOConfig, remat: bool = True, attention: AttentionConfig | None = None):
    """loss_fn(model, micro_batch) -> (total, weight, aux) of the registered policy loss cfg.loss (training.step's
    contract: sums over the micro-batch, divided by the step's total weight once); attention: see sequence_logprobs."""
    loss = POLICY_LOSSES[cfg.loss]

    def loss_fn(model, mb):
        logp = sequence_logprobs(model, mb["tokens"], mb["positions"], mb["kv_mask"], remat=remat,
                                 dropout_rng=mb.get(DROPOUT_RNG), attention=attention)
        return loss(logp, mb["old_logp"], mb["ref_logp"], mb["advantages"], mb["loss_mask"], cfg)
    return loss_fn


def make_logprob_fn(graphdef, attention: AttentionConfig | None = None):
    """A jitted `(params, rest, tokens, positions, kv_mask) -> float32[B, L-1]` (old / reference log-probs); the
    weights are arguments, so one program serves the policy and its reference. attention: see sequence_logprobs."""
    @jax.jit
    def fn(params, rest, tokens, positions, kv_mask):
        return sequence_logprobs(nnx.merge(graphdef, params, rest), tokens, positions, kv_mask, remat=False,
                                 attention=attention)
    return fn
