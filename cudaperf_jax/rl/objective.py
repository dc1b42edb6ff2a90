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
import jax.numpy as jnp
from flax import nnx

from cudaperf_jax.rl.grpo import POLICY_LOSSES, GRPOConfig
from cudaperf_jax.training.step import DROPOUT_RNG

TRAIN_KEYS = ("tokens", "positions", "kv_mask", "loss_mask", "old_logp", "ref_logp", "advantages")


def sequence_logprobs(model, tokens: jax.Array, positions: jax.Array, kv_mask: jax.Array,
                      chunk: int = 256, remat: bool = True, dropout_rng: jax.Array | None = None) -> jax.Array:
    """log p(tokens[:, t+1] | tokens[:, :t+1]): float32[B, L-1].

    remat: recompute each layer's activations in the backward pass (a layer's attention scores are [B, H, L, L]:
    kept for every layer they dominate the memory of a long multi-turn sequence). The LM head and the log-normaliser
    run over `chunk` positions at a time, each chunk rematerialised in the backward pass, so float32 logits
    [B, L, V] (V ~ 50-150k) never exist at once: memory for the head is O(B * chunk * V) instead of O(B * L * V),
    with the same values as a log_softmax over all of them. dropout_rng: the LoRA adapters' dropout key of a train
    step (None: none)."""
    h, _ = model.hidden(tokens, positions, kv_mask=kv_mask, remat=remat, dropout_rng=dropout_rng)
    h, targets = h[:, :-1], tokens[:, 1:]
    b, t, d = h.shape
    chunk = max(1, min(chunk, t))
    n = -(-t // chunk)
    pad = n * chunk - t
    hs = jnp.pad(h, ((0, 0), (0, pad), (0, 0))).reshape(b, n, chunk, d).swapaxes(0, 1)
    ts = jnp.pad(targets, ((0, 0), (0, pad))).reshape(b, n, chunk).swapaxes(0, 1)

    @jax.checkpoint
    def one(args):
        hc, tc = args
        logits = model.logits(hc).astype(jnp.float32)                       # [B, chunk, V]
        picked = jnp.take_along_axis(logits, tc[..., None], axis=-1)[..., 0]
        return picked - jax.nn.logsumexp(logits, axis=-1)

    out = jax.lax.map(one, (hs, ts))                                         # [n, B, chunk]
    return out.swapaxes(0, 1).reshape(b, n * chunk)[:, :t]


def grpo_objective(cfg: GRPOConfig, remat: bool = True):
    """loss_fn(model, micro_batch) -> (total, weight, aux) of the registered policy loss cfg.loss (training.step's
    contract: sums over the micro-batch, divided by the step's total weight once)."""
    loss = POLICY_LOSSES[cfg.loss]

    def loss_fn(model, mb):
        logp = sequence_logprobs(model, mb["tokens"], mb["positions"], mb["kv_mask"], remat=remat,
                                 dropout_rng=mb.get(DROPOUT_RNG))
        return loss(logp, mb["old_logp"], mb["ref_logp"], mb["advantages"], mb["loss_mask"], cfg)
    return loss_fn


def make_logprob_fn(graphdef):
    """A jitted `(params, rest, tokens, positions, kv_mask) -> float32[B, L-1]` (old / reference log-probs); the
    weights are arguments, so one program serves the policy and its reference."""
    @jax.jit
    def fn(params, rest, tokens, positions, kv_mask):
        return sequence_logprobs(nnx.merge(graphdef, params, rest), tokens, positions, kv_mask, remat=False)
    return fn
