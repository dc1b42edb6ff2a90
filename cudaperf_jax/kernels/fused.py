"""Batch-1 decode layers as seven Pallas (Triton) kernels each, with the small work folded into them.

A decode step of one sequence reads every weight once, so it should take bytes / HBM bandwidth; the small work
around the projections (RMSNorm, split-K sums, RoPE, cache writes, attention, residual adds) is folded into seven
kernels per layer:

  1. finish  residual + the previous branch's split-K partials (+ bias), one program per 128 entries;
             writes the residual stream x and per-chunk sums of squares.
  2. qkv     matvec whose prologue applies the attention RMSNorm (rstd from those sums).
  3. attend  (KV head, sequence split) programs: sum the qkv partials (+ bias), Qwen3's q/k norms, RoPE;
             the first split writes the new key and value into the cache in place; online softmax over
             the split's slots, unnormalised (flash-decoding).
  4. o       matvec whose prologue merges the attention splits of its K slice.
  5. finish  as 1, with the o projection.
  6. gate_up matvec whose prologue applies the MLP RMSNorm.
  7. down    matvec whose prologue sums the gate/up partials (+ bias) of its K slice and applies SwiGLU.

Every matvec writes float32 split-K partials [split, N] that the consumer sums, so no separate reduction
kernel runs. A tiling of o or down without split-K (split_k 1) adds the result to the residual stream in the matvec's
epilogue (no finish kernel after it); a gate_up tiling without split-K (block_n dividing F) applies SwiGLU in its
epilogue and down reads a plain vector. The numbers follow the XLA path's roundings (bf16 after each projection, norm
statistics in float32), so greedy decoding gives the same tokens up to summation order. Measurements:
docs/decode_kernels.md.

Tilings come from the tilings table (config.tilings: records `fused_<prologue>` and `fused_attend`), else the
plain matvec's (gemv.config_for). It is a sampling path: no gradients are defined (training never calls the decoder
with a cache). Which layers run these kernels, and which the CUDA ones, is step.py's choice.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from cudaperf_jax.kernels import gemv
from cudaperf_jax.kernels.gemv import GemvConfig, _pow2_divisor

NEG = -1e30
KINDS = ("plain", "norm", "attn", "swiglu")


class AttnConfig(NamedTuple):
    block_s: int = 64     # cache slots per loop step
    splits: int = 4       # programs per KV head along the cache (a power of two)
    num_warps: int = 4
    num_stages: int = 2


def _pow2_at_least(n: int, lo: int) -> int:
    p = lo
    while p < n:
        p *= 2
    return p


def _shapes(cfg):
    d, f, hd = cfg.hidden_size, cfg.intermediate_size, cfg.head_dim
    w = (cfg.num_heads + 2 * cfg.num_kv_heads) * hd
    return [(d, w, "norm"), (cfg.num_heads * hd, d, "attn"), (d, 2 * f, "norm"), (f, d, "swiglu")]


def swiglu_in_gate_up(cfg, table: dict) -> bool:
    """Whether gate_up's tiling has no split-K and a block_n dividing F: then it applies SwiGLU in its
    epilogue and down's prologue is plain (else down sums gate_up's partials and applies it)."""
    c = _config(cfg.hidden_size, 2 * cfg.intermediate_size, "norm", 0, table)
    return c is not None and c.split_k == 1 and cfg.intermediate_size % c.block_n == 0


def layer_keys(cfg, table: dict) -> list[tuple[str, int, int]]:
    """The (prologue kind, K, N) tiling-table keys one layer looks up."""
    keys = [(kind, k, n) for k, n, kind in _shapes(cfg)]
    if swiglu_in_gate_up(cfg, table):
        keys[-1] = ("plain",) + keys[-1][1:]
    return keys + [("attend", cfg.head_dim, cfg.num_heads // cfg.num_kv_heads)]


def supported(cfg, table: dict) -> bool:
    """Shapes the kernels handle: a power-of-two head dim >= 32, a hidden size the finish kernel covers in
    <= 64 programs, and a tiling for every projection."""
    d, hd = cfg.hidden_size, cfg.head_dim
    return (hd >= 32 and hd & (hd - 1) == 0 and d // _pow2_divisor(d, FINISH_CHUNK) <= 64
            and all(_config(k, n, kind, hd, table) is not None for kind, k, n in layer_keys(cfg, table)[:-1]))


# ------------------------------------------------------------------------------------------ tilings
def valid_config(cfg, k: int, n: int, kind: str, head_dim: int = 0) -> bool:
    ok = cfg is not None and not (n % cfg.block_n or k % cfg.split_k or (k // cfg.split_k) % cfg.block_k)
    return ok and (kind != "attn" or head_dim % cfg.block_k == 0)  # an attn step stays inside one head


def _config(k: int, n: int, kind: str, head_dim: int, table: dict) -> GemvConfig | None:
    """The tiling for a projection: the table's `fused_<kind>` record, else the plain matvec's (gemv.config_for); None
    if no tiling fits. A table record that does not fit its shape is an error (the table is wrong)."""
    rec = table.get(("fused_" + kind, k, n))
    cfg = None if rec is None else GemvConfig(**rec)
    if cfg is not None and not valid_config(cfg, k, n, kind, head_dim):
        raise ValueError(f"tilings table: {cfg} does not divide fused_{kind} K={k} N={n} (block_n must divide N, "
                         f"split_k K, block_k K/split_k{' and the head dim' if kind == 'attn' else ''}); "
                         "fix or remove that record")
    cfg = cfg or gemv.config_for(k, n, False, table)
    if cfg is not None and kind == "attn" and cfg.block_k > head_dim:
        cfg = cfg._replace(block_k=_pow2_divisor(head_dim, cfg.block_k))
    return cfg if valid_config(cfg, k, n, kind, head_dim) else None


def attn_config(head_dim: int, group: int, table: dict) -> AttnConfig:
    rec = table.get(("fused_attend", head_dim, group))
    return AttnConfig() if rec is None else AttnConfig(**rec)


def _params(num_warps, num_stages):
    from jax.experimental.pallas import triton as plgpu
    return plgpu.CompilerParams(num_warps=num_warps, num_stages=num_stages)


def _full(a):
    from jax.experimental import pallas as pl
    return pl.BlockSpec(a.shape, lambda *_, nd=a.ndim: (0,) * nd)


def _sum_parts(parts_ref, n_parts: int, idx):
    y = parts_ref[jnp.int32(0), idx]
    for p in range(1, n_parts):
        y = y + parts_ref[jnp.int32(p), idx]
    return y


# ------------------------------------------------------------------------------------------ finish
FINISH_CHUNK = 128  # entries of the residual stream per finish program


def _finish_kernel(*refs, n_parts: int, has_bias: bool, chunk: int):
    from jax.experimental import pallas as pl
    refs = list(refs)
    ss_ref, xo_ref = refs.pop(), refs.pop()
    xb_ref = refs.pop(0)
    parts_ref = refs.pop(0) if n_parts else None
    bias_ref = refs.pop(0) if has_bias else None
    c = pl.program_id(0)
    idx = pl.ds(pl.multiple_of(c * chunk, chunk), chunk)
    x = xb_ref[idx]   # x + (the branch's partials summed, rounded to x's dtype, + bias): as `x + proj(...)`
    if n_parts:
        y = _sum_parts(parts_ref, n_parts, idx).astype(x.dtype)
        if bias_ref is not None:
            y = y + bias_ref[idx]
        x = x + y
    xo_ref[idx] = x
    xf = x.astype(jnp.float32)
    ss_ref[pl.ds(c, 1)] = jnp.sum(xf * xf, keepdims=True)


def finish(x, parts, bias, *, interpret: bool = False):
    """(x + rounded(sum(parts)) + bias, its per-chunk sums of squares) for the residual stream x [D], the
    branch's float32 partials [P, D] (or None) and bias [D] (or None); one program per FINISH_CHUNK
    entries. The consumer (`matvec(kind="norm")`, `norm_from`) turns the sums into the RMSNorm."""
    from jax.experimental import pallas as pl
    k = x.shape[0]
    chunk = _pow2_divisor(k, FINISH_CHUNK)
    n_chunks = k // chunk
    n_parts = 0 if parts is None else parts.shape[0]
    has_bias = bias is not None and n_parts > 0
    args = [x] + ([parts] if n_parts else []) + ([bias.astype(x.dtype)] if has_bias else [])
    return pl.pallas_call(
        functools.partial(_finish_kernel, n_parts=n_parts, has_bias=has_bias, chunk=chunk),
        grid=(n_chunks,), in_specs=[_full(a) for a in args],
        out_specs=[_full(x), pl.BlockSpec((_pow2_at_least(n_chunks, 1),), lambda c: (0,))],
        out_shape=[jax.ShapeDtypeStruct(x.shape, x.dtype),
                   jax.ShapeDtypeStruct((_pow2_at_least(n_chunks, 1),), jnp.float32)],
        compiler_params=_params(4, 1), interpret=interpret, name=f"fused_finish_{k}",
    )(*args)


def finish_count(k: int) -> int:
    """How many sums of squares `finish` writes for a stream of k entries."""
    return k // _pow2_divisor(k, FINISH_CHUNK)


def _rstd(ss, n_chunks: int, k: int, eps: float):
    return lax.rsqrt(jnp.sum(jnp.where(jnp.arange(ss.shape[0]) < n_chunks, ss, 0.0)) / k + eps)


def norm_from(x, ss, scale, eps: float, ss_count: int | None = None):
    """RMSNorm of x [D] given its blocks' sums of squares (in XLA; the decoder's rounding)."""
    rstd = _rstd(ss, ss_count or finish_count(x.shape[0]), x.shape[0], eps)
    return (x.astype(jnp.float32) * rstd).astype(x.dtype) * scale.astype(x.dtype)


# ------------------------------------------------------------------------------------------ matvec
def _swiglu(g, u, dtype):
    """silu(g) * u with the XLA path's roundings (jax.nn.silu in dtype: g * sigmoid(g), then the product)."""
    gf = g.astype(jnp.float32)
    sig = (1.0 / (1.0 + jnp.exp(-gf))).astype(dtype)
    act = (gf * sig.astype(jnp.float32)).astype(dtype)
    return (act.astype(jnp.float32) * u.astype(jnp.float32)).astype(dtype)


def _mv_kernel(*refs, kind: str, n_parts: int, has_bias: bool, block_k: int, group: int, head_dim: int,
               eps: float = 0.0, n_chunks: int = 0, residual: int = 0, swiglu_out: int = 0):
    """One program: float32 partial y[block_n] = x[k slice] @ w[k slice, block_n], x from the prologue.
    residual (1: without bias, 2: with): no split-K; the epilogue adds y to the residual stream instead.
    swiglu_out (1: without bias, 2: with): no split-K; a second weight ref holds the up columns matching
    these gate columns, and the epilogue writes silu(gate) * up in the weights' dtype."""
    from jax.experimental import pallas as pl
    refs = list(refs)
    if residual:
        ss_out, xo_ref = refs.pop(), refs.pop()
    else:
        o_ref = refs.pop()
    if residual:
        rb_ref = refs.pop() if residual == 2 else None
        rx_ref = refs.pop()
    wu_ref = ab_ref = None
    if swiglu_out:
        ab_ref = refs.pop() if swiglu_out == 2 else None
        wu_ref = refs.pop()
    w_ref = refs.pop()
    ks = w_ref.shape[0]
    kb = pl.program_id(1) * ks
    dtype = w_ref.dtype
    if kind == "plain":
        (x_ref,) = refs

        def xval(k0):
            return x_ref[pl.ds(k0, block_k)].astype(jnp.float32)
    elif kind == "norm":  # RMSNorm from finish's per-chunk sums of squares
        x_ref, ss_ref, scale_ref = refs
        rstd = _rstd(ss_ref[...], n_chunks, x_ref.shape[0], eps)

        def xval(k0):
            xv = x_ref[pl.ds(k0, block_k)]
            return ((xv.astype(jnp.float32) * rstd).astype(xv.dtype) * scale_ref[pl.ds(k0, block_k)]).astype(jnp.float32)
    elif kind == "attn":  # merge the attention splits of one head's slice (flash-decoding's combine)
        acc_ref, ml_ref = refs

        def xval(k0):
            h = k0 // head_dim
            j, r, d0 = h // group, h % group, k0 % head_dim
            sp = pl.ds(0, acc_ref.shape[1])
            m = ml_ref[j, sp, jnp.int32(0), r]                     # [splits]
            l = ml_ref[j, sp, jnp.int32(1), r]
            wgt = jnp.exp(m - jnp.max(m))
            acc = acc_ref[j, sp, r, pl.ds(d0, block_k)]            # [splits, block_k]
            out = jnp.sum(acc * wgt[:, None], axis=0) / jnp.maximum(jnp.sum(wgt * l), 1e-30)
            return out.astype(dtype).astype(jnp.float32)
    else:  # swiglu over the gate/up projection's partials [P, 2F]
        parts_ref = refs.pop(0)
        bias_ref = refs.pop(0) if has_bias else None
        f_total = parts_ref.shape[1] // 2

        def xval(k0):
            idx, up_idx = pl.ds(k0, block_k), pl.ds(k0 + f_total, block_k)
            g = _sum_parts(parts_ref, n_parts, idx).astype(dtype)
            u = _sum_parts(parts_ref, n_parts, up_idx).astype(dtype)
            if bias_ref is not None:
                g, u = g + bias_ref[idx], u + bias_ref[up_idx]
            return _swiglu(g, u, dtype).astype(jnp.float32)

    w_refs = (w_ref,) if wu_ref is None else (w_ref, wu_ref)

    def loads(i):
        off = pl.multiple_of(i * block_k, block_k)
        return xval(pl.multiple_of(kb + off, block_k)), tuple(r[pl.ds(off, block_k), :] for r in w_refs)

    bn = w_ref.shape[1]
    accs = gemv.reduce_loop(ks // block_k, loads, bn, n_out=len(w_refs))
    acc = accs[0]
    if wu_ref is not None:  # gate and up columns of this block: silu(gate) * up, as the swiglu prologue would
        g, u = acc.astype(dtype), accs[1].astype(dtype)
        if ab_ref is not None:
            j, f_total = pl.program_id(0), ab_ref.shape[0] // 2
            g = g + ab_ref[pl.ds(pl.multiple_of(j * bn, bn), bn)]
            u = u + ab_ref[pl.ds(pl.multiple_of(f_total + j * bn, bn), bn)]
        o_ref[...] = _swiglu(g, u, dtype)
        return
    if not residual:
        o_ref[...] = acc
        return
    j = pl.program_id(0)
    cols = pl.ds(pl.multiple_of(j * w_ref.shape[1], w_ref.shape[1]), w_ref.shape[1])
    xr = rx_ref[cols]   # as finish: x + (the projection rounded to x's dtype, + bias)
    y = acc.astype(xr.dtype)
    if rb_ref is not None:
        y = y + rb_ref[cols]
    xn = xr + y
    xo_ref[...] = xn
    xf = xn.astype(jnp.float32)
    ss_out[pl.ds(j, 1)] = jnp.sum(xf * xf, keepdims=True)


def matvec(w: jax.Array, kind: str = "plain", *, x=None, parts=None, bias=None, attn=None, group: int = 1,
           ss=None, ss_count: int | None = None, scale=None, eps: float = 1e-6, residual=None,
           config: GemvConfig | None = None, interpret: bool = False, extra_cols: int = 0,
           swiglu_out: bool = False, table: dict | None = None):
    """float32 split-K partials [split, N (+ extra_cols, never written)] of x @ w for w [K, N], the input
    given by the prologue `kind`:

    plain   x: a vector of >= K entries (the first K are used)
    norm    x [K] and its blocks' sums of squares ss (ss_count of them; default `finish`'s), scale [K]:
            the input is RMSNorm(x)

    residual = (x [N], bias [N] or None) with a tiling of split_k 1: instead of partials, returns the new
    residual stream x + rounded(y) + bias and its blocks' sums of squares (N / block_n of them) - what
    `finish` would compute, without its kernel.
    swiglu_out with a tiling of split_k 1 and w = gate_up [K, 2F] (block_n dividing F), bias [2F] or None:
    instead of partials, returns silu(gate) * up [F] in w's dtype - the swiglu prologue's input, computed
    once (not a prologue kind: any of plain/norm/attn feeds it).
    attn    attn = (acc [Hkv, splits, Gp, Dh], ml [Hkv, splits, 2, Gp]) from `attend`; group = heads per KV head
    swiglu  parts [P, 2K] float32 gate/up partials, bias [2K] or None: input silu(gate) * up
    """
    from jax.experimental import pallas as pl
    k, n = w.shape
    head_dim = attn[0].shape[-1] if kind == "attn" else 0
    cfg = config or _config(k, n, kind, head_dim, table or {})
    if not valid_config(cfg, k, n, kind, head_dim):
        raise ValueError(f"fused.matvec: no tiling for {kind} K={k} N={n} ({cfg})")
    s, ks, bn = cfg.split_k, k // cfg.split_k, cfg.block_n
    if residual is not None and s != 1:
        raise ValueError(f"fused.matvec: the residual epilogue needs split_k 1, the tiling has {s}")
    if swiglu_out and (s != 1 or (n // 2) % bn or kind == "swiglu" or residual is not None):
        raise ValueError(f"fused.matvec: the swiglu epilogue needs split_k 1, block_n dividing N/2 and a "
                         f"plain/norm/attn prologue; got {kind} with {cfg} for N={n}")
    n_parts = 0 if parts is None else parts.shape[0]
    if kind == "plain":
        args = [x]
    elif kind == "norm":
        args = [x, ss, scale.astype(x.dtype)]
    elif kind == "attn":
        args = list(attn)
    elif kind == "swiglu":
        args = [parts] + ([bias.astype(w.dtype)] if bias is not None else [])
    else:
        raise ValueError(f"fused.matvec: unknown prologue {kind!r}; use one of {KINDS}")
    res_args, out_specs = [], pl.BlockSpec((None, bn), lambda j, i: (i, j))
    out_shape = jax.ShapeDtypeStruct((s, n + extra_cols), jnp.float32)
    if residual is not None:
        rx, rb = residual
        res_args = [rx] + ([rb.astype(rx.dtype)] if rb is not None else [])
        n_ss = _pow2_at_least(n // bn, 1)
        out_specs = [pl.BlockSpec((bn,), lambda j, i: (j,)), pl.BlockSpec((n_ss,), lambda j, i: (0,))]
        out_shape = [jax.ShapeDtypeStruct((n,), rx.dtype), jax.ShapeDtypeStruct((n_ss,), jnp.float32)]
    w_args, w_specs, grid = [w], [pl.BlockSpec((ks, bn), lambda j, i: (i, j))], (n // bn, s)
    if swiglu_out:
        half = n // 2 // bn   # program j: gate columns block j and the up columns block j + F / block_n
        w_args, w_specs, grid = [w, w], [pl.BlockSpec((k, bn), lambda j, i: (0, j)),
                                         pl.BlockSpec((k, bn), lambda j, i: (0, j + half))], (half, 1)
        res_args = [] if bias is None else [bias.astype(w.dtype)]
        out_specs = pl.BlockSpec((bn,), lambda j, i: (j,))
        out_shape = jax.ShapeDtypeStruct((n // 2,), w.dtype)
    kernel = functools.partial(_mv_kernel, kind=kind, n_parts=n_parts, has_bias=bias is not None,
                               block_k=cfg.block_k, group=group, head_dim=head_dim, eps=float(eps),
                               n_chunks=ss_count or finish_count(k),
                               residual=0 if residual is None else 1 + (residual[1] is not None),
                               swiglu_out=0 if not swiglu_out else 1 + (bias is not None))
    suffix = "_residual" if residual is not None else "_swiglu" if swiglu_out else ""
    return pl.pallas_call(
        kernel, grid=grid,
        in_specs=[_full(a) for a in args] + w_specs + [_full(a) for a in res_args],
        out_specs=out_specs, out_shape=out_shape,
        compiler_params=_params(cfg.num_warps, cfg.num_stages), interpret=interpret,
        name=f"fused_{kind}_{k}x{n}{suffix}")(*args, *w_args, *res_args)


# ------------------------------------------------------------------------------------------ attention
def _attn_kernel(*refs, g: int, n_q: int, n_kv: int, n_parts: int, has_bias: bool, qk_norm: bool,
                 eps: float, block_s: int, span: int, scale: float, dtype):
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as plgpu
    refs = list(refs)
    vc_out, kc_out, ml_ref, acc_ref = refs.pop(), refs.pop(), refs.pop(), refs.pop()
    j, c = pl.program_id(0), pl.program_id(1)
    parts_ref = refs.pop(0)
    bias_ref = refs.pop(0) if has_bias else None
    cos_ref, sin_ref = refs.pop(0), refs.pop(0)
    qn_ref, kn_ref = (refs.pop(0), refs.pop(0)) if qk_norm else (None, None)
    mask_ref, idx_ref, kc_ref, vc_ref = refs
    s_len, dh = kc_ref.shape
    half = dh // 2
    gp = acc_ref.shape[0]
    idx = idx_ref[()]
    lo, hi = pl.ds(0, half), pl.ds(half, half)
    qmask = jnp.broadcast_to((lax.broadcasted_iota(jnp.int32, (gp, 1), 0) < g), (gp, half))

    def head_rows(rows, cols, mask):
        """The rows' columns summed over the partials, rounded, + bias (as the XLA path's projection)."""
        def load(ref_at):
            return plgpu.load(ref_at, mask=mask, other=0.0) if mask is not None else ref_at[...]
        y = load(parts_ref.at[jnp.int32(0), rows, cols])
        for p in range(1, n_parts):
            y = y + load(parts_ref.at[jnp.int32(p), rows, cols])
        y = y.astype(dtype)
        if bias_ref is not None:
            y = y + load(bias_ref.at[rows, cols])
        return y

    def rope_norm(rows, mask, norm_ref):
        a, b = head_rows(rows, lo, mask), head_rows(rows, hi, mask)
        if norm_ref is not None:  # Qwen3: RMSNorm over each head's dims before RoPE
            af, bf = a.astype(jnp.float32), b.astype(jnp.float32)
            rstd = lax.rsqrt((jnp.sum(af * af, axis=1) + jnp.sum(bf * bf, axis=1)) / dh + eps)[:, None]
            a = (af * rstd).astype(dtype) * norm_ref[lo][None, :]
            b = (bf * rstd).astype(dtype) * norm_ref[hi][None, :]
        af, bf = a.astype(jnp.float32), b.astype(jnp.float32)
        c1, c2 = cos_ref[lo][None, :], cos_ref[hi][None, :]
        s1, s2 = sin_ref[lo][None, :], sin_ref[hi][None, :]
        return (af * c1 - bf * s1).astype(dtype), (bf * c2 + af * s2).astype(dtype)

    q1, q2 = rope_norm(pl.ds(j * g, gp), qmask, qn_ref)          # [gp, half] each, rows >= g are zero
    k1n, k2n = rope_norm(pl.ds(n_q + j, 1), None, kn_ref)        # [1, half]
    vn = head_rows(pl.ds(n_q + n_kv + j, 1), pl.ds(0, dh), None)  # [1, dh]
    cdt = kc_ref.dtype

    @pl.when(c == 0)
    def _():  # the new token's key and value, in place
        plgpu.store(kc_out.at[pl.ds(idx, 1), lo], k1n.astype(cdt))
        plgpu.store(kc_out.at[pl.ds(idx, 1), hi], k2n.astype(cdt))
        plgpu.store(vc_out.at[pl.ds(idx, 1), :], vn.astype(cdt))

    start = c * span

    def body(i, carry):
        acc, m, l = carry
        pos = start + i * block_s + jnp.arange(block_s)
        inb = pos < s_len
        keep = plgpu.load(mask_ref.at[pl.ds(start + i * block_s, block_s)], mask=inb, other=0)
        valid = inb & (keep != 0) & (pos < idx)
        rows = pl.ds(start + i * block_s, block_s)
        k1 = plgpu.load(kc_ref.at[rows, lo], mask=valid[:, None], other=0.0)
        k2 = plgpu.load(kc_ref.at[rows, hi], mask=valid[:, None], other=0.0)
        s = (plgpu.dot(q1.astype(cdt), k1.T, allow_tf32=False)
             + plgpu.dot(q2.astype(cdt), k2.T, allow_tf32=False)) * scale        # [gp, BS] float32
        s = jnp.where(valid[None, :], s, NEG)
        m_new = jnp.maximum(m, s.max(axis=1))
        corr = jnp.exp(m - m_new)
        p = jnp.where(valid[None, :], jnp.exp(s - m_new[:, None]), 0.0)
        v = plgpu.load(vc_ref.at[rows, :], mask=valid[:, None], other=0.0)
        acc = acc * corr[:, None] + plgpu.dot(p.astype(v.dtype), v, allow_tf32=False)
        return acc, m_new, l * corr + p.sum(axis=1)

    init = (jnp.zeros((gp, dh), jnp.float32), jnp.full((gp,), NEG, jnp.float32), jnp.zeros((gp,), jnp.float32))
    n_blocks = pl.cdiv(jnp.clip(idx - start, 0, span), block_s)
    acc, m, l = lax.fori_loop(0, n_blocks, body, init)
    own = (plgpu.load(mask_ref.at[pl.ds(idx, 1)]) != 0) & (c == 0)    # the token itself: first split only
    s_own = (jnp.sum(q1.astype(jnp.float32) * k1n.astype(jnp.float32), axis=1)
             + jnp.sum(q2.astype(jnp.float32) * k2n.astype(jnp.float32), axis=1)) * scale
    m_new = jnp.maximum(m, jnp.where(own, s_own, NEG))
    corr = jnp.exp(m - m_new)
    p_own = jnp.where(own, jnp.exp(s_own - m_new), 0.0)
    acc_ref[...] = acc * corr[:, None] + p_own[:, None] * vn.astype(jnp.float32)
    ml_ref[pl.ds(0, 1), :] = m_new[None, :]
    ml_ref[pl.ds(1, 1), :] = (l * corr + p_own)[None, :]


def attend(qkv_parts, k_cache, v_cache, kv_mask, cache_index, cos, sin, *, num_heads: int, bias=None,
           q_norm=None, k_norm=None, eps: float = 1e-6, dtype=jnp.bfloat16, config: AttnConfig | None = None,
           interpret: bool = False, table: dict | None = None):
    """One-token attention over the cache, split along it: qkv_parts float32 [P, >= (H + 2 Hkv) * Dh] (the qkv
    matvec's partials), caches [1, Hkv, S, Dh], kv_mask [S], cos/sin float32 [Dh] -> ((acc, ml), new k cache,
    new v cache) where acc [Hkv, splits, Gp, Dh] and ml [Hkv, splits, 2, Gp] (running max, sum) are the
    unnormalised per-split results that `matvec(kind="attn")` merges (`merge_heads` does it in XLA)."""
    from jax.experimental import pallas as pl
    _, hkv, s_len, dh = k_cache.shape
    g = num_heads // hkv
    gp = _pow2_at_least(g, 16)  # the score product needs >= 16 rows
    rows = num_heads + 2 * hkv
    cfg = config or attn_config(dh, g, table or {})
    per_split = -(-s_len // cfg.splits)
    span = -(-per_split // cfg.block_s) * cfg.block_s   # slots per split, in whole blocks
    # The last group's [gp, Dh] loads reach past row `rows`: they are masked, and the caller gives the
    # partials extra columns (matvec's extra_cols) so that the addresses exist.
    n_cols = qkv_parts.shape[1] // dh
    parts = qkv_parts.reshape(qkv_parts.shape[0], n_cols, dh)
    args = [parts]
    if bias is not None:
        args.append(bias.astype(dtype).reshape(rows, dh))
    args += [cos.astype(jnp.float32), sin.astype(jnp.float32)]
    if q_norm is not None:
        args += [q_norm.astype(dtype), k_norm.astype(dtype)]
    args += [kv_mask.astype(jnp.int32), jnp.asarray(cache_index, jnp.int32).reshape(())]
    sp = cfg.splits
    cache_spec = pl.BlockSpec((None, None, s_len, dh), lambda j, c: (0, j, 0, 0))
    acc, ml, kc, vc = pl.pallas_call(
        functools.partial(_attn_kernel, g=g, n_q=num_heads, n_kv=hkv, n_parts=parts.shape[0],
                          has_bias=bias is not None, qk_norm=q_norm is not None, eps=float(eps),
                          block_s=cfg.block_s, span=span, scale=dh ** -0.5, dtype=dtype),
        grid=(hkv, sp),
        in_specs=[_full(a) for a in args] + [cache_spec, cache_spec],
        out_specs=[pl.BlockSpec((None, None, gp, dh), lambda j, c: (j, c, 0, 0)),
                   pl.BlockSpec((None, None, 2, gp), lambda j, c: (j, c, 0, 0)), cache_spec, cache_spec],
        out_shape=[jax.ShapeDtypeStruct((hkv, sp, gp, dh), jnp.float32), jax.ShapeDtypeStruct((hkv, sp, 2, gp), jnp.float32),
                   jax.ShapeDtypeStruct(k_cache.shape, k_cache.dtype), jax.ShapeDtypeStruct(v_cache.shape, v_cache.dtype)],
        input_output_aliases={len(args): 2, len(args) + 1: 3},
        compiler_params=_params(cfg.num_warps, cfg.num_stages),
        interpret=interpret,
        name="fused_attend",
    )(*args, k_cache, v_cache)
    return (acc, ml), kc, vc


def merge_heads(acc, ml, num_heads: int, dtype=jnp.bfloat16):
    """The attention output [H * Dh] from `attend`'s splits, in XLA (what matvec's attn prologue computes)."""
    hkv, _, _, dh = acc.shape
    g = num_heads // hkv
    m, l = ml[:, :, 0, :g], ml[:, :, 1, :g]                           # [Hkv, splits, g]
    wgt = jnp.exp(m - m.max(axis=1, keepdims=True))
    out = (acc[:, :, :g] * wgt[..., None]).sum(axis=1) / jnp.maximum((wgt * l).sum(axis=1), 1e-30)[..., None]
    return out.reshape(num_heads * dh).astype(dtype)
