"""The policy update as one pure, jitted function of (params, optimizer state, batch).

    step = make_train_step(graphdef, others, optax.adamw(1e-6), loss="grpo")
    params, opt_state, metrics = step(params, opt_state, batch)      # params/opt_state donated

A batch (all batch-major, B sequences of length L = prompt + completion, left padded):
    tokens int32[B, L], positions int32[B, L], kv_mask bool[B, L] (real tokens),
    loss_mask float32[B, L-1] (1 on completion tokens, aligned with the predicted token tokens[:, 1:]),
    old_logp, ref_logp float32[B, L-1] (sampler / reference log-probabilities of tokens[:, 1:]),
    advantages float32[B].
On a mesh, put params with `models.sharding.shard_model` and the batch with `shard_batch`: jit keeps the
placement (parameters and optimizer state FSDP-sharded, batch over data x fsdp).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from cudaperf_jax.models.sharding import batch_sharding
from cudaperf_jax.rl.grpo import POLICY_LOSSES, LossConfig
from cudaperf_jax.training import split_model  # noqa: F401 - re-exported for callers of this module


def sequence_logprobs(model, tokens: jax.Array, positions: jax.Array, kv_mask: jax.Array,
                      chunk: int = 256, remat: bool = True) -> jax.Array:
    """log p(tokens[:, t+1] | tokens[:, :t+1]): float32[B, L-1].

    remat: recompute each layer's activations in the backward pass (a layer's attention scores are [B, H, L, L]:
    kept for every layer they dominate the memory of a long multi-turn sequence). The LM head and the log-normaliser run over `chunk` positions at a time, each chunk rematerialised in the
    backward pass, so float32 logits [B, L, V] (V ~ 50-150k) never exist at once: memory for the head is
    O(B * chunk * V) instead of O(B * L * V), with the same values as a log_softmax over all of them."""
    h, _ = model.hidden(tokens, positions, kv_mask=kv_mask, remat=remat)
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


def make_train_step(graphdef, others, optimizer: optax.GradientTransformation, loss: str = "grpo",
                    loss_config: LossConfig = LossConfig()):
    """A jitted `(params, opt_state, batch) -> (params, opt_state, metrics)` with donated state."""
    if loss not in POLICY_LOSSES:
        raise ValueError(f"unknown policy loss {loss!r}; registered: {sorted(POLICY_LOSSES)}")
    loss_fn = POLICY_LOSSES[loss]

    def step(params, opt_state, batch):
        def objective(p):
            model = nnx.merge(graphdef, p, others)
            logp = sequence_logprobs(model, batch["tokens"], batch["positions"], batch["kv_mask"])
            value, aux = loss_fn(logp, batch["old_logp"], batch["ref_logp"], batch["advantages"],
                                 batch["loss_mask"], loss_config)
            return value, aux
        (value, aux), grads = jax.value_and_grad(objective, has_aux=True)(params)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        return params, opt_state, {"loss": value, "grad_norm": optax.global_norm(grads), **aux}

    compiled = {}

    def run(params, opt_state, batch):
        # Pin the outputs to the inputs' placement, so the next call hits the same executable
        # (letting XLA choose would re-shard some leaves and recompile on the second step).
        if "fn" not in compiled:
            shardings = jax.tree.map(lambda x: x.sharding, (params, opt_state))
            compiled["fn"] = jax.jit(step, donate_argnums=(0, 1), out_shardings=(*shardings, None))
        return compiled["fn"](params, opt_state, batch)

    return run


def make_logprob_fn(graphdef, others):
    """A jitted `(params, tokens, positions, kv_mask) -> float32[B, L-1]` (old / reference log-probs)."""
    @jax.jit
    def fn(params, tokens, positions, kv_mask):
        return sequence_logprobs(nnx.merge(graphdef, params, others), tokens, positions, kv_mask)
    return fn


def shard_batch(batch: dict, mesh) -> dict:
    """Places a batch dict on `mesh`, batch dimension over (data, fsdp)."""
    return {k: jax.device_put(v, batch_sharding(mesh, v.shape)) for k, v in batch.items()}


def batch_from_samples(prompt_tokens, prompt_mask, completion_tokens, completion_lengths, advantages,
                       old_logp_completion=None) -> dict:
    """Builds a train batch from sampler output.

    prompt_tokens int32[B, P] (left padded) with prompt_mask bool[B, P]; completion_tokens int32[B, N]
    with completion_lengths int32[B]; advantages float32[B]; old_logp_completion float32[B, N] (the
    sampler's log-probs; None: filled later from a forward pass). Reference log-probs start equal to
    the old ones (callers replace them with the reference model's).
    """
    import numpy as np
    b, p = prompt_tokens.shape
    n = completion_tokens.shape[1]
    comp_mask = np.arange(n)[None, :] < np.asarray(completion_lengths)[:, None]
    tokens = np.concatenate([prompt_tokens, completion_tokens], 1).astype(np.int32)
    kv_mask = np.concatenate([prompt_mask, comp_mask], 1)
    positions = np.maximum(np.cumsum(kv_mask, 1) - 1, 0).astype(np.int32)
    loss_mask = np.zeros((b, p + n - 1), np.float32)
    loss_mask[:, p - 1:] = comp_mask
    old = np.zeros((b, p + n - 1), np.float32)
    if old_logp_completion is not None:
        old[:, p - 1:] = np.where(comp_mask, old_logp_completion, 0.0)
    return {"tokens": tokens, "positions": positions, "kv_mask": kv_mask, "loss_mask": loss_mask,
            "old_logp": old, "ref_logp": old.copy(), "advantages": np.asarray(advantages, np.float32)}
