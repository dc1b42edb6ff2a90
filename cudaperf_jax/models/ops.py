"""Small pieces shared by the decoder and its decode kernels (gemv.py, decode_fused.py)."""
from __future__ import annotations

import json
import os

import jax
import jax.numpy as jnp


def rms_norm(x: jax.Array, scale: jax.Array, eps: float, dtype) -> jax.Array:
    """x / rms(x) * scale over the last axis: statistics in float32, then rounded to `dtype` and scaled there
    (as transformers' RMSNorm)."""
    xf = x.astype(jnp.float32)
    xf = xf * jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1, keepdims=True) + eps)
    return xf.astype(dtype) * scale.astype(dtype)


def table_records(packaged: str, override: str | None, var: str, writer: str) -> list[dict]:
    """The records of a packaged JSON table (skipped when absent) followed by those of the file named by
    environment variable `var` (`override`; its absence is a FileNotFoundError saying so; `writer` names
    the script that writes one)."""
    rows = []
    for p in (packaged, override):
        if not p:
            continue
        try:
            with open(p) as f:
                rows += json.load(f)
        except FileNotFoundError:
            if p == override:
                raise FileNotFoundError(f"{var}={p} does not exist; unset it or run {writer} to write one") from None
    return rows


def env_choice(var: str, default: str, choices: tuple[str, ...]) -> str:
    """The lower-cased value of environment variable `var` (default when unset); a value outside `choices`
    is a ValueError naming them."""
    m = os.environ.get(var, default).lower()
    if m not in choices:
        raise ValueError(f"{var}={m!r}: use {', '.join(choices[:-1])} or {choices[-1]}")
    return m
