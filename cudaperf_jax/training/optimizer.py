"""The one optimizer of every training stage (SFT, RL, the ranker): AdamW on a warmup + decay schedule, weight decay
masked to matrices, global-norm clipping.

    optimizer, schedule = make_optimizer(OptimConfig(learning_rate=5e-5), total_steps=300)
    schedule(step)        # the learning rate of an optimizer step (float32[])
"""
from __future__ import annotations

import jax
import optax

from cudaperf_jax.training.config import OptimConfig


def make_schedule(cfg: OptimConfig, total_steps: int) -> optax.Schedule:
    """Learning rate of each step: linear warmup from peak / warmup_steps to the peak, then cosine / linear decay to
    peak * end_lr_fraction at `total_steps`, or constant."""
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


def matrices(params):
    """The weight-decay mask: True on parameters of ndim >= 2 (matrices, embeddings), False on norms and biases."""
    return jax.tree.map(lambda x: x.ndim >= 2, params)


def make_optimizer(cfg: OptimConfig, total_steps: int) -> tuple[optax.GradientTransformation, optax.Schedule]:
    """(the optimizer: global-norm clipping when cfg.grad_clip > 0, then AdamW with the schedule and weight decay on
    matrices; the schedule). The optimizer's state mirrors the trained parameters only (see training.step)."""
    schedule = make_schedule(cfg, total_steps)
    adam = optax.adamw(schedule, b1=cfg.b1, b2=cfg.b2, eps=cfg.eps, weight_decay=cfg.weight_decay, mask=matrices)
    return (optax.chain(optax.clip_by_global_norm(cfg.grad_clip), adam) if cfg.grad_clip else adam), schedule
