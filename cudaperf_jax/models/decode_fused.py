"""Batch-1 decode layers as five Pallas (Triton) kernels each, with the small work folded into them.

A decode step of one sequence reads every weight once, so it should take bytes / HBM bandwidth. On an
H200 the XLA-compiled step spent a third of its time in ~15 small kernels per layer (RMSNorm, split-K
sums, RoPE, cache writes, the attention einsums and softmax, residual adds; WORKSPACE_NOTES.md), each a
microsecond or two of launch and tail for almost no data. Here each layer is:

  1. qkv     matvec whose prologue finishes the previous layer (residual + sum of the down projection's
             split-K partials + bias) and applies the attention RMSNorm; writes the residual stream x.
  2. attend  one program per KV head: sums the qkv partials (+ bias), Qwen3's q/k norms, RoPE, writes the
             new key and value into the cache in place, online-softmax attention over the cache.
  3. o       matvec of the attention output.
  4. gate_up matvec whose prologue adds the o projection (+ bias) to x and applies the MLP RMSNorm.
  5. down    matvec whose prologue sums the gate/up partials (+ bias) of its K slice and applies SwiGLU.

Every matvec writes float32 split-K partials [split, N]; the consumer sums them in its prologue, so no
separate reduction kernel runs. The numbers follow the XLA path's roundings (bf16 after each projection,
norm statistics in float32), so greedy decoding gives the same tokens up to summation order.

`applies(cfg, batch, tokens)` says whether the decoder takes this path: CUDAPERF_DECODE_FUSED is `auto`
(on one GPU where the batch-1 matvec kernel is on, see gemv.py), `off`, `on` (any backend running
Triton) or `interpret` (Pallas' interpreter, for tests on the CPU). Tilings come from
decode_fused_tuned.json (benchmarks/decode_fused.py --sweep writes one; CUDAPERF_FUSED_TABLE adds a file).
It is a sampling path: no gradients are defined (training never calls the decoder with a cache).
"""
from __future__ import annotations

import functools
import json
import os
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from cudaperf_jax.models import gemv
from cudaperf_jax.models.gemv import GemvConfig
from cudaperf_jax.models.ops import env_choice

NEG = -1e30
KINDS = ("plain", "resid_norm", "swiglu")


class AttnConfig(NamedTuple):
    block_s: int = 64
    num_warps: int = 4
    num_stages: int = 2


def mode() -> str:
    return env_choice("CUDAPERF_DECODE_FUSED", "off", ("auto", "off", "on", "interpret"))


def _pow2_divisor(n: int, cap: int) -> int:
    b = 1
    while b * 2 <= cap and n % (b * 2) == 0:
        b *= 2
    return b


def _pow2_at_least(n: int, lo: int) -> int:
    p = lo
    while p < n:
        p *= 2
    return p


def supported(cfg) -> bool:
    """Shapes the kernels handle: a power-of-two head dim >= 32 and vectors loadable in <= 32 chunks."""
    d, f, hd = cfg.hidden_size, cfg.intermediate_size, cfg.head_dim
    return (hd >= 32 and hd & (hd - 1) == 0 and d // _pow2_divisor(d, 1024) <= 32
            and all(_config(k, n, kind) is not None for k, n, kind in _shapes(cfg)))


def _shapes(cfg):
    d, f, hd = cfg.hidden_size, cfg.intermediate_size, cfg.head_dim
    w = (cfg.num_heads + 2 * cfg.num_kv_heads) * hd
    return [(d, w, "resid_norm"), (cfg.num_heads * hd, d, "plain"), (d, 2 * f, "resid_norm"), (f, d, "swiglu")]


def applies(cfg, batch: int, tokens: int) -> bool:
    """Whether the decoder should run this one-token step through the fused kernels."""
    if batch != 1 or tokens != 1:
        return False
    m = mode()
    if m == "off" or (m == "auto" and (gemv.mode() != "auto" or gemv._state["disabled"] is not None
                                       or not gemv._auto_ok())):
        return False
    return supported(cfg)


# ------------------------------------------------------------------------------------------ tilings
_TUNED_FILE = os.path.join(os.path.dirname(__file__), "decode_fused_tuned.json")


@functools.cache
def _tuned(path: str | None) -> dict:
    """{(kind, K, N): GemvConfig, ("attend", Dh, g): AttnConfig} from JSON lists of records
    {"kind", "K", "N", "config"} (benchmarks/decode_fused.py --sweep writes them)."""
    table = {}
    for p in (_TUNED_FILE, path):
        if not p:
            continue
        try:
            with open(p) as f:
                rows = json.load(f)
        except FileNotFoundError:
            if p == path:
                raise FileNotFoundError(f"CUDAPERF_FUSED_TABLE={p} does not exist; unset it or run "
                                        "benchmarks/decode_fused.py --sweep to write one") from None
            continue
        for r in rows:
            cls = AttnConfig if r["kind"] == "attend" else GemvConfig
            table[(r["kind"], int(r["K"]), int(r["N"]))] = cls(**r["config"])
    return table


def _table() -> dict:
    return _tuned(os.environ.get("CUDAPERF_FUSED_TABLE") or None)


def _config(k: int, n: int, kind: str) -> GemvConfig | None:
    cfg = _table().get((kind, k, n)) or gemv.default_config(k, n, False)
    if cfg is None or n % cfg.block_n or k % cfg.split_k or (k // cfg.split_k) % cfg.block_k:
        return None
    return cfg


def attn_config(head_dim: int, group: int) -> AttnConfig:
    return _table().get(("attend", head_dim, group)) or AttnConfig()


def _interpret(interpret):
    return mode() == "interpret" if interpret is None else interpret


def _params(num_warps, num_stages):
    from jax.experimental.pallas import triton as plgpu
    return plgpu.CompilerParams(num_warps=num_warps, num_stages=num_stages)


# ------------------------------------------------------------------------------------------ matvec
def _sum_parts(parts_ref, n_parts: int, idx):
    y = parts_ref[jnp.int32(0), idx]
    for p in range(1, n_parts):
        y = y + parts_ref[jnp.int32(p), idx]
    return y


def _residual(xb_ref, parts_ref, bias_ref, n_parts: int, idx):
    """x + (sum of the branch's partials, rounded to x's dtype, + bias) on one slice: the XLA path's
    `x + project(...)` with the projection's float32 output rounded first."""
    x = xb_ref[idx]
    if n_parts:
        y = _sum_parts(parts_ref, n_parts, idx).astype(x.dtype)
        if bias_ref is not None:
            y = y + bias_ref[idx]
        x = x + y
    return x


def _mv_kernel(*refs, kind: str, n_parts: int, has_bias: bool, block_k: int, eps: float, chunk: int):
    """One program: float32 partial y[block_n] = x[k slice] @ w[k slice, block_n], x from the prologue."""
    from jax.experimental import pallas as pl
    refs = list(refs)
    xo_ref = refs.pop() if kind == "resid_norm" else None
    o_ref = refs.pop()
    w_ref = refs.pop()
    ks = w_ref.shape[0]
    kb = pl.program_id(1) * ks
    if kind == "plain":
        (x_ref,) = refs

        def xval(idx):
            return x_ref[idx].astype(jnp.float32)
    elif kind == "resid_norm":
        xb_ref = refs.pop(0)
        parts_ref = refs.pop(0) if n_parts else None
        bias_ref = refs.pop(0) if has_bias else None
        (scale_ref,) = refs
        k_total = xb_ref.shape[0]
        chunks = [pl.ds(c * chunk, chunk) for c in range(k_total // chunk)]
        ss = jnp.float32(0)
        for idx in chunks:  # the whole vector's mean square (every program; the vector is small)
            v = _residual(xb_ref, parts_ref, bias_ref, n_parts, idx).astype(jnp.float32)
            ss = ss + jnp.sum(v * v)
        rstd = lax.rsqrt(ss / k_total + eps)

        @pl.when((pl.program_id(0) == 0) & (pl.program_id(1) == 0))
        def _():  # one program writes the residual stream for the next consumer
            for idx in chunks:
                xo_ref[idx] = _residual(xb_ref, parts_ref, bias_ref, n_parts, idx)

        def xval(idx):
            x = _residual(xb_ref, parts_ref, bias_ref, n_parts, idx)
            return ((x.astype(jnp.float32) * rstd).astype(x.dtype) * scale_ref[idx]).astype(jnp.float32)
    else:  # swiglu over the gate/up projection's partials [P, 2F]
        parts_ref = refs.pop(0)
        bias_ref = refs.pop(0) if has_bias else None
        f_total = parts_ref.shape[1] // 2
        dtype = w_ref.dtype

        def xval(idx):
            up_idx = pl.ds(idx.start + f_total, idx.size)
            g = _sum_parts(parts_ref, n_parts, idx).astype(dtype)
            u = _sum_parts(parts_ref, n_parts, up_idx).astype(dtype)
            if bias_ref is not None:
                g, u = g + bias_ref[idx], u + bias_ref[up_idx]
            gf = g.astype(jnp.float32)
            sig = jax.nn.sigmoid(gf).astype(dtype)
            act = (gf * sig.astype(jnp.float32)).astype(dtype)
            return (act.astype(jnp.float32) * u.astype(jnp.float32)).astype(dtype).astype(jnp.float32)

    def body(i, acc):
        off = pl.multiple_of(i * block_k, block_k)
        xv = xval(pl.ds(pl.multiple_of(kb + off, block_k), block_k))
        return acc + jnp.sum(w_ref[pl.ds(off, block_k), :].astype(jnp.float32) * xv[:, None], axis=0)

    o_ref[...] = lax.fori_loop(0, ks // block_k, body, jnp.zeros((w_ref.shape[1],), jnp.float32))


def matvec(w: jax.Array, kind: str, *, x=None, parts=None, bias=None, scale=None, eps: float = 1e-6,
           config: GemvConfig | None = None, interpret: bool | None = None):
    """float32 split-K partials [split, N] of x @ w for w [K, N], x given by the prologue `kind`:

    plain       x: a vector of >= K entries (the first K are used)
    resid_norm  x: the residual stream [K], parts [P, K] float32 (or None), bias [K] (or None), scale [K]:
                the input is RMSNorm(x + rounded(sum(parts)) + bias); returns (partials, that residual [K])
    swiglu      parts [P, 2K] float32 gate/up partials, bias [2K] or None: input silu(gate) * up
    """
    from jax.experimental import pallas as pl
    k, n = w.shape
    cfg = config or _config(k, n, kind)
    if cfg is None or n % cfg.block_n or k % cfg.split_k or (k // cfg.split_k) % cfg.block_k:
        raise ValueError(f"decode_fused.matvec: no tiling for {kind} K={k} N={n} ({cfg})")
    s, ks, bn = cfg.split_k, k // cfg.split_k, cfg.block_n
    full = lambda a: pl.BlockSpec(a.shape, lambda j, i, nd=a.ndim: (0,) * nd)  # noqa: E731
    n_parts = 0 if parts is None else parts.shape[0]
    if kind == "plain":
        args = [x]
    elif kind == "resid_norm":
        args = [x] + ([parts] if n_parts else []) + ([bias] if bias is not None else []) + [scale.astype(x.dtype)]
    elif kind == "swiglu":
        args = [parts] + ([bias.astype(w.dtype)] if bias is not None else [])
    else:
        raise ValueError(f"decode_fused.matvec: unknown prologue {kind!r}; use one of {KINDS}")
    in_specs = [full(a) for a in args] + [pl.BlockSpec((ks, bn), lambda j, i: (i, j))]
    out_shape = [jax.ShapeDtypeStruct((s, n), jnp.float32)]
    out_specs = [pl.BlockSpec((None, bn), lambda j, i: (i, j))]
    if kind == "resid_norm":
        out_shape.append(jax.ShapeDtypeStruct((k,), x.dtype))
        out_specs.append(pl.BlockSpec((k,), lambda j, i: (0,)))
    kernel = functools.partial(_mv_kernel, kind=kind, n_parts=n_parts, has_bias=bias is not None,
                               block_k=cfg.block_k, eps=float(eps), chunk=_pow2_divisor(k, 1024))
    out = pl.pallas_call(kernel, grid=(n // bn, s), in_specs=in_specs, out_specs=out_specs, out_shape=out_shape,
                         compiler_params=_params(cfg.num_warps, cfg.num_stages), interpret=_interpret(interpret),
                         name=f"fused_{kind}_{k}x{n}")(*args, w)
    return (out[0], out[1]) if kind == "resid_norm" else out[0]


# ------------------------------------------------------------------------------------------ attention
def _attn_kernel(*refs, g: int, n_q: int, n_kv: int, n_parts: int, has_bias: bool, qk_norm: bool,
                 eps: float, block_s: int, scale: float):
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as plgpu
    refs = list(refs)
    vc_out, kc_out, o_ref = refs.pop(), refs.pop(), refs.pop()
    parts_ref = refs.pop(0)
    bias_ref = refs.pop(0) if has_bias else None
    cos_ref, sin_ref = refs.pop(0), refs.pop(0)
    qn_ref, kn_ref = (refs.pop(0), refs.pop(0)) if qk_norm else (None, None)
    mask_ref, idx_ref, kc_ref, vc_ref = refs
    j = pl.program_id(0)
    s_len, dh = kc_ref.shape
    half = dh // 2
    gp = _pow2_at_least(g, 16)
    dtype = o_ref.dtype
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
    plgpu.store(kc_out.at[pl.ds(idx, 1), lo], k1n.astype(cdt))   # the new token's key and value, in place
    plgpu.store(kc_out.at[pl.ds(idx, 1), hi], k2n.astype(cdt))
    plgpu.store(vc_out.at[pl.ds(idx, 1), :], vn.astype(cdt))

    def body(i, carry):
        acc, m, l = carry
        pos = i * block_s + jnp.arange(block_s)
        inb = pos < s_len
        keep = plgpu.load(mask_ref.at[pl.ds(i * block_s, block_s)], mask=inb, other=0)
        valid = inb & (keep != 0) & (pos < idx)
        rows = pl.ds(i * block_s, block_s)
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
    acc, m, l = lax.fori_loop(0, pl.cdiv(idx, block_s), body, init)
    own_keep = plgpu.load(mask_ref.at[pl.ds(idx, 1)])
    s_own = (jnp.sum(q1.astype(jnp.float32) * k1n.astype(jnp.float32), axis=1)
             + jnp.sum(q2.astype(jnp.float32) * k2n.astype(jnp.float32), axis=1)) * scale
    s_own = jnp.where(own_keep != 0, s_own, NEG)
    m_new = jnp.maximum(m, s_own)
    corr = jnp.exp(m - m_new)
    p_own = jnp.exp(s_own - m_new)
    acc = acc * corr[:, None] + p_own[:, None] * vn.astype(jnp.float32)
    l = l * corr + p_own
    out = (acc / jnp.maximum(l, 1e-30)[:, None]).astype(dtype)
    omask = jnp.broadcast_to(lax.broadcasted_iota(jnp.int32, (gp, 1), 0) < g, (gp, dh))
    plgpu.store(o_ref.at[pl.ds(j * g, gp), :], out, mask=omask)


def attend(qkv_parts, k_cache, v_cache, kv_mask, cache_index, cos, sin, *, num_heads: int, bias=None,
           q_norm=None, k_norm=None, eps: float = 1e-6, dtype=jnp.bfloat16, config: AttnConfig | None = None,
           interpret: bool | None = None):
    """qkv_parts float32 [P, (H + 2 Hkv) * Dh] (the qkv matvec's partials), caches [1, Hkv, S, Dh], kv_mask
    [S], cos/sin float32 [Dh] -> (out in dtype, new k cache, new v cache); out's first H * Dh entries are the
    heads' outputs in order (the rest is padding the o matvec does not read: slicing it off would cost a copy)."""
    from jax.experimental import pallas as pl
    _, hkv, s_len, dh = k_cache.shape
    g = num_heads // hkv
    gp = _pow2_at_least(g, 16)
    rows = num_heads + 2 * hkv
    cfg = config or attn_config(dh, g)
    parts = qkv_parts.reshape(qkv_parts.shape[0], rows, dh)
    # Rows past the end let the last group's [gp, Dh] loads stay in bounds (they are masked out).
    parts = jnp.pad(parts, ((0, 0), (0, gp), (0, 0))) if gp > g else parts
    args = [parts]
    if bias is not None:
        args.append(jnp.pad(bias.astype(dtype).reshape(rows, dh), ((0, gp), (0, 0))))
    args += [cos.astype(jnp.float32), sin.astype(jnp.float32)]
    if q_norm is not None:
        args += [q_norm.astype(dtype), k_norm.astype(dtype)]
    args += [kv_mask.astype(jnp.int32), jnp.asarray(cache_index, jnp.int32).reshape(())]
    full = lambda a: pl.BlockSpec(a.shape, lambda j, nd=a.ndim: (0,) * nd)  # noqa: E731
    cache_spec = pl.BlockSpec((None, None, s_len, dh), lambda j: (0, j, 0, 0))
    n_out = num_heads + gp - g
    out, kc, vc = pl.pallas_call(
        functools.partial(_attn_kernel, g=g, n_q=num_heads, n_kv=hkv, n_parts=parts.shape[0],
                          has_bias=bias is not None, qk_norm=q_norm is not None, eps=float(eps),
                          block_s=cfg.block_s, scale=dh ** -0.5),
        grid=(hkv,),
        in_specs=[full(a) for a in args] + [cache_spec, cache_spec],
        out_specs=[pl.BlockSpec((n_out, dh), lambda j: (0, 0)), cache_spec, cache_spec],
        out_shape=[jax.ShapeDtypeStruct((n_out, dh), dtype), jax.ShapeDtypeStruct(k_cache.shape, k_cache.dtype),
                   jax.ShapeDtypeStruct(v_cache.shape, v_cache.dtype)],
        input_output_aliases={len(args): 1, len(args) + 1: 2},
        compiler_params=_params(cfg.num_warps, cfg.num_stages),
        interpret=_interpret(interpret),
        name="fused_attend",
    )(*args, k_cache, v_cache)
    return out.reshape(-1), kc, vc


# ------------------------------------------------------------------------------------------ one step
def hidden_step(model, tokens, positions, kv_mask, cache, cache_index):
    """Decoder.hidden for one token of one sequence with a cache: (final-normed h [1, 1, D], new cache)."""
    from cudaperf_jax.models.decoder import KVCache
    from cudaperf_jax.models.rope import cos_sin
    cfg, dt = model.cfg, model.dtype
    s_len = cache.k[0].shape[2]
    kvm = jnp.ones((s_len,), jnp.int32) if kv_mask is None else kv_mask[0].astype(jnp.int32)
    if positions is None:
        positions = jnp.zeros((1, 1), jnp.int32)
    cos, sin = cos_sin(positions, jnp.asarray(model._inv_freq, jnp.float32), model._att_factor)
    cos, sin = cos[0, 0], sin[0, 0]
    x = jnp.take(model.embed[...], tokens[0], axis=0)[0].astype(dt)
    parts = bias = None
    new_k, new_v = [], []
    for i, layer in enumerate(model.layers):
        a, mlp = layer.attn, layer.mlp
        val = lambda p: None if p is None else p[...].astype(dt)  # noqa: E731
        qkv_parts, x = matvec(a.qkv[...].astype(dt), "resid_norm", x=x, parts=parts, bias=bias,
                              scale=layer.attn_norm.scale[...], eps=layer.attn_norm.eps)
        out, kc, vc = attend(qkv_parts, cache.k[i], cache.v[i], kvm, cache_index, cos, sin, num_heads=cfg.num_heads,
                             bias=val(a.qkv_bias), q_norm=None if a.q_norm is None else a.q_norm.scale[...],
                             k_norm=None if a.k_norm is None else a.k_norm.scale[...],
                             eps=cfg.rms_norm_eps, dtype=dt)
        new_k.append(kc)
        new_v.append(vc)
        o_parts = matvec(a.o[...].astype(dt), "plain", x=out)
        d = cfg.hidden_size
        gu_parts, x = matvec(mlp.gate_up[...].astype(dt).reshape(d, -1), "resid_norm", x=x, parts=o_parts,
                             bias=val(a.o_bias), scale=layer.mlp_norm.scale[...], eps=layer.mlp_norm.eps)
        gu_bias = None if mlp.gate_up_bias is None else val(mlp.gate_up_bias).reshape(-1)
        parts = matvec(mlp.down[...].astype(dt), "swiglu", parts=gu_parts, bias=gu_bias)
        bias = val(mlp.down_bias)
    y = jnp.sum(parts, axis=0).astype(dt)
    if bias is not None:
        y = y + bias
    h = model.final_norm((x + y)[None, None, :])
    return h, KVCache(tuple(new_k), tuple(new_v))
