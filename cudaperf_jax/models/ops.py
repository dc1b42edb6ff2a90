"""Small pieces of the decoder."""
from __future__ import annotations

import jax
import jax.numpy as jnp


def rms_norm(x: jax.Array, scale: jax.Array, eps: float, dtype) -> jax.Array:
    """x / rms(x) * scale over the last axis: statistics in float32, then rounded to `dtype` and scaled there
    (as transformers' RMSNorm)."""
    xf = x.astype(jnp.float32)
    xf = xf * jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1, keepdims=True) + eps)
    return xf.astype(dtype) * scale.astype(dtype)
