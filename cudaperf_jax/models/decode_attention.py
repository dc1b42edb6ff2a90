"""One-token attention with the KV-cache write fused in, as a Pallas (Triton) kernel for batch-1 decode.

XLA runs a decode step's attention as ~6 kernels per layer (two cache writes, the score product, the
masked softmax, the value product, reshapes); at batch 1 each is a few microseconds of launch and tail
for almost no data, which is most of what separates the decode step from the weight-streaming bound
(WORKSPACE_NOTES.md). This kernel does all of it in one launch per layer: one program per (sequence, KV
head) writes the new key and value into the cache buffers in place (input/output aliasing), then runs an
online softmax over the earlier slots of the cache block by block, and adds the new token's own term.

    out, k_cache, v_cache = attend(q, k_new, v_new, k_cache, v_cache, kv_mask, cache_index)

Same semantics as the decoder's XLA path for one query token at slot `cache_index`: keys at slots
< cache_index where kv_mask is True, plus the token itself. Off by default until measured on a GPU:
CUDAPERF_DECODE_ATTENTION=on (GPU) or interpret (Pallas' interpreter, for tests) turns it on.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax

from cudaperf_jax.models.ops import env_choice

NEG = -1e30


def mode() -> str:
    return env_choice("CUDAPERF_DECODE_ATTENTION", "off", ("off", "on", "interpret"))


def applies(batch: int, tokens: int, head_dim: int) -> bool:
    """Whether the decoder should use the kernel for this call (one token of one sequence)."""
    return mode() != "off" and batch == 1 and tokens == 1 and head_dim >= 16 and head_dim & (head_dim - 1) == 0


def _pow2_at_least(n: int, lo: int) -> int:
    p = lo
    while p < n:
        p *= 2
    return p


def _kernel(q_ref, kn_ref, vn_ref, mask_ref, idx_ref, kc_ref, vc_ref, o_ref, kc_out, vc_out, *,
            block_s: int, scale: float):
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as plgpu
    s_len = kc_ref.shape[0]
    idx = idx_ref[()]
    kn = kn_ref[...]                        # [1, Dh] cache dtype
    vn = vn_ref[...]
    plgpu.store(kc_out.at[pl.ds(idx, 1), :], kn)   # the new token's key and value, in place
    plgpu.store(vc_out.at[pl.ds(idx, 1), :], vn)
    q = q_ref[...]                          # [Gp, Dh] compute dtype (padded rows are zero)
    gp, dh = q.shape
    qf = q.astype(jnp.float32)

    def body(i, carry):
        acc, m, l = carry
        pos = i * block_s + jnp.arange(block_s)
        inb = pos < s_len
        keep = plgpu.load(mask_ref.at[pl.ds(i * block_s, block_s)], mask=inb, other=0)
        valid = inb & (keep != 0) & (pos < idx)
        k = plgpu.load(kc_ref.at[pl.ds(i * block_s, block_s), :], mask=valid[:, None], other=0.0)
        s = plgpu.dot(q.astype(k.dtype), k.T, allow_tf32=False) * scale   # [Gp, BS] float32 (no TF32)
        s = jnp.where(valid[None, :], s, NEG)
        m_new = jnp.maximum(m, s.max(axis=1))
        corr = jnp.exp(m - m_new)
        p = jnp.where(valid[None, :], jnp.exp(s - m_new[:, None]), 0.0)
        v = plgpu.load(vc_ref.at[pl.ds(i * block_s, block_s), :], mask=valid[:, None], other=0.0)
        acc = acc * corr[:, None] + plgpu.dot(p.astype(v.dtype), v, allow_tf32=False)
        return acc, m_new, l * corr + p.sum(axis=1)

    init = (jnp.zeros((gp, dh), jnp.float32), jnp.full((gp,), NEG, jnp.float32), jnp.zeros((gp,), jnp.float32))
    acc, m, l = lax.fori_loop(0, pl.cdiv(idx, block_s), body, init)
    own_keep = plgpu.load(mask_ref.at[pl.ds(idx, 1)])       # [1]
    s_own = jnp.sum(qf * kn.astype(jnp.float32), axis=1) * scale   # [Gp]
    s_own = jnp.where(own_keep != 0, s_own, NEG)
    m_new = jnp.maximum(m, s_own)
    corr = jnp.exp(m - m_new)
    p_own = jnp.exp(s_own - m_new)
    acc = acc * corr[:, None] + p_own[:, None] * vn.astype(jnp.float32)
    l = l * corr + p_own
    o_ref[...] = (acc / jnp.maximum(l, 1e-30)[:, None]).astype(o_ref.dtype)


def attend(q, k_new, v_new, k_cache, v_cache, kv_mask, cache_index, *, block_s: int = 64,
           num_warps: int = 4, num_stages: int = 2, interpret: bool | None = None):
    """q [B, 1, H, Dh], k_new/v_new [B, 1, Hkv, Dh] (after RoPE), caches [B, Hkv, S, Dh], kv_mask bool [B, S],
    cache_index int32 scalar -> (out [B, 1, H * Dh] in q's dtype, new k cache, new v cache)."""
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as plgpu
    b, t, h, dh = q.shape
    hkv, s_len = k_cache.shape[1], k_cache.shape[2]
    if t != 1:
        raise ValueError(f"decode attention takes one query token, got {t}")
    g = h // hkv
    gp = _pow2_at_least(g, 16)  # the score product needs >= 16 rows
    qg = q.reshape(b, hkv, g, dh)
    if gp != g:
        qg = jnp.pad(qg, ((0, 0), (0, 0), (0, gp - g), (0, 0)))
    kn = k_new.reshape(b, 1, hkv, dh).transpose(0, 2, 1, 3).astype(k_cache.dtype)   # [B, Hkv, 1, Dh]
    vn = v_new.reshape(b, 1, hkv, dh).transpose(0, 2, 1, 3).astype(v_cache.dtype)
    mask = kv_mask.astype(jnp.int32)
    idx = jnp.asarray(cache_index, jnp.int32).reshape(())
    if interpret is None:
        interpret = mode() == "interpret"
    cache_spec = pl.BlockSpec((None, None, s_len, dh), lambda i, j: (i, j, 0, 0))
    row_spec = pl.BlockSpec((None, None, 1, dh), lambda i, j: (i, j, 0, 0))
    out, kc, vc = pl.pallas_call(
        functools.partial(_kernel, block_s=block_s, scale=dh ** -0.5),
        grid=(b, hkv),
        in_specs=[pl.BlockSpec((None, None, gp, dh), lambda i, j: (i, j, 0, 0)), row_spec, row_spec,
                  pl.BlockSpec((None, s_len), lambda i, j: (i, 0)), pl.BlockSpec((), lambda i, j: ()),
                  cache_spec, cache_spec],
        out_specs=[pl.BlockSpec((None, None, gp, dh), lambda i, j: (i, j, 0, 0)), cache_spec, cache_spec],
        out_shape=[jax.ShapeDtypeStruct((b, hkv, gp, dh), q.dtype),
                   jax.ShapeDtypeStruct(k_cache.shape, k_cache.dtype),
                   jax.ShapeDtypeStruct(v_cache.shape, v_cache.dtype)],
        input_output_aliases={5: 1, 6: 2},
        compiler_params=plgpu.CompilerParams(num_warps=num_warps, num_stages=num_stages),
        interpret=interpret,
        name="decode_attention",
    )(qg, kn, vn, mask, idx, k_cache, v_cache)
    return out[:, :, :g].reshape(b, 1, h * dh), kc, vc
