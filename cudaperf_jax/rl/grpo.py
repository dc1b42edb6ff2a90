"""GRPO pieces, registered by name so an ablation is a config string: advantages, policy losses,
discounted multi-turn returns.

    adv = ADVANTAGES["grpo"](rewards, group_size)      # float32[B]
    loss, aux = POLICY_LOSSES["grpo"](logp, old_logp, ref_logp, adv, mask, cfg)

Shapes: B samples (B = groups x group_size, a group's samples adjacent), L completion positions.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import jax.numpy as jnp

ADVANTAGES: dict[str, Callable] = {}
POLICY_LOSSES: dict[str, Callable] = {}


def register_advantage_fn(name: str):
    def deco(fn):
        ADVANTAGES[name] = fn
        return fn
    return deco


def register_policy_loss_fn(name: str):
    def deco(fn):
        POLICY_LOSSES[name] = fn
        return fn
    return deco


@dataclasses.dataclass(frozen=True)
class LossConfig:
    clip_eps: float = 0.2          # PPO ratio clip (lower); clip_eps_high defaults to the same
    clip_eps_high: float | None = None
    kl_beta: float = 0.04          # weight of the k3 KL estimate against the reference policy
    aggregation: str = "token_mean"  # token_mean (over all valid tokens) | sequence_mean

    def __post_init__(self):
        if self.aggregation not in ("token_mean", "sequence_mean"):
            raise ValueError("aggregation must be token_mean or sequence_mean")
        if self.clip_eps <= 0 or self.kl_beta < 0:
            raise ValueError("need clip_eps > 0 and kl_beta >= 0")


def _groups(rewards: jnp.ndarray, group_size: int) -> jnp.ndarray:
    if rewards.shape[0] % group_size:
        raise ValueError(f"batch {rewards.shape[0]} is not a multiple of group_size {group_size}")
    return rewards.reshape(-1, group_size)


@register_advantage_fn("grpo")
def grpo_advantages(rewards: jnp.ndarray, group_size: int, eps: float = 1e-6) -> jnp.ndarray:
    """(r - group mean) / (group std + eps): float32[B] from rewards float32[B]."""
    g = _groups(rewards.astype(jnp.float32), group_size)
    return ((g - g.mean(1, keepdims=True)) / (g.std(1, keepdims=True) + eps)).reshape(-1)


@register_advantage_fn("dr_grpo")
def dr_grpo_advantages(rewards: jnp.ndarray, group_size: int) -> jnp.ndarray:
    """r - group mean (no std normalisation, Dr. GRPO)."""
    g = _groups(rewards.astype(jnp.float32), group_size)
    return (g - g.mean(1, keepdims=True)).reshape(-1)


@register_advantage_fn("rloo")
def rloo_advantages(rewards: jnp.ndarray, group_size: int) -> jnp.ndarray:
    """r - mean of the other samples of the group (leave-one-out baseline)."""
    g = _groups(rewards.astype(jnp.float32), group_size)
    if group_size < 2:
        raise ValueError("rloo needs group_size >= 2")
    others = (g.sum(1, keepdims=True) - g) / (group_size - 1)
    return (g - others).reshape(-1)


def discounted_returns(rewards: jnp.ndarray, gamma: float) -> jnp.ndarray:
    """Per-turn returns G_t = sum_{k>=t} gamma^(k-t) r_k: float32[B, T] from rewards float32[B, T]."""
    def step(carry, r):
        g = r + gamma * carry
        return g, g
    import jax
    _, out = jax.lax.scan(step, jnp.zeros(rewards.shape[0], jnp.float32), rewards.T[::-1].astype(jnp.float32))
    return out[::-1].T


def _aggregate(per_token: jnp.ndarray, mask: jnp.ndarray, how: str) -> jnp.ndarray:
    mask = mask.astype(jnp.float32)
    if how == "token_mean":
        return (per_token * mask).sum() / jnp.maximum(mask.sum(), 1.0)
    per_seq = (per_token * mask).sum(1) / jnp.maximum(mask.sum(1), 1.0)
    return per_seq.mean()


@register_policy_loss_fn("grpo")
def grpo_loss(logp, old_logp, ref_logp, advantages, mask, cfg: LossConfig = LossConfig()):
    """Clipped surrogate + beta * KL(k3) to the reference; all inputs float32[B, L] except
    advantages float32[B]. Returns (scalar loss, dict of scalar diagnostics)."""
    ratio = jnp.exp(logp - old_logp)
    adv = advantages[:, None]
    hi = cfg.clip_eps if cfg.clip_eps_high is None else cfg.clip_eps_high
    surrogate = jnp.minimum(ratio * adv, jnp.clip(ratio, 1 - cfg.clip_eps, 1 + hi) * adv)
    log_r = ref_logp - logp
    kl = jnp.exp(log_r) - log_r - 1.0                      # k3 estimator, >= 0
    per_token = -surrogate + cfg.kl_beta * kl
    loss = _aggregate(per_token, mask, cfg.aggregation)
    m = mask.astype(jnp.float32)
    n = jnp.maximum(m.sum(), 1.0)
    clipped = ((ratio < 1 - cfg.clip_eps) | (ratio > 1 + hi)).astype(jnp.float32)
    return loss, {"kl": (kl * m).sum() / n, "clip_frac": (clipped * m).sum() / n,
                  "ratio_mean": (ratio * m).sum() / n}


@register_policy_loss_fn("reinforce")
def reinforce_loss(logp, old_logp, ref_logp, advantages, mask, cfg: LossConfig = LossConfig()):
    """Plain policy gradient -A * log p (with the same KL term), for ablations."""
    log_r = ref_logp - logp
    kl = jnp.exp(log_r) - log_r - 1.0
    per_token = -advantages[:, None] * logp + cfg.kl_beta * kl
    m = mask.astype(jnp.float32)
    return _aggregate(per_token, mask, cfg.aggregation), {"kl": (kl * m).sum() / jnp.maximum(m.sum(), 1.0)}


def multi_turn_advantages(rewards, gamma: float = 0.4, estimator: str = "grpo", judged=None):
    """Returns and advantages across turns, normalised per task AND turn.

    rewards float32[T, K, G] (turn, task, sample: sample g of task k is one chain of T turns) ->
    (returns float32[T, K, G] with G_t = sum_{s>=t} gamma^(s-t) r_s along each chain,
     advantages float32[T, K, G] from ADVANTAGES[estimator] over each (turn, task) group of G returns,
     equal_groups int: (turn, task) groups whose G returns are all equal - they carry no gradient).
    judged bool[T, K, G] (optional): False for samples the harness could not judge (`unchecked`); they take
    no part in their group's baseline (their return is replaced by the mean of the judged ones) and get
    advantage 0, so a harness failure neither rewards nor punishes a sample.
    """
    import numpy as np
    if estimator not in ADVANTAGES:
        raise ValueError(f"unknown advantage estimator {estimator!r}; registered: {sorted(ADVANTAGES)}")
    r = jnp.asarray(rewards, jnp.float32)
    t, k, g = r.shape
    chains = jnp.transpose(r, (1, 2, 0)).reshape(k * g, t)
    returns = jnp.transpose(discounted_returns(chains, gamma).reshape(k, g, t), (2, 0, 1))
    ret = np.asarray(returns)
    if judged is not None:
        ok = np.asarray(judged, bool).reshape(t, k, g)
        n = ok.sum(2, keepdims=True)
        mean = (ret * ok).sum(2, keepdims=True) / np.maximum(n, 1)
        ret = np.where(ok, ret, mean).astype(np.float32)
    adv = ADVANTAGES[estimator](jnp.asarray(ret).reshape(-1), g).reshape(t, k, g)
    if judged is not None:
        adv = jnp.where(jnp.asarray(ok), adv, 0.0)
    equal = int((np.ptp(ret, axis=2) < 1e-6).sum())
    return returns, adv, equal
