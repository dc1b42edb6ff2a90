"""GRPO pieces, registered by name so an ablation is a config string: advantages, policy losses,
discounted multi-turn returns; and GRPOConfig, the `grpo` section of an RL config.

    adv = ADVANTAGES["grpo"](rewards, group_size)                          # float32[B]
    total, weight, aux = POLICY_LOSSES["grpo"](logp, old_logp, ref_logp, adv, mask, cfg)
    loss, diagnostics = mean_loss("grpo", logp, old_logp, ref_logp, adv, mask, cfg)   # total / weight

Shapes: B samples (B = groups x group_size, a group's samples adjacent), L completion positions. A policy loss
returns sums (the form training.step accumulates over micro-batches): total = the aggregated loss terms, weight =
their count (tokens for token_mean, sequences with tokens for sequence_mean), aux = {name: (sum, count)}.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax.numpy as jnp

from cudaperf_jax.training.config import OptimConfig

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
class GRPOConfig:
    """Advantages, the policy loss and its optimizer (the `grpo` section of rl.config.RLConfig)."""
    advantage: str = "grpo"          # advantage estimator: grpo | dr_grpo | rloo (ADVANTAGES)
    loss: str = "grpo"               # policy loss: grpo (clipped surrogate) | reinforce (POLICY_LOSSES)
    aggregation: str = "token_mean"  # token_mean (over every completion token of the step) | sequence_mean
    gamma: float = 0.4               # discount of later turns' rewards in a turn's return
    clip_eps: float = 0.2            # PPO ratio clip, lower side (1 - clip_eps)
    clip_eps_high: float = 0.28      # upper side (1 + clip_eps_high); 0 = clip_eps
    kl_beta: float = 0.02            # weight of the k3 KL estimate to the reference (start) policy; 0 = no reference
    lr: float = 1e-6                 # AdamW learning rate (constant)
    weight_decay: float = 0.0        # AdamW weight decay, on matrices
    max_grad_norm: float = 1.0       # global-norm gradient clipping; 0 = off
    micro_batch: int = 16            # sequences per micro-batch (the step accumulates their gradients)
    epochs: int = 1                  # optimizer updates per step over the same rollouts

    def __post_init__(self):
        if self.advantage not in ADVANTAGES:
            raise ValueError(f"advantage={self.advantage!r}: choose one of {', '.join(sorted(ADVANTAGES))}")
        if self.loss not in POLICY_LOSSES:
            raise ValueError(f"loss={self.loss!r}: choose one of {', '.join(sorted(POLICY_LOSSES))}")
        if self.aggregation not in ("token_mean", "sequence_mean"):
            raise ValueError(f"aggregation={self.aggregation!r}: choose token_mean or sequence_mean")
        if not 0 <= self.gamma <= 1:
            raise ValueError(f"gamma={self.gamma}: must be in [0, 1]")
        if not self.clip_eps > 0 or self.clip_eps_high < 0 or self.kl_beta < 0:
            raise ValueError("need clip_eps > 0, clip_eps_high >= 0 (0: clip_eps) and kl_beta >= 0")
        if not self.lr > 0 or self.weight_decay < 0 or self.max_grad_norm < 0:
            raise ValueError("need lr > 0, weight_decay >= 0 and max_grad_norm >= 0 (0: off)")
        if self.micro_batch < 1 or self.epochs < 1:
            raise ValueError("micro_batch and epochs must be at least 1")

    @property
    def clip_high(self) -> float:
        return self.clip_eps_high or self.clip_eps

    def optim(self) -> OptimConfig:
        """The optimizer of the RL update: AdamW at the constant rate lr (b2 0.999), clipped at max_grad_norm."""
        return OptimConfig(learning_rate=self.lr, schedule="constant", warmup_steps=0, weight_decay=self.weight_decay,
                           b1=0.9, b2=0.999, eps=1e-8, grad_clip=self.max_grad_norm)


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


def _aggregate(per_token: jnp.ndarray, mask: jnp.ndarray, how: str) -> tuple[jnp.ndarray, jnp.ndarray]:
    """(sum, weight) of per-token terms float32[B, L] under mask: token_mean sums over tokens (weight: tokens),
    sequence_mean sums each sequence's token mean (weight: sequences with at least one token)."""
    mask = mask.astype(jnp.float32)
    if how == "token_mean":
        return (per_token * mask).sum(), mask.sum()
    n = mask.sum(1)
    per_seq = (per_token * mask).sum(1) / jnp.maximum(n, 1.0)
    return per_seq.sum(), (n > 0).astype(jnp.float32).sum()


def _token_sum(x: jnp.ndarray, mask: jnp.ndarray) -> tuple[jnp.ndarray, jnp.ndarray]:
    m = mask.astype(jnp.float32)
    return (x * m).sum(), m.sum()


def _k3(logp, ref_logp):
    log_r = ref_logp - logp
    return jnp.exp(log_r) - log_r - 1.0                       # k3 estimator of KL(policy || ref), >= 0


@register_policy_loss_fn("grpo")
def grpo_loss(logp, old_logp, ref_logp, advantages, mask, cfg: GRPOConfig | None = None):
    """Clipped surrogate + kl_beta * KL(k3) to the reference; inputs float32[B, L] except advantages float32[B].
    Returns (total, weight, {kl, clip_frac, ratio_mean: (token sum, tokens)}); cfg None: GRPOConfig()."""
    cfg = cfg or GRPOConfig()
    ratio = jnp.exp(logp - old_logp)
    adv = advantages[:, None]
    surrogate = jnp.minimum(ratio * adv, jnp.clip(ratio, 1 - cfg.clip_eps, 1 + cfg.clip_high) * adv)
    kl = _k3(logp, ref_logp)
    total, weight = _aggregate(-surrogate + cfg.kl_beta * kl, mask, cfg.aggregation)
    clipped = ((ratio < 1 - cfg.clip_eps) | (ratio > 1 + cfg.clip_high)).astype(jnp.float32)
    return total, weight, {"kl": _token_sum(kl, mask), "clip_frac": _token_sum(clipped, mask),
                           "ratio_mean": _token_sum(ratio, mask)}


@register_policy_loss_fn("reinforce")
def reinforce_loss(logp, old_logp, ref_logp, advantages, mask, cfg: GRPOConfig | None = None):
    """Plain policy gradient -A * log p (with the same KL term), for ablations."""
    cfg = cfg or GRPOConfig()
    kl = _k3(logp, ref_logp)
    total, weight = _aggregate(-advantages[:, None] * logp + cfg.kl_beta * kl, mask, cfg.aggregation)
    return total, weight, {"kl": _token_sum(kl, mask)}


def mean_loss(name: str, logp, old_logp, ref_logp, advantages, mask, cfg: GRPOConfig | None = None):
    """(loss float32[], {diagnostic: float32[]}) of one batch: the registered loss's sums divided by their weights."""
    total, weight, aux = POLICY_LOSSES[name](logp, old_logp, ref_logp, advantages, mask, cfg)
    return total / jnp.maximum(weight, 1.0), {k: s / jnp.maximum(w, 1.0) for k, (s, w) in aux.items()}


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
