"""Training the ranker: a Bradley-Terry loss and one pure, jitted Optax step.

    step = make_train_step(graphdef, frozen, optimizer)
    params, opt_state, metrics = step(params, opt_state, data, batch)      # params / opt_state donated

data (device arrays of every implementation row, not donated): x float32[N, F], tokens int32[N, L],
mask bool[N, L]. batch: win, lose int32[B] (rows), w float32[B] (pair weights).
loss = sum_b w_b * softplus(-(s(win_b) - s(lose_b))) / sum_b w_b, i.e. -log sigmoid of the margin.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from cudaperf_jax.training import OptimConfig
from cudaperf_jax.training import make_optimizer as build_optimizer


def bradley_terry(s_win: jax.Array, s_lose: jax.Array, w: jax.Array) -> jax.Array:
    """Weighted mean of -log sigmoid(s_win - s_lose): float32[] from float32[B] x3."""
    return jnp.sum(w * jax.nn.softplus(s_lose - s_win)) / jnp.maximum(jnp.sum(w), 1e-9)


def make_optimizer(lr: float, steps: int, weight_decay: float = 0.01, warmup: int = 20, clip: float = 1.0):
    """The training core's optimizer (training.make_optimizer): AdamW (b2 0.999) with a warmup of min(warmup, steps/10)
    steps, cosine decay to 5% of lr at `steps`, weight decay on matrices, global-norm clipping at `clip`."""
    cfg = OptimConfig(learning_rate=lr, schedule="cosine", warmup_steps=min(warmup, max(1, steps // 10)),
                      end_lr_fraction=0.05, weight_decay=weight_decay, b1=0.9, b2=0.999, eps=1e-8, grad_clip=clip)
    return build_optimizer(cfg, max(steps, 2))[0]


def split(model, filt):
    """(graphdef, trained params, everything else)."""
    return nnx.split(model, filt, ...)


def scores_fn(graphdef, params, frozen, x, tokens, mask):
    return nnx.merge(graphdef, params, frozen)(x, tokens, mask)


def make_train_step(graphdef, frozen, optimizer: optax.GradientTransformation):
    """A jitted `(params, opt_state, data, batch) -> (params, opt_state, metrics)`; params, opt_state donated."""
    def step(params, opt_state, data, batch):
        rows = jnp.concatenate([batch["win"], batch["lose"]])

        def objective(p):
            s = scores_fn(graphdef, p, frozen, data["x"][rows], data["tokens"][rows], data["mask"][rows])
            sw, sl = jnp.split(s, 2)
            return bradley_terry(sw, sl, batch["w"]), jnp.mean((sw > sl).astype(jnp.float32))
        (loss, acc), grads = jax.value_and_grad(objective, has_aux=True)(params)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        return params, opt_state, {"loss": loss, "pair_accuracy": acc, "grad_norm": optax.global_norm(grads)}
    return jax.jit(step, donate_argnums=(0, 1))


def make_score_fn(graphdef, frozen):
    """A jitted `(params, x float32[B, F], tokens int32[B, L], mask bool[B, L]) -> float32[B]`."""
    @jax.jit
    def fn(params, x, tokens, mask):
        return scores_fn(graphdef, params, frozen, x, tokens, mask)
    return fn


def score_rows(score_fn, params, data: dict, rows: np.ndarray, batch: int = 256) -> np.ndarray:
    """float32 [len(rows)] scores of data rows, in fixed-size batches (the last one padded)."""
    out = []
    for k in range(0, len(rows), batch):
        r = np.asarray(rows[k:k + batch])
        pad = np.concatenate([r, np.full(batch - len(r), r[0] if len(r) else 0)])
        s = score_fn(params, data["x"][pad], data["tokens"][pad], data["mask"][pad])
        out.append(np.asarray(s)[:len(r)])
    return np.concatenate(out) if out else np.zeros(0, np.float32)


def set_feature_stats(model, x_train: np.ndarray):
    """Stores the mean / std of the training rows' features in the model (std 1 where a column is constant)."""
    std = x_train.std(0)
    model.mean.value = jnp.asarray(x_train.mean(0), jnp.float32)
    model.std.value = jnp.asarray(np.where(std < 1e-3, 1.0, std), jnp.float32)
