"""The batch-1 CUDA matvecs and the CUDA top-k (cuda/*.cuh), called from JAX through the XLA FFI.

    y = matvec(xp, w, split_k=4)                                # xp [P, >= K] float32 partials, w [K, N] bf16
    y = matvec_norm(x, ss, scale, w, n_chunks=12, eps=1e-6)     # fused.matvec's "norm" prologue
    y = matvec_swiglu(gate_up_parts, bias, w_down)              # its "swiglu" prologue
    y = matvec_attn(acc, ml, w_o, group=6)                      # its "attn" prologue
    vals, idx, lse = top_k(logits, 50, with_lse=True)

The input is the sum of xp's P rows over the first K columns, rounded to bf16 (a producer's split-K partials pass
straight through); the result is float32 split-K partials [split_k, out_cols or N] (columns past N unwritten) for the
consumer to sum. A block keeps `unroll` 16-byte weight loads in flight per thread and owns `cols` output columns.
The library is built and registered by cuda_build. History and timings: docs/decode_kernels.md.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from cudaperf_jax.kernels.cuda_build import TARGETS, require_gpu

COLS = (64, 128, 256)          # output columns per block (32, 16 or 8 threads per weight row)
_DUMMY_BF16 = np.zeros((1,), jnp.bfloat16)


def supported(k: int, n: int, split_k: int, cols: int | None = None) -> bool:
    """Shapes the kernel takes: N a multiple of 64 (of cols, the columns per block, when given), split_k
    dividing K, a K slice that fits shared memory."""
    return (n % 64 == 0 and (cols is None or (cols in COLS and n % cols == 0)) and split_k >= 1 and k % split_k == 0
            and (k // split_k) * 4 <= 200 * 1024)


def default_cols(n: int) -> int:
    return 256 if n % 256 == 0 else 128 if n % 128 == 0 else 64


def default_split(k: int, n: int, sms: int = 132, min_rows: int = 64, cols: int | None = None) -> int:
    """The smallest split giving >= 2 blocks per SM (a block owns `cols` columns, default_cols(n) by default)
    with >= min_rows rows per slice, else the largest split that keeps min_rows."""
    cols = cols or default_cols(n)
    best = 1
    for s in range(1, k // min_rows + 1):
        if k % s:
            continue
        best = s
        if (n // cols) * s >= 2 * sms:
            break
    return best


def tiling_for(k: int, n: int, table: dict, step: bool = False) -> tuple[int, int, int]:
    """(split_k, cols, unroll) for a [K, N] weight: the tilings table's `cuda_step` record (step launch only), else
    its `cuda` record, else (default_split, default_cols, 4). table: config.tilings(...)."""
    rec = (table.get(("cuda_step", k, n)) if step else None) or table.get(("cuda", k, n))
    if rec is None:
        return default_split(k, n), default_cols(n), 4
    split, cols, unroll = int(rec["split_k"]), int(rec["cols"]), int(rec.get("unroll", 4))
    if not supported(k, n, split, cols) or unroll not in (4, 8):
        raise ValueError(f"tilings table: cuda record {rec} for K={k} N={n}: split_k must divide K, cols (64, 128 or "
                         "256) N, and unroll is 4 or 8; fix or remove that record")
    return split, cols, unroll


def _call(kind: str, w: jax.Array, args: list, split_k: int, out_cols: int | None, *, cols: int | None = None,
          unroll: int = 4, **attrs):
    k, n = w.shape
    cols = cols or default_cols(n)
    if w.dtype != jnp.bfloat16 or not supported(k, n, split_k, cols) or (out_cols or n) < n:
        raise ValueError(f"cuda_ffi: needs w bf16 [K, N] with N a multiple of cols (64, 128 or 256), split_k "
                         f"dividing K (K / split_k <= 51200) and out_cols >= N; got w {w.dtype}{list(w.shape)}, "
                         f"split_k {split_k}, cols {cols}, out_cols {out_cols}")
    require_gpu()
    shape = jax.ShapeDtypeStruct((split_k, out_cols or n), jnp.float32)
    return jax.ffi.ffi_call(TARGETS[kind][0], shape)(
        *args, w, split_k=np.int64(split_k), pdl=np.int64(0), unroll=np.int64(unroll), cols=np.int64(cols), **attrs)


def matvec(xp: jax.Array, w: jax.Array, *, split_k: int = 1, out_cols: int | None = None, **tiling) -> jax.Array:
    """float32 partials [split_k, out_cols or N] of round_bf16(xp.sum(0)[:K]) @ w for xp [P, >= K] float32 (a vector
    [>= K] is taken as P = 1) and w [K, N] bf16; tiling: cols, unroll."""
    if xp.ndim == 1:
        xp = xp[None, :]
    if xp.shape[1] < w.shape[0]:
        raise ValueError(f"cuda_ffi.matvec: xp must be [P, >= K]; got xp {list(xp.shape)} for w {list(w.shape)}")
    return _call("parts", w, [xp.astype(jnp.float32)], split_k, out_cols, **tiling)


def matvec_norm(x: jax.Array, ss: jax.Array, scale: jax.Array, w: jax.Array, *, n_chunks: int, eps: float,
                split_k: int = 1, out_cols: int | None = None, **tiling) -> jax.Array:
    """As `matvec`, the input RMSNorm(x) * scale from x bf16 [K] and the first n_chunks entries of ss (its
    chunks' sums of squares, fused.finish); the roundings of fused.matvec's "norm" prologue."""
    if x.shape != (w.shape[0],) or scale.shape != x.shape or ss.shape[0] < n_chunks:
        raise ValueError(f"cuda_ffi.matvec_norm: x and scale must be [K] and ss >= n_chunks; got {x.shape}, "
                         f"{scale.shape}, {ss.shape} for w {list(w.shape)}")
    return _call("norm", w, [x.astype(jnp.bfloat16), ss.astype(jnp.float32), scale.astype(jnp.bfloat16)], split_k,
                 out_cols, n_chunks=np.int64(n_chunks), eps=np.float32(eps), **tiling)


def matvec_swiglu(parts: jax.Array, bias: jax.Array | None, w: jax.Array, *, split_k: int = 1,
                  out_cols: int | None = None, **tiling) -> jax.Array:
    """As `matvec`, the input silu(gate) * up from gate/up split-K partials [P, 2K] float32 (+ bias [2K]); the
    roundings of fused.matvec's "swiglu" prologue."""
    k = w.shape[0]
    if parts.ndim != 2 or parts.shape[1] != 2 * k or (bias is not None and bias.shape != (2 * k,)):
        raise ValueError(f"cuda_ffi.matvec_swiglu: parts must be [P, 2K] and bias [2K]; got {parts.shape}, "
                         f"{None if bias is None else bias.shape} for w {list(w.shape)}")
    b = _DUMMY_BF16 if bias is None else bias.astype(jnp.bfloat16)
    return _call("swiglu", w, [parts.astype(jnp.float32), b], split_k, out_cols,
                 has_bias=np.int64(bias is not None), **tiling)


def matvec_attn(acc: jax.Array, ml: jax.Array, w: jax.Array, *, group: int, split_k: int = 1,
                out_cols: int | None = None, **tiling) -> jax.Array:
    """As `matvec`, the input the attention output merged from fused.attend's splits (acc [Hkv, S, Gp, Dh],
    ml [Hkv, S, 2, Gp]; group heads per KV head); the roundings of fused.matvec's "attn" prologue."""
    if acc.ndim != 4 or ml.shape != (acc.shape[0], acc.shape[1], 2, acc.shape[2]) or \
            acc.shape[0] * group * acc.shape[3] != w.shape[0]:
        raise ValueError(f"cuda_ffi.matvec_attn: acc must be [Hkv, S, Gp, Dh], ml [Hkv, S, 2, Gp] and Hkv * group * "
                         f"Dh == K; got {acc.shape}, {ml.shape}, group {group} for w {list(w.shape)}")
    return _call("attn", w, [acc.astype(jnp.float32), ml.astype(jnp.float32)], split_k, out_cols,
                 group=np.int64(group), **tiling)


TOPK_CHUNK, TOPK_MAX_K, TOPK_MAX_CHUNKS = 64, 64, 4096   # topk_kernel.cuh's kChunk, kMaxK, kMaxChunks


def topk_supported(v: int, k: int) -> bool:
    """Rows the CUDA top-k takes: 1 <= k <= 64 and k <= V <= 262,144 (4096 chunks of 64 in one select block)."""
    return 1 <= k <= TOPK_MAX_K and k <= v and -(-v // TOPK_CHUNK) <= TOPK_MAX_CHUNKS


def top_k(x: jax.Array, k: int, *, with_lse: bool = False):
    """lax.top_k(x, k) for float32 x [B, V] without sorting the rows (cuda/topk_kernel.cuh: the maxima of 64-entry
    chunks, then per row a radix selection over the chunks whose maximum reaches the k-th largest maximum):
    (values [B, k] descending, int32 indices [B, k]); among equal values the smaller index first. with_lse: also each
    row's logsumexp [B] (jax.nn.logsumexp(x, -1) up to summation order), from the same passes over the row."""
    if x.ndim != 2 or not topk_supported(x.shape[1], k):
        raise ValueError(f"cuda_ffi.top_k: needs x [B, V] with 1 <= k <= 64 and k <= V <= 262144; got x {x.shape}, "
                         f"k {k}")
    require_gpu()
    b, v = x.shape
    n_chunks = -(-v // TOPK_CHUNK)
    f32 = jnp.float32
    shapes = [jax.ShapeDtypeStruct((b, k), f32), jax.ShapeDtypeStruct((b, k), jnp.int32),
              jax.ShapeDtypeStruct((b, n_chunks), jnp.uint32),
              jax.ShapeDtypeStruct((b, 2 * n_chunks) if with_lse else (1,), f32),
              jax.ShapeDtypeStruct((b,) if with_lse else (1,), f32)]
    out = jax.ffi.ffi_call(TARGETS["topk"][0], shapes)(x.astype(f32), k=np.int64(k), with_lse=np.int64(int(with_lse)))
    return (out[0], out[1], out[4]) if with_lse else (out[0], out[1])
