"""The SFT update as one pure, jitted function of (params, optimizer state, batch), and the eval step.

    graphdef, params, others = split_model(model)
    optimizer, schedule = make_optimizer(cfg.optim, cfg.steps)
    step = make_train_step(graphdef, others, optimizer, remat=True)
    params, opt_state, metrics = step(params, opt_state, batch)        # params/opt_state donated

A batch is a packed one (cudaperf_jax.sft.packing), all [B, L]: tokens int32, positions int32,
segment_ids int32 (0 = padding), targets int32 (next token of the same example), weights float32
(1 on predictions of response tokens). The loss is the mean negative log-likelihood over weighted tokens.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from cudaperf_jax.training import split_model
from cudaperf_jax.sft.config import OptimConfig

__all__ = ["make_eval_step", "make_optimizer", "make_train_step", "split_model", "token_nll"]


def token_nll(model, batch: dict, remat: bool = False) -> tuple[jax.Array, jax.Array]:
    """(nll float32[B, L] of batch['targets'] under the model, correct bool[B, L]: argmax == target)."""
    logits = model(batch["tokens"], batch["positions"], segment_ids=batch["segment_ids"], remat=remat)
    logits = logits.astype(jnp.float32)
    target_logit = jnp.take_along_axis(logits, batch["targets"][..., None], axis=-1)[..., 0]
    nll = jax.nn.logsumexp(logits, axis=-1) - target_logit
    return nll, jnp.argmax(logits, axis=-1) == batch["targets"]


def make_schedule(cfg: OptimConfig, total_steps: int) -> optax.Schedule:
    """Learning rate of each step: linear warmup to the peak, then cosine / linear decay or constant."""
    peak, warm = cfg.learning_rate, min(cfg.warmup_steps, max(total_steps - 1, 0))
    end = peak * cfg.end_lr_fraction
    decay = max(total_steps - warm, 1)
    if cfg.schedule == "cosine":
        after = optax.cosine_decay_schedule(peak, decay, alpha=cfg.end_lr_fraction)
    elif cfg.schedule == "linear":
        after = optax.linear_schedule(peak, end, decay)
    else:
        after = optax.constant_schedule(peak)
    if warm == 0:
        return after
    return optax.join_schedules([optax.linear_schedule(peak / warm, peak, warm - 1), after], [warm])


def make_optimizer(cfg: OptimConfig, total_steps: int) -> tuple[optax.GradientTransformation, optax.Schedule]:
    """(AdamW with the schedule, weight decay on matrices only, global-norm clipping; the schedule)."""
    schedule = make_schedule(cfg, total_steps)
    adam = optax.adamw(schedule, b1=cfg.b1, b2=cfg.b2, eps=cfg.eps, weight_decay=cfg.weight_decay,
                       mask=lambda p: jax.tree.map(lambda x: x.ndim >= 2, p))
    return (optax.chain(optax.clip_by_global_norm(cfg.grad_clip), adam) if cfg.grad_clip else adam), schedule


def make_train_step(graphdef, others, optimizer: optax.GradientTransformation, remat: bool = False):
    """A jitted `(params, opt_state, batch) -> (params, opt_state, metrics)` with donated state.

    metrics: loss (mean nll over weighted tokens), accuracy (of the argmax there), grad_norm (before
    clipping), tokens (weighted tokens in the batch); float32 scalars."""
    def step(params, opt_state, batch):
        w = batch["weights"]
        count = jnp.maximum(w.sum(), 1.0)

        def objective(p):
            nll, correct = token_nll(nnx.merge(graphdef, p, others), batch, remat)
            return (nll * w).sum() / count, (correct * w).sum() / count
        (loss, acc), grads = jax.value_and_grad(objective, has_aux=True)(params)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        return params, opt_state, {"loss": loss, "accuracy": acc, "grad_norm": optax.global_norm(grads),
                                   "tokens": w.sum()}

    compiled = {}

    def run(params, opt_state, batch):
        # Pin the outputs to the inputs' placement, so every call hits the same executable (as rl.train_step).
        if "fn" not in compiled:
            shardings = jax.tree.map(lambda x: x.sharding, (params, opt_state))
            compiled["fn"] = jax.jit(step, donate_argnums=(0, 1), out_shardings=(*shardings, None))
        return compiled["fn"](params, opt_state, batch)

    return run


def make_eval_step(graphdef, others):
    """A jitted `(params, batch) -> (sum of weighted nll, sum of weighted correct, sum of weights)`, float32."""
    @jax.jit
    def fn(params, batch):
        nll, correct = token_nll(nnx.merge(graphdef, params, others), batch)
        w = batch["weights"]
        return (nll * w).sum(), (correct * w).sum(), w.sum()
    return fn
