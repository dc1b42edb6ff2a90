"""Batch-1 matrix-vector products for decode, as a Pallas (Triton) kernel on NVIDIA GPUs.

Batch-1 decode reads every weight once per token, so its speed is HBM bandwidth. This kernel streams the weight in
its stored layout with split-K, so that even the narrow projections give every SM work (XLA's M = 1 dots reached
about 1.5 TB/s on an H200: docs/decode_kernels.md).

    y = gemv(x, w)                     # x [..., K] with one row, w [K, N] -> y [..., N] float32
    y = gemv(x, w, transposed=True)    # w [N, K] (tied embeddings as the LM head)

`use_gemv(x, on)` says whether the decoder takes this path (one row in total, and the decode kernels on: see
config.DecodeKernels). Gradients go through plain matmuls (custom_vjp), so a training step may use it too.
"""
from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

SMS_H200 = 132


class GemvConfig(NamedTuple):
    block_n: int      # output columns per program
    split_k: int      # programs along K (partial sums added after the kernel)
    block_k: int      # K elements per loop step
    num_warps: int = 4
    num_stages: int = 3


def use_gemv(x: jax.Array, on: bool) -> bool:
    """True when the decoder should use the kernel for this activation (one row in total, kernels on)."""
    return on and math.prod(x.shape[:-1]) == 1


def _pow2_divisor(n: int, cap: int) -> int:
    """Largest power of two <= cap dividing n (1 if n is odd)."""
    b = 1
    while b * 2 <= cap and n % (b * 2) == 0:
        b *= 2
    return b


def default_config(k: int, n: int, transposed: bool, sms: int = SMS_H200) -> GemvConfig | None:
    """A split that gives >= 2 programs per SM with >= 16 KB of weights each; None if the shape does not fit."""
    block_n = _pow2_divisor(n, 32 if transposed else 64)
    if block_n < 8:
        return None
    target = 2 * sms
    split = 1
    for s in range(1, 65):
        if k % s or (k // s) % 16:
            continue
        split = s
        if (n // block_n) * s >= target or (k // s) * block_n * 2 < 32 * 1024:
            break
    ks = k // split
    block_k = _pow2_divisor(ks, 512 if transposed else 256)
    if block_k < 16:
        return None
    return GemvConfig(block_n, split, block_k)


def config_for(k: int, n: int, transposed: bool, table: dict | None = None) -> GemvConfig | None:
    """The tilings table's record for this shape if there is one (config.tilings: `gemv` / `gemv_t`), else
    `default_config`."""
    rec = (table or {}).get(("gemv_t" if transposed else "gemv", k, n))
    return GemvConfig(**rec) if rec is not None else default_config(k, n, transposed)


def reduce_loop(n_iter: int, loads, out_len: int, transposed: bool = False, n_out: int = 1):
    """The n_out float32 vectors sum over i < n_iter of x_i @ w_i, where loads(i) = (x_i float32 [block_k],
    (w_i, ...) tiles [block_k, out_len], or [out_len, block_k] when transposed): each K step multiplies a
    float32 tile and reduces it along K (faster on the H200 than reducing after the loop or a tensor-core product:
    docs/decode_kernels.md)."""
    def body(i, acc):
        xv, ws = loads(i)
        if transposed:
            return tuple(a + jnp.sum(w.astype(jnp.float32) * xv[None, :], axis=1) for a, w in zip(acc, ws))
        return tuple(a + jnp.sum(w.astype(jnp.float32) * xv[:, None], axis=0) for a, w in zip(acc, ws))
    return lax.fori_loop(0, n_iter, body, tuple(jnp.zeros((out_len,), jnp.float32) for _ in range(n_out)))


def _kernel(x_ref, w_ref, o_ref, *, block_k: int, transposed: bool):
    from jax.experimental import pallas as pl
    if transposed:   # w block [BN, KS]: rows contiguous along K
        bn, ks = w_ref.shape
    else:            # w block [KS, BN]: BN contiguous columns per row
        ks, bn = w_ref.shape

    def loads(i):
        sl = pl.ds(pl.multiple_of(i * block_k, block_k), block_k)
        return x_ref[sl].astype(jnp.float32), (w_ref[:, sl] if transposed else w_ref[sl, :],)

    o_ref[...] = reduce_loop(ks // block_k, loads, bn, transposed)[0]


def gemv_raw(x: jax.Array, w: jax.Array, *, transposed: bool = False, config: GemvConfig | None = None,
             interpret: bool = False) -> jax.Array:
    """float32 y[N] = x[K] @ w (w [K, N], or [N, K] when transposed). Raises ValueError for a shape
    the kernel cannot tile (the caller falls back to a plain dot)."""
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as plgpu
    n, k = (w.shape if transposed else w.shape[::-1])
    if x.shape != (k,):
        raise ValueError(f"gemv: x has shape {x.shape}, the weight needs ({k},)")
    cfg = config or config_for(k, n, transposed)
    if cfg is None or n % cfg.block_n or k % cfg.split_k or (k // cfg.split_k) % cfg.block_k:
        raise ValueError(f"gemv: no tiling for K={k}, N={n} ({cfg})")
    s, ks, bn = cfg.split_k, k // cfg.split_k, cfg.block_n
    xs = x.reshape(s, ks)
    if transposed:
        ws = w.reshape(n, s, ks)
        w_spec = pl.BlockSpec((bn, None, ks), lambda j, i: (j, i, 0))
    else:
        ws = w.reshape(s, ks, n)
        w_spec = pl.BlockSpec((None, ks, bn), lambda j, i: (i, 0, j))
    part = pl.pallas_call(
        functools.partial(_kernel, block_k=cfg.block_k, transposed=transposed),
        grid=(n // bn, s),
        in_specs=[pl.BlockSpec((None, ks), lambda j, i: (i, 0)), w_spec],
        out_specs=pl.BlockSpec((None, bn), lambda j, i: (i, j)),
        out_shape=jax.ShapeDtypeStruct((s, n), jnp.float32),
        compiler_params=plgpu.CompilerParams(num_warps=cfg.num_warps, num_stages=cfg.num_stages),
        interpret=interpret,
        name=f"gemv_{'nk' if transposed else 'kn'}_{k}x{n}",
    )(xs, ws)
    return part[0] if s == 1 else jnp.sum(part, axis=0)


def tileable(k: int, n: int, transposed: bool = False, table: dict | None = None) -> bool:
    return config_for(k, n, transposed, table) is not None


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3, 4))
def _gemv(x, w, transposed, config, interpret):
    return gemv_raw(x, w, transposed=transposed, config=config, interpret=interpret)


def _fwd(x, w, transposed, config, interpret):
    return _gemv(x, w, transposed, config, interpret), (x, w)


def _bwd(transposed, config, interpret, res, g):
    x, w = res
    gx = (g.astype(w.dtype) @ w) if transposed else (w @ g.astype(w.dtype))
    gw = jnp.outer(g, x) if transposed else jnp.outer(x, g)
    return gx.astype(x.dtype), gw.astype(w.dtype)


_gemv.defvjp(_fwd, _bwd)


def gemv(x: jax.Array, w: jax.Array, *, transposed: bool = False, table: dict | None = None,
         interpret: bool = False) -> jax.Array:
    """float32 [..., N] = x[..., K] @ w for an x holding one row in total (see module docstring)."""
    lead = x.shape[:-1]
    if math.prod(lead) != 1:
        raise ValueError(f"gemv takes one row, got x of shape {x.shape}")
    w = w.astype(x.dtype)
    k = x.shape[-1]
    n = w.shape[0] if transposed else w.shape[-1]
    y = _gemv(x.reshape(-1), w, transposed, config_for(k, n, transposed, table), interpret)
    return y.reshape(*lead, y.shape[-1])


def matmul(x: jax.Array, w: jax.Array, *, on: bool = False, table: dict | None = None, interpret: bool = False,
           transposed: bool = False, out_dtype=None, norm=None) -> jax.Array:
    """x @ w (or x @ w.T when transposed) in x's dtype (or out_dtype), through the kernel when `use_gemv(x, on)` and
    the shape tiles (table: config.tilings). norm: a callable applied to x first (the decoder's RMSNorm; the
    one-token path that folds it into a kernel is fused.py)."""
    k = x.shape[-1]
    n = w.shape[0] if transposed else w.shape[-1]
    out_dtype = out_dtype or x.dtype
    if norm is not None:
        x = norm(x)
    if use_gemv(x, on) and w.ndim == 2 and tileable(k, n, transposed, table):
        return gemv(x, w, transposed=transposed, table=table, interpret=interpret).astype(out_dtype)
    if transposed:
        return jnp.einsum("...k,nk->...n", x, w.astype(x.dtype), preferred_element_type=out_dtype)
    return jnp.einsum("...k,kn->...n", x, w.astype(x.dtype), preferred_element_type=out_dtype)
