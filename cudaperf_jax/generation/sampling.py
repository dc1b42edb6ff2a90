"""Next-token choice: temperature, top-k and top-p (nucleus) masks, per-sample PRNG keys.

Semantics follow transformers' logits processors in their order (temperature -> top-k -> top-p):
top-p keeps the smallest set of most likely tokens whose probability reaches `top_p` (always at least
one token). Pure functions of arrays; `top_k` and the `greedy`/`use_top_p` switches are static.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

NEG_INF = -1e30
CHUNK = 2048  # top-k over long rows in two stages: per chunk of CHUNK, then over the k * n_chunks winners


PREFILTER = 64  # "maxes": entries per chunk whose maximum screens the chunk
# How top_k screens long rows: "chunks", "maxes", or "auto": chunks for one row, maxes for more. On an H200
# (benchmarks/results/topk_h200.json, top 50 of 151,936): 59 vs 62 us at batch 1, 315 vs 66 us at batch 32.
TOPK_METHOD = "auto"


def top_k(x: jax.Array, k: int, method: str | None = None) -> tuple[jax.Array, jax.Array]:
    """(values, indices) [B, k] of the k largest entries per row of x[B, V], sorted descending.

    No sort ever runs over a full vocabulary row (XLA lowers a top-k over 150k entries to a slow full-row
    sort on GPUs). For V > 4 * CHUNK, method "chunks" takes the top k of each CHUNK-sized slice, then the
    top k of those; "maxes" takes each PREFILTER-sized slice's maximum, keeps the k slices with the largest
    maxima (every top-k entry lies in one of them) and takes the top k of their entries; "cuda" runs
    cudaperf_jax.kernels.cuda_ffi.top_k (two CUDA kernels, no XLA sort). "auto": chunks for one row, maxes for
    more. All give lax.top_k's values; among equal values the indices may differ.
    """
    b, v = x.shape
    method = method or TOPK_METHOD
    if method == "auto":
        method = "chunks" if b == 1 else "maxes"
    if method == "cuda":   # cudaperf_jax/kernels/cuda/topk_kernel.cuh, through the XLA FFI
        from cudaperf_jax.kernels import cuda_ffi
        vals, idx = cuda_ffi.top_k(x.astype(jnp.float32), k)
        return vals.astype(x.dtype), idx
    if v <= 4 * CHUNK or k > CHUNK:
        return jax.lax.top_k(x, k)
    if method == "maxes" and -(-v // PREFILTER) >= k:
        c = PREFILTER
        n = -(-v // c)
        padded = jnp.pad(x, ((0, 0), (0, n * c - v)), constant_values=-jnp.inf).reshape(b, n, c)
        _, chunk_ids = jax.lax.top_k(padded.max(axis=-1), k)                    # [B, k]
        cand = jnp.take_along_axis(padded, chunk_ids[:, :, None], axis=1)         # [B, k, c]
        cand_ids = chunk_ids[:, :, None] * c + jnp.arange(c, dtype=chunk_ids.dtype)[None, None, :]
        vals, pos = jax.lax.top_k(cand.reshape(b, k * c), k)
        return vals, jnp.take_along_axis(cand_ids.reshape(b, k * c), pos, axis=-1)
    n = -(-v // CHUNK)
    padded = jnp.pad(x, ((0, 0), (0, n * CHUNK - v)), constant_values=-jnp.inf)
    vals, idx = jax.lax.top_k(padded.reshape(b, n, CHUNK), k)  # [B, n, k]
    idx = idx + (jnp.arange(n, dtype=idx.dtype) * CHUNK)[None, :, None]
    vals2, pos = jax.lax.top_k(vals.reshape(b, n * k), k)
    return vals2, jnp.take_along_axis(idx.reshape(b, n * k), pos, axis=-1)


def _cuda_top_k(v: int, k: int, cuda: bool) -> bool:
    """Whether the CUDA top-k runs: asked for (cuda), on a long row it takes."""
    from cudaperf_jax.kernels import cuda_ffi
    return cuda and v > 4 * CHUNK and cuda_ffi.topk_supported(v, k)


def top_k_mask(logits: jax.Array, k: int) -> jax.Array:
    """logits[B, V] with everything below the k-th largest value per row set to -inf (ties kept)."""
    if k <= 0 or k >= logits.shape[-1]:
        return logits
    kth = top_k(logits, k)[0][..., -1:]
    return jnp.where(logits < kth, NEG_INF, logits)


def top_p_mask(logits: jax.Array, p) -> jax.Array:
    """logits[B, V] with the tokens outside the top-p nucleus set to -inf (traced p in (0, 1])."""
    order = jnp.argsort(-logits, axis=-1)
    sorted_logits = jnp.take_along_axis(logits, order, axis=-1)
    probs = jax.nn.softmax(sorted_logits, axis=-1)
    before = jnp.cumsum(probs, axis=-1) - probs  # probability mass of strictly more likely tokens
    keep_sorted = before < p
    keep_sorted = keep_sorted.at[..., 0].set(True)
    keep = jnp.zeros_like(keep_sorted).at[jnp.arange(logits.shape[0])[:, None], order].set(keep_sorted)
    return jnp.where(keep, logits, NEG_INF)


def choose(logits: jax.Array, keys: jax.Array, step, temperature, top_p, *, top_k: int = 0,
           greedy: bool = False, use_top_p: bool = True) -> jax.Array:
    """Next tokens int32[B] from float32 logits[B, V].

    keys: one PRNG key per sample (uint32[B, 2] or typed keys[B]); the key of step `step` is
    fold_in(keys[b], step), so a sample's draws do not depend on the rest of the batch.
    """
    if greedy:
        return jnp.argmax(logits, axis=-1).astype(jnp.int32)
    scaled = logits / jnp.asarray(temperature, jnp.float32)
    v = logits.shape[-1]
    if 0 < top_k < v:
        vals, ids = _top_candidates(scaled, top_k)
        return _draw_from_top_k(vals, ids, keys, step, top_p, use_top_p)
    if use_top_p:
        scaled = top_p_mask(scaled, top_p)
    return jax.vmap(jax.random.categorical)(_step_keys(keys, step), scaled).astype(jnp.int32)


def _top_candidates(x, k):
    return top_k(x, k)   # (choose's `top_k` argument hides the function)


def _step_keys(keys, step):
    return jax.vmap(lambda k: jax.random.fold_in(k, step))(keys)


def _draw_from_top_k(vals, ids, keys, step, top_p, use_top_p: bool) -> jax.Array:
    """Tokens int32[B] drawn from the top-k candidates (values [B, k] sorted descending, temperature applied, their
    vocabulary ids [B, k]) after the top-p mask."""
    if use_top_p:
        probs = jax.nn.softmax(vals, axis=-1)
        before = jnp.cumsum(probs, axis=-1) - probs
        keep = (before < top_p).at[..., 0].set(True)
        vals = jnp.where(keep, vals, NEG_INF)
    pick = jax.vmap(jax.random.categorical)(_step_keys(keys, step), vals)
    return jnp.take_along_axis(ids, pick[:, None], axis=-1)[:, 0].astype(jnp.int32)


def choose_with_logprobs(logits: jax.Array, keys: jax.Array, step, temperature, top_p, *, top_k: int = 0,
                         greedy: bool = False, use_top_p: bool = True,
                         cuda_top_k: bool = False) -> tuple[jax.Array, jax.Array]:
    """(choose's tokens int32[B], token_logprobs of them float32[B]). cuda_top_k (DecodeKernels top_k "cuda"): the
    top-k of long rows runs the CUDA kernels on the raw logits (the temperature divides only its k values: the same
    values as top-k of the divided row; only a tie that the division creates could order differently) and the
    log-probabilities come from the logsumexp those kernels compute (no log_softmax over the vocabulary)."""
    v = logits.shape[-1]
    if not greedy and 0 < top_k < v and _cuda_top_k(v, top_k, cuda_top_k):
        from cudaperf_jax.kernels import cuda_ffi
        raw = logits.astype(jnp.float32)
        vals, ids, lse = cuda_ffi.top_k(raw, top_k, with_lse=True)
        vals = vals / jnp.asarray(temperature, jnp.float32)
        tok = _draw_from_top_k(vals.astype(logits.dtype), ids, keys, step, top_p, use_top_p)
        return tok, jnp.take_along_axis(raw, tok[:, None], axis=-1)[:, 0] - lse
    tok = choose(logits, keys, step, temperature, top_p, top_k=top_k, greedy=greedy, use_top_p=use_top_p)
    return tok, token_logprobs(logits, tok)


def token_logprobs(logits: jax.Array, tokens: jax.Array) -> jax.Array:
    """float32[...] log-softmax(logits)[token]: the model's own (temperature 1, untruncated) log-probability."""
    lp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    return jnp.take_along_axis(lp, tokens[..., None].astype(jnp.int32), axis=-1)[..., 0]
