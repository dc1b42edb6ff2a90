"""Rotary position embeddings with the scaling variants Llama and Qwen checkpoints use.

Frequencies follow transformers' `modeling_rope_utils` exactly (default, linear, llama3, yarn).
`dynamic` (NTK) equals `default` for sequences within `original_max_position_embeddings`, which is
the only regime the sampler runs in; longer sequences would need the rescaled base and are refused.
Rotation is the "rotate half" (NeoX) convention of transformers' Llama/Qwen code.
"""
from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

from cudaperf_jax.models.config import ConfigError, RopeConfig


def inv_frequencies(rope: RopeConfig, head_dim: int, max_position_embeddings: int) -> tuple[np.ndarray, float]:
    """Inverse frequencies (float32[head_dim // 2]) and the attention factor that scales cos/sin."""
    if rope.partial_rotary_factor != 1.0:
        raise ConfigError("partial_rotary_factor != 1 is not supported; use a Llama/Qwen checkpoint without it")
    dim = head_dim
    base = rope.theta
    exps = np.arange(0, dim, 2, dtype=np.int64).astype(np.float32) / dim
    inv = (1.0 / (base ** exps.astype(np.float64))).astype(np.float32)
    t = rope.type
    if t in ("default", "dynamic"):
        return inv, 1.0
    if t == "linear":
        return (inv / np.float32(rope.factor)).astype(np.float32), 1.0
    if t == "llama3":
        factor, lo, hi = rope.factor, rope.low_freq_factor, rope.high_freq_factor
        old = rope.original_max_position_embeddings
        low_wl, high_wl = old / lo, old / hi
        wavelen = 2 * math.pi / inv
        scaled = np.where(wavelen > low_wl, inv / factor, inv)
        smooth = (old / wavelen - lo) / (hi - lo)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < high_wl) & ~(wavelen > low_wl)
        return np.where(medium, smoothed, scaled).astype(np.float32), 1.0
    if t == "yarn":
        return _yarn(rope, dim, max_position_embeddings)
    raise ConfigError(f"rope_type {t!r} is not supported")


def _yarn(rope: RopeConfig, dim: int, max_pos: int) -> tuple[np.ndarray, float]:
    base = rope.theta
    orig = rope.original_max_position_embeddings or max_pos
    factor = rope.factor if rope.factor is not None else max_pos / orig

    def mscale(scale, m=1.0):
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    att = rope.attention_factor
    if att is None:
        if rope.mscale and rope.mscale_all_dim:
            att = float(mscale(factor, rope.mscale) / mscale(factor, rope.mscale_all_dim))
        else:
            att = mscale(factor)
    beta_fast, beta_slow = rope.beta_fast or 32, rope.beta_slow or 1

    def corr_dim(n_rot):
        return (dim * math.log(orig / (n_rot * 2 * math.pi))) / (2 * math.log(base))

    low, high = corr_dim(beta_fast), corr_dim(beta_slow)
    if rope.truncate is None or rope.truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(dim // 2, dtype=np.float32) - low) / (high - low), 0, 1)
    pos_freqs = (base ** (np.arange(0, dim, 2).astype(np.float32) / dim)).astype(np.float32)
    extra, inter = 1.0 / pos_freqs, 1.0 / (factor * pos_freqs)
    w = 1 - ramp
    return (inter * (1 - w) + extra * w).astype(np.float32), float(att)


def cos_sin(positions: jnp.ndarray, inv_freq: np.ndarray, attention_factor: float) -> tuple[jnp.ndarray, jnp.ndarray]:
    """cos and sin, float32[B, T, head_dim], for int32 positions[B, T]."""
    freqs = positions.astype(jnp.float32)[..., None] * jnp.asarray(inv_freq)[None, None, :]
    emb = jnp.concatenate([freqs, freqs], axis=-1)
    return jnp.cos(emb) * attention_factor, jnp.sin(emb) * attention_factor


def apply_rope(x: jnp.ndarray, cos: jnp.ndarray, sin: jnp.ndarray) -> jnp.ndarray:
    """Rotates x[B, T, H, D] by cos/sin[B, T, D] (computed in float32, returned in x's dtype)."""
    xf = x.astype(jnp.float32)
    half = x.shape[-1] // 2
    rot = jnp.concatenate([-xf[..., half:], xf[..., :half]], axis=-1)
    out = xf * cos[:, :, None, :] + rot * sin[:, :, None, :]
    return out.astype(x.dtype)
