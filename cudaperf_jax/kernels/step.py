"""One batch-1 decode step through the kernels: which layers run where.

    layers = [LayerWeights(...), ...]                      # the decoder's parameters, as stored
    h, ks, vs = hidden_step(cfg, layers, x, final, cos, sin, kv_mask, ks, vs, cache_index, kc=kc, layouts=layouts)

With the CUDA kernels on (DecodeKernels path cuda, bf16 compute and caches) and a hidden size from
cuda_step.STEP_MIN_D on, every layer runs from one FFI call (cuda_step.step); otherwise each layer is fused.py's
Pallas kernels (finish, qkv, attend, o, finish, gate_up, down), with the four projections as CUDA matvecs where the
CUDA kernels are on. `cfg` is any object with the decoder config's sizes (hidden_size, intermediate_size, num_heads,
num_kv_heads, head_dim, rms_norm_eps); this package never imports the models.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from cudaperf_jax.kernels import cuda_ffi, cuda_step, fused
from cudaperf_jax.kernels.config import DecodeKernels, tilings
from cudaperf_jax.kernels.gemv import _pow2_divisor


class LayerWeights(NamedTuple):
    """One decoder layer's parameters as stored (any float dtype; optional ones None): norm scales [D] and their
    eps; qkv [D, (H + 2 Hkv) Dh], qkv_bias [(H + 2 Hkv) Dh]; q_norm/k_norm [Dh] (Qwen3); o [H Dh, D], o_bias [D];
    gate_up [D, 2, F], gate_up_bias [2, F]; down [F, D], down_bias [D]."""
    attn_scale: jax.Array
    attn_eps: float
    qkv: jax.Array
    qkv_bias: jax.Array | None
    q_norm: jax.Array | None
    k_norm: jax.Array | None
    o: jax.Array
    o_bias: jax.Array | None
    mlp_scale: jax.Array
    mlp_eps: float
    gate_up: jax.Array
    gate_up_bias: jax.Array | None
    down: jax.Array
    down_bias: jax.Array | None


def applies(cfg, kc: DecodeKernels, batch: int, tokens: int) -> bool:
    """Whether a one-token step of `batch` sequences runs through these kernels (kc resolved: see DecodeKernels)."""
    return batch == 1 and tokens == 1 and kc.on and fused.supported(cfg, tilings(kc.tilings))


def _step_launch(cfg, kc: DecodeKernels, dtype, cache_shape, cache_dtype) -> bool:
    """Whether the whole step runs from one FFI call (cuda_step.step)."""
    chunk = _pow2_divisor(cfg.hidden_size, fused.FINISH_CHUNK)
    return (kc.cuda and dtype == jnp.bfloat16 and cache_dtype == jnp.bfloat16 and chunk == cuda_step.FINISH_CHUNK
            and cuda_step.supported(cfg.hidden_size, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim,
                                    cfg.intermediate_size, cache_shape[2], tilings(kc.tilings)))


def layouts_apply(cfg, kc: DecodeKernels, dtype, batch: int, cache_shape, cache_dtype) -> bool:
    """Whether a decode of `batch` sequences with caches [B, Hkv, S, Dh] runs the step launch's one-kernel MLP, which
    reads gate_up group-major (`layouts`). Reads the config and the shapes only (cheap on the host)."""
    if not applies(cfg, kc, batch, 1) or not _step_launch(cfg, kc, dtype, cache_shape, cache_dtype):
        return False
    d, f = cfg.hidden_size, cfg.intermediate_size
    full = cuda_step.tilings(d, (cfg.num_heads + 2 * cfg.num_kv_heads) * cfg.head_dim, cfg.num_heads * cfg.head_dim, f,
                             tilings(kc.tilings))
    return full[1][2] >= 2 and full[3][2] >= 2 and cuda_step.gm_applies(d, f)   # folded finishes, the MLP's shapes


def layouts(gate_ups, dtype) -> tuple:
    """Each layer's gate_up [D, 2, F] group-major in the compute dtype (cuda_step.mlp_gm_layout): the weights laid out
    for the one-kernel MLP, a pytree built once per set of weights (by the Sampler) and passed to every step."""
    return tuple(cuda_step.mlp_gm_layout(w.astype(dtype)) for w in gate_ups)


def _val(p, dt):
    return None if p is None else p.astype(dt)


def _cuda_matvecs(kc: DecodeKernels, dt):
    """A function (kind, weight, prologue inputs, out_cols) -> the CUDA matvec's float32 partials, or None where the
    CUDA matvecs are off (not path cuda, not bf16) or do not take the shape (the Pallas matvec runs)."""
    on = kc.cuda and dt == jnp.bfloat16
    table = tilings(kc.tilings)

    def run(kind, w, inputs, out_cols=None):
        k, n = w.shape
        if not on:
            return None
        split, cols, unroll = cuda_ffi.tiling_for(k, n, table)
        if not cuda_ffi.supported(k, n, split, cols):
            return None
        opts = {"split_k": split, "out_cols": out_cols, "cols": cols, "unroll": unroll}
        if kind == "norm":
            return cuda_ffi.matvec_norm(inputs["x"], inputs["ss"], inputs["scale"], w.astype(dt), eps=inputs["eps"],
                                        n_chunks=inputs["ss_count"] or fused.finish_count(k), **opts)
        if kind == "attn":
            return cuda_ffi.matvec_attn(*inputs["attn"], w.astype(dt), group=inputs["group"], **opts)
        return cuda_ffi.matvec_swiglu(inputs["parts"], inputs["bias"], w.astype(dt), **opts)
    return run


def _project_residual(w, kind, xr, res_bias, table, interpret, **prologue):
    """(xr + (prologue input @ w) + bias, its blocks' sums of squares, their count or None for `finish`'s):
    in the matvec's epilogue when its tiling has no split-K, else partials, then the finish kernel."""
    cfg = fused._config(*w.shape, kind, prologue["attn"][0].shape[-1] if kind == "attn" else 0, table)
    if cfg.split_k == 1:
        x_new, ss = fused.matvec(w, kind, residual=(xr, res_bias), config=cfg, interpret=interpret, **prologue)
        return x_new, ss, w.shape[1] // cfg.block_n
    parts = fused.matvec(w, kind, config=cfg, interpret=interpret, **prologue)
    x_new, ss = fused.finish(xr, parts, res_bias, interpret=interpret)
    return x_new, ss, None


def hidden_step(cfg, layers, x, final_norm, cos, sin, kv_mask, k_caches, v_caches, cache_index, *,
                kc: DecodeKernels, dtype, layouts: tuple = ()):
    """One token of one sequence through every layer: (final-normed h [D], new k caches, new v caches).

    layers: LayerWeights per layer; x [D] the embedded token in the compute dtype; final_norm (scale [D], eps);
    cos/sin float32 [Dh] of the token's position; kv_mask int32 [S]; caches [1, Hkv, S, Dh] (donate them);
    cache_index int32, the token's slot; kc resolved; layouts: `layouts(...)` of these weights or ()."""
    dt, interpret, table = dtype, kc.interpret, tilings(kc.tilings)
    hd, g = cfg.head_dim, cfg.num_heads // cfg.num_kv_heads
    x, ss = fused.finish(x, None, None, interpret=interpret)
    count = None
    if _step_launch(cfg, kc, dt, k_caches[0].shape, k_caches[0].dtype):   # every layer from one FFI call
        d = cfg.hidden_size
        step_layers = []
        for i, lw in enumerate(layers):
            gu_b = _val(lw.gate_up_bias, dt)
            step_layers.append({
                "attn_scale": lw.attn_scale, "mlp_scale": lw.mlp_scale, "w_qkv": lw.qkv.astype(dt),
                "b_qkv": _val(lw.qkv_bias, dt), "q_norm": lw.q_norm, "k_norm": lw.k_norm, "k_cache": k_caches[i],
                "v_cache": v_caches[i], "w_o": lw.o.astype(dt), "b_o": _val(lw.o_bias, dt),
                "w_gu": layouts[i] if layouts else lw.gate_up.astype(dt).reshape(d, -1),
                "b_gu": None if gu_b is None else gu_b.reshape(-1), "w_down": lw.down.astype(dt),
                "b_down": _val(lw.down_bias, dt)})
        pdl = all(w.dtype == dt for lw in layers for w in (lw.qkv, lw.o, lw.gate_up, lw.down))
        l0 = layers[0]
        x, ss, new_k, new_v = cuda_step.step(
            x, ss, step_layers, cos=cos, sin=sin, kv_mask=kv_mask, cache_index=cache_index, heads=cfg.num_heads,
            chunk=cuda_step.FINISH_CHUNK, eps_attn=l0.attn_eps, eps_mlp=l0.mlp_eps, eps_qk=cfg.rms_norm_eps,
            table=table, pdl=pdl)
        return fused.norm_from(x, ss, final_norm[0], final_norm[1], None), new_k, new_v
    cuda = _cuda_matvecs(kc, dt)
    new_k, new_v = [], []
    for i, lw in enumerate(layers):
        extra = (fused._pow2_at_least(g, 16) - g) * hd
        norm_in = {"x": x, "ss": ss, "ss_count": count, "scale": lw.attn_scale, "eps": lw.attn_eps}
        qkv_parts = cuda("norm", lw.qkv, norm_in, out_cols=lw.qkv.shape[1] + extra)
        if qkv_parts is None:
            qkv_parts = fused.matvec(lw.qkv.astype(dt), "norm", extra_cols=extra, interpret=interpret, table=table,
                                     **norm_in)
        attn, kc_i, vc_i = fused.attend(qkv_parts, k_caches[i], v_caches[i], kv_mask, cache_index, cos, sin,
                                        num_heads=cfg.num_heads, bias=_val(lw.qkv_bias, dt), q_norm=lw.q_norm,
                                        k_norm=lw.k_norm, eps=cfg.rms_norm_eps, dtype=dt, interpret=interpret,
                                        table=table)
        new_k.append(kc_i)
        new_v.append(vc_i)
        o_parts = cuda("attn", lw.o, {"attn": attn, "group": g})
        if o_parts is not None:
            x, ss = fused.finish(x, o_parts, _val(lw.o_bias, dt), interpret=interpret)
            count = None
        else:
            x, ss, count = _project_residual(lw.o.astype(dt), "attn", x, _val(lw.o_bias, dt), table, interpret,
                                             attn=attn, group=g)
        gu_w = lw.gate_up.astype(dt).reshape(cfg.hidden_size, -1)
        gu_bias = None if lw.gate_up_bias is None else _val(lw.gate_up_bias, dt).reshape(-1)
        norm_in = {"x": x, "ss": ss, "ss_count": count, "scale": lw.mlp_scale, "eps": lw.mlp_eps}
        gu_parts = cuda("norm", lw.gate_up.reshape(cfg.hidden_size, -1), norm_in)
        down_parts = None if gu_parts is None else cuda("swiglu", lw.down, {"parts": gu_parts, "bias": gu_bias})
        if down_parts is not None:
            x, ss = fused.finish(x, down_parts, _val(lw.down_bias, dt), interpret=interpret)
            count = None
        elif fused.swiglu_in_gate_up(cfg, table):  # gate_up writes the activation; down reads it as a plain vector
            act = fused.matvec(gu_w, "norm", swiglu_out=True, bias=gu_bias, interpret=interpret, table=table, **norm_in)
            x, ss, count = _project_residual(lw.down.astype(dt), "plain", x, _val(lw.down_bias, dt), table, interpret,
                                             x=act)
        else:
            gu_parts = fused.matvec(gu_w, "norm", interpret=interpret, table=table, **norm_in) \
                if gu_parts is None else gu_parts
            x, ss, count = _project_residual(lw.down.astype(dt), "swiglu", x, _val(lw.down_bias, dt), table,
                                             interpret, parts=gu_parts, bias=gu_bias)
    return fused.norm_from(x, ss, final_norm[0], final_norm[1], count), new_k, new_v
