"""Decoder-only transformer (Llama, Qwen2, Qwen3) in Flax NNX, with an explicit KV cache.

Layout differences from transformers' checkpoints (the weights modules convert both ways):
q/k/v projections are one fused kernel `qkv` [D, (H + 2*Hkv) * Dh] and gate/up one kernel
`gate_up` [D, 2, F]; kernels are stored [in, out]. Fusing halves the matmul launches per decode step.

LoRA adapters (cudaperf_jax.models.lora) are an optional `lora` module of an Attention or MLP block, added beside
the fused kernels; a block without one is exactly the plain block. A decoder with adapters never takes the fused
one-token decode step (kernels.step reads the base kernels only); the sampler takes merged weights (lora.merge).

Every parameter carries logical sharding axes (`nnx.with_partitioning`) over the mesh axes
`data`, `fsdp`, `tensor` (see `cudaperf_jax.models.sharding`); the same code runs on one device or many.

Shapes: B batch, T new tokens, S cache slots, D hidden, H/Hkv heads, Dh head dim, V vocab.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx

from cudaperf_jax.kernels import gemv
from cudaperf_jax.kernels import step as kernel_step
from cudaperf_jax.kernels.config import XLA, DecodeKernels, tilings
from cudaperf_jax.models import attention as attention_lib
from cudaperf_jax.models.attention import AttentionConfig
from cudaperf_jax.models.config import ModelConfig
from cudaperf_jax.models.ops import rms_norm
from cudaperf_jax.models.rope import apply_rope, cos_sin, inv_frequencies

_INIT = nnx.initializers.normal(0.02)


class KVCache(NamedTuple):
    """Per-layer key/value buffers: tuples of L arrays [B, Hkv, S, Dh] in the compute dtype.

    Heads before slots, so the attention matmuls read the buffers in place (batch dims leading)."""
    k: tuple[jax.Array, ...]
    v: tuple[jax.Array, ...]

    @staticmethod
    def zeros(cfg: ModelConfig, batch: int, slots: int, dtype=jnp.bfloat16) -> KVCache:
        shape = (batch, cfg.num_kv_heads, slots, cfg.head_dim)
        z = tuple(jnp.zeros(shape, dtype) for _ in range(cfg.num_layers))
        return KVCache(z, tuple(jnp.zeros(shape, dtype) for _ in range(cfg.num_layers)))


# Logical axes of the cache buffers [B, Hkv, S, Dh] (used by sharding.cache_shardings).
CACHE_AXES = (("data", "fsdp"), "tensor", None, None)


def _matmul(x: jax.Array, w: jax.Array, kc: DecodeKernels | None, **kw) -> jax.Array:
    """x @ w through the batch-1 Pallas matvec where kc (resolved) turns it on for this one-row x, else XLA's dot."""
    if kc is None or not kc.on:
        return gemv.matmul(x, w, **kw)
    return gemv.matmul(x, w, on=True, table=tilings(kc.tilings), interpret=kc.interpret, **kw)


def _param(rngs: nnx.Rngs, shape, axes, dtype, init=_INIT) -> nnx.Param:
    # Sharding is applied later (sharding.shard_model), so building never needs a mesh in context.
    return nnx.Param(nnx.with_partitioning(init, axes)(rngs.params(), shape, dtype), eager_sharding=False)


class RMSNorm(nnx.Module):
    """x / rms(x) * scale over the last axis; statistics in float32 (as transformers)."""

    def __init__(self, dim: int, eps: float, *, rngs: nnx.Rngs, dtype, param_dtype):
        self.scale = _param(rngs, (dim,), (None,), param_dtype, nnx.initializers.ones)
        self.eps, self.dtype = eps, dtype

    def __call__(self, x: jax.Array) -> jax.Array:
        return rms_norm(x, self.scale[...], self.eps, self.dtype)


class Attention(nnx.Module):
    """Grouped-query attention with optional q/k/v (and o) biases and Qwen3's per-head q/k norms."""
    lora = None   # the block's LoRA adapters (lora.Adapters for q, k, v, o), set by lora.add_adapters

    def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs, dtype, param_dtype):
        d, h, kv, hd = cfg.hidden_size, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        self.h, self.kv, self.hd, self.dtype = h, kv, hd, dtype
        width = (h + 2 * kv) * hd
        self.qkv = _param(rngs, (d, width), ("fsdp", "tensor"), param_dtype)
        self.qkv_bias = (_param(rngs, (width,), ("tensor",), param_dtype, nnx.initializers.zeros)
                         if cfg.qkv_bias else None)
        self.o = _param(rngs, (h * hd, d), ("tensor", "fsdp"), param_dtype)
        self.o_bias = _param(rngs, (d,), (None,), param_dtype, nnx.initializers.zeros) if cfg.o_bias else None
        if cfg.qk_norm:
            self.q_norm = RMSNorm(hd, cfg.rms_norm_eps, rngs=rngs, dtype=dtype, param_dtype=param_dtype)
            self.k_norm = RMSNorm(hd, cfg.rms_norm_eps, rngs=rngs, dtype=dtype, param_dtype=param_dtype)
        else:
            self.q_norm = self.k_norm = None

    def __call__(self, x, cos, sin, mask, cache_kv, cache_index, norm=None, kc: DecodeKernels | None = None,
                 dropout_rng=None, attn: AttentionConfig | None = None):
        """x[B, T, D], cos/sin[B, T, Dh]; mask bool[B, T, S], or with a fused `attn` int32[B, T] segment ids
        (models.attention.segments_of); cache_kv (k, v)[B, Hkv, S, Dh] or None; norm: the RMSNorm to apply to x
        first; kc: the resolved decode kernels (None: XLA); dropout_rng: a PRNG key for the adapters' dropout (None:
        none); attn: the resolved attention of a cache-free call (None or xla: the einsum path below).

        Returns (out[B, T, D], (k, v)) where k/v are the updated cache buffers (or this step's keys
        and values when there is no cache).
        """
        b, t, _ = x.shape
        if self.lora is not None and norm is not None:  # the adapters read the normed x too
            x, norm = norm(x), None
        y = _matmul(x, self.qkv[...].astype(self.dtype), kc, norm=norm)
        if self.qkv_bias is not None:
            y = y + self.qkv_bias[...].astype(self.dtype)
        h, kv, hd = self.h, self.kv, self.hd
        q, k, v = y[..., : h * hd], y[..., h * hd: (h + kv) * hd], y[..., (h + kv) * hd:]
        if self.lora is not None:
            q, k, v = (self.lora.add(name, x, part, dropout_rng) for name, part in zip("qkv", (q, k, v)))
        q, k, v = q.reshape(b, t, h, hd), k.reshape(b, t, kv, hd), v.reshape(b, t, kv, hd)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if cache_kv is None and attn is not None and attn.fused:   # mask: segment ids [B, T]
            out = attention_lib.flash(q.astype(self.dtype), k.astype(self.dtype), v.astype(self.dtype), mask, attn)
            return (self._project_out(out.reshape(b, t, h * hd), kc, dropout_rng),
                    (k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3)))
        k, v = k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3)  # [B, Hkv, T, Dh]
        if cache_kv is not None:
            ck, cv = cache_kv
            zero = jnp.zeros((), jnp.int32)
            idx = (zero, zero, jnp.asarray(cache_index, jnp.int32), zero)
            k = jax.lax.dynamic_update_slice(ck, k.astype(ck.dtype), idx)
            v = jax.lax.dynamic_update_slice(cv, v.astype(cv.dtype), idx)
        g = h // kv
        qg = q.reshape(b, t, kv, g, hd)
        scores = jnp.einsum("btkgd,bksd->bkgts", qg, k.astype(self.dtype),
                            preferred_element_type=jnp.float32) * (hd ** -0.5)
        scores = jnp.where(mask[:, None, None, :, :], scores, jnp.float32(-1e30))
        probs = jax.nn.softmax(scores, axis=-1).astype(self.dtype)
        out = jnp.einsum("bkgts,bksd->btkgd", probs, v.astype(self.dtype)).reshape(b, t, h * hd)
        return self._project_out(out, kc, dropout_rng), (k, v)

    def _project_out(self, out: jax.Array, kc: DecodeKernels | None, dropout_rng=None) -> jax.Array:
        y = _matmul(out, self.o[...].astype(self.dtype), kc)
        if self.lora is not None:
            y = self.lora.add("o", out, y, dropout_rng)
        if self.o_bias is not None:
            y = y + self.o_bias[...].astype(self.dtype)
        return y


class MLP(nnx.Module):
    """SwiGLU: down(silu(gate(x)) * up(x)), with gate and up fused as gate_up[D, 2, F]."""
    lora = None   # the block's LoRA adapters (lora.Adapters for gate, up, down), set by lora.add_adapters

    def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs, dtype, param_dtype):
        d, f = cfg.hidden_size, cfg.intermediate_size
        self.dtype = dtype
        self.gate_up = _param(rngs, (d, 2, f), ("fsdp", None, "tensor"), param_dtype)
        self.down = _param(rngs, (f, d), ("tensor", "fsdp"), param_dtype)
        zeros = nnx.initializers.zeros
        self.gate_up_bias = _param(rngs, (2, f), (None, "tensor"), param_dtype, zeros) if cfg.mlp_bias else None
        self.down_bias = _param(rngs, (d,), (None,), param_dtype, zeros) if cfg.mlp_bias else None

    def __call__(self, x: jax.Array, norm=None, kc: DecodeKernels | None = None, dropout_rng=None) -> jax.Array:
        """x [B, T, D]; norm: the RMSNorm to apply to x first; kc: the resolved decode kernels (None: XLA);
        dropout_rng: a PRNG key for the adapters' dropout (None: none)."""
        if self.lora is not None and norm is not None:  # the adapters read the normed x too
            x, norm = norm(x), None
        w = self.gate_up[...].astype(self.dtype)
        if gemv.use_gemv(x, kc is not None and kc.on):  # one token: the [D, 2F] view of the buffer, one kernel
            b, t, d = x.shape
            gu = _matmul(x, w.reshape(d, -1), kc, norm=norm).reshape(b, t, 2, -1)
        else:
            gu = jnp.einsum("btd,dnf->btnf", x if norm is None else norm(x), w)
        if self.gate_up_bias is not None:
            gu = gu + self.gate_up_bias[...].astype(self.dtype)
        gate, up = gu[:, :, 0], gu[:, :, 1]
        if self.lora is not None:
            gate, up = self.lora.add("gate", x, gate, dropout_rng), self.lora.add("up", x, up, dropout_rng)
        hidden = jax.nn.silu(gate) * up
        y = _matmul(hidden, self.down[...].astype(self.dtype), kc)
        if self.lora is not None:
            y = self.lora.add("down", hidden, y, dropout_rng)
        if self.down_bias is not None:
            y = y + self.down_bias[...].astype(self.dtype)
        return y


class Block(nnx.Module):
    """Pre-norm residual block: x + attn(norm(x)); x + mlp(norm(x))."""

    def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs, dtype, param_dtype):
        kw = {"rngs": rngs, "dtype": dtype, "param_dtype": param_dtype}
        self.attn_norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps, **kw)
        self.attn = Attention(cfg, **kw)
        self.mlp_norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps, **kw)
        self.mlp = MLP(cfg, **kw)

    def __call__(self, x, cos, sin, mask, cache_kv, cache_index, kc: DecodeKernels | None = None, dropout_rng=None,
                 attn: AttentionConfig | None = None):
        a, kv = self.attn(x, cos, sin, mask, cache_kv, cache_index, norm=self.attn_norm, kc=kc, dropout_rng=dropout_rng,
                          attn=attn)
        x = x + a
        return x + self.mlp(x, norm=self.mlp_norm, kc=kc, dropout_rng=dropout_rng), kv

    def kernel_weights(self) -> kernel_step.LayerWeights:
        """This layer's parameters as stored, for the decode kernels."""
        a, m = self.attn, self.mlp

        def opt(p):
            return None if p is None else p[...]
        return kernel_step.LayerWeights(
            self.attn_norm.scale[...], self.attn_norm.eps, a.qkv[...], opt(a.qkv_bias),
            None if a.q_norm is None else a.q_norm.scale[...], None if a.k_norm is None else a.k_norm.scale[...],
            a.o[...], opt(a.o_bias), self.mlp_norm.scale[...], self.mlp_norm.eps, m.gate_up[...], opt(m.gate_up_bias),
            m.down[...], opt(m.down_bias))


def _remat_layer(layer: Block, x, cos, sin, mask, dropout_rng=None, attn: AttentionConfig | None = None):
    """One cache-free block whose activations are recomputed in the backward pass: x [B, T, D] -> [B, T, D]
    (mask: as Attention takes it for `attn`).

    jax.checkpoint over the block's state (a block is a pure function of it: nothing in it changes in a forward
    pass). nnx.remat would write its inner trace's values back into the caller's Variables, which a block with LoRA
    adapters, merged from its state inside jax.grad (the train step), refuses (TraceContextError)."""
    graphdef, state = nnx.split(layer)

    @jax.checkpoint
    def block(state, x, cos, sin, mask, dropout_rng):
        return nnx.merge(graphdef, state)(x, cos, sin, mask, None, 0, dropout_rng=dropout_rng, attn=attn)[0]
    return block(state, x, cos, sin, mask, dropout_rng)


def _mask(b: int, t: int, cache: KVCache | None, cache_index, kv_mask, segment_ids) -> jax.Array:
    """bool[B, T, S] (S: the cache's slots, or T): query t sees slot s iff s <= its own slot, kv_mask[s] and (without a
    cache) the same segment."""
    s = t if cache is None else cache.k[0].shape[2]
    q_slot = jnp.asarray(cache_index, jnp.int32) + jnp.arange(t, dtype=jnp.int32)
    mask = q_slot[:, None] >= jnp.arange(s, dtype=jnp.int32)[None, :]
    mask = jnp.broadcast_to(mask[None], (b, t, s))
    if kv_mask is not None:
        mask = mask & kv_mask[:, None, :]
    if segment_ids is not None:
        mask = mask & (segment_ids[:, :, None] == segment_ids[:, None, :])
    return mask


class Decoder(nnx.Module):
    """The policy LLM. `dtype` is the compute dtype, `param_dtype` the storage dtype of weights."""

    def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs, dtype=jnp.float32, param_dtype=jnp.float32):
        self.cfg = cfg
        self.dtype = dtype
        kw = {"rngs": rngs, "dtype": dtype, "param_dtype": param_dtype}
        self.embed = _param(rngs, (cfg.vocab_size, cfg.hidden_size), ("tensor", "fsdp"), param_dtype)
        self.layers = nnx.List([Block(cfg, **kw) for _ in range(cfg.num_layers)])
        self.final_norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps, **kw)
        self.lm_head = (None if cfg.tie_word_embeddings else
                        _param(rngs, (cfg.hidden_size, cfg.vocab_size), ("fsdp", "tensor"), param_dtype))
        inv, att = inv_frequencies(cfg.rope, cfg.head_dim, cfg.max_position_embeddings)
        self._inv_freq, self._att_factor = tuple(float(f) for f in inv), float(att)

    def hidden(self, tokens: jax.Array, positions: jax.Array | None = None, *, kv_mask: jax.Array | None = None,
               cache: KVCache | None = None, cache_index=0, segment_ids: jax.Array | None = None,
               remat: bool = False, kernels: DecodeKernels | None = None, layouts: tuple = (),
               dropout_rng: jax.Array | None = None,
               attention: AttentionConfig | None = None) -> tuple[jax.Array, KVCache | None]:
        """Final-normed hidden states [B, T, D] (compute dtype) and the updated cache.

        tokens, positions: int32[B, T] (positions default to 0..T-1). Without a cache the keys are
        this call's T tokens (causal). With a cache (buffers [B, Hkv, S, Dh]) the new keys are
        written at slots cache_index..cache_index+T-1 and queries see slots <= their own.
        kv_mask: bool[B, S] (S = T without a cache) marks real (non-padding) key slots.
        segment_ids: int32[B, T], without a cache only: packed rows, a query sees only keys of its own
        segment (pass positions that restart at 0 in each segment).
        remat: without a cache, recompute each layer's activations in the backward pass (training memory).
        kernels: the decode kernels for one-row steps (cudaperf_jax.kernels.DecodeKernels; None: XLA only).
        layouts: `kernel_layouts` of these weights (the Sampler builds them once per set of weights), or ().
        dropout_rng: a PRNG key: a training step's dropout on the LoRA adapters' inputs (None: no dropout).
        attention: without a cache, the attention implementation (models.attention.AttentionConfig, resolved here;
        None: XLA's). A fused one (pallas, cudnn) never builds the [B, T, T] mask or scores; the outputs at masked
        positions (kv_mask False) may differ from XLA's, those of real tokens do not (see segments_of).
        """
        b, t = tokens.shape
        if cache is not None and (segment_ids is not None or remat):
            raise ValueError("segment_ids and remat are for cache-free (training) calls; pass cache=None")
        kc = (kernels or XLA).resolve(b)
        # one token: the fused decode layers (they read the base kernels only, so not with adapters)
        if cache is not None and not self.has_adapters and kernel_step.applies(self.cfg, kc, b, t):
            return self._kernel_step(tokens, positions, kv_mask, cache, cache_index, kc, layouts)
        if positions is None:
            positions = jnp.broadcast_to(jnp.arange(t, dtype=jnp.int32), (b, t))
        attn = None if cache is not None else (attention or attention_lib.XLA_ATTENTION).resolve()
        if attn is not None and attn.fused:   # the fused kernels take segment ids, not a [B, T, T] mask
            mask = attention_lib.segments_of(b, t, kv_mask, segment_ids)
        else:
            mask = _mask(b, t, cache, cache_index, kv_mask, segment_ids)
        cos, sin = cos_sin(positions, jnp.asarray(self._inv_freq, jnp.float32), self._att_factor)
        x = jnp.take(self.embed[...], tokens, axis=0).astype(self.dtype)
        new_k, new_v = [], []
        for i, layer in enumerate(self.layers):
            rng = None if dropout_rng is None else jax.random.fold_in(dropout_rng, i)
            if remat:
                x = _remat_layer(layer, x, cos, sin, mask, rng, attn)
                continue
            ckv = None if cache is None else (cache.k[i], cache.v[i])
            x, (k, v) = layer(x, cos, sin, mask, ckv, cache_index, kc, rng, attn)
            new_k.append(k)
            new_v.append(v)
        new_cache = None if cache is None else KVCache(tuple(new_k), tuple(new_v))
        return self.final_norm(x), new_cache

    def _kernel_step(self, tokens, positions, kv_mask, cache: KVCache, cache_index, kc: DecodeKernels, layouts):
        """`hidden` for one token of one sequence through the decode kernels (cudaperf_jax.kernels.step)."""
        s_len = cache.k[0].shape[2]
        kvm = jnp.ones((s_len,), jnp.int32) if kv_mask is None else kv_mask[0].astype(jnp.int32)
        if positions is None:
            positions = jnp.zeros((1, 1), jnp.int32)
        cos, sin = cos_sin(positions, jnp.asarray(self._inv_freq, jnp.float32), self._att_factor)
        x = jnp.take(self.embed[...], tokens[0], axis=0)[0].astype(self.dtype)
        h, new_k, new_v = kernel_step.hidden_step(
            self.cfg, [layer.kernel_weights() for layer in self.layers], x,
            (self.final_norm.scale[...], self.final_norm.eps), cos[0, 0], sin[0, 0], kvm, cache.k, cache.v,
            cache_index, kc=kc, dtype=self.dtype, layouts=layouts)
        return h[None, None, :], KVCache(tuple(new_k), tuple(new_v))

    def kernel_layouts(self, kernels: DecodeKernels | None, batch: int, cache_shape, cache_dtype) -> tuple:
        """The weights laid out for the decode kernels (each layer's gate_up group-major for the step launch's
        one-kernel MLP) where a decode of `batch` sequences with caches of cache_shape [B, Hkv, S, Dh] uses them;
        else (). A pytree of arrays: build it once per set of weights and pass it to `hidden`."""
        kc = (kernels or XLA).resolve(batch)
        if self.has_adapters or not kernel_step.layouts_apply(self.cfg, kc, self.dtype, batch, cache_shape,
                                                              cache_dtype):
            return ()
        return kernel_step.layouts([layer.mlp.gate_up[...] for layer in self.layers], self.dtype)

    @property
    def has_adapters(self) -> bool:
        """Whether any block has LoRA adapters (lora.add_adapters)."""
        return any(layer.attn.lora is not None or layer.mlp.lora is not None for layer in self.layers)

    def logits(self, h: jax.Array, kernels: DecodeKernels | None = None) -> jax.Array:
        """float32 logits [..., V] from hidden states [..., D]; a one-row h goes through the Pallas matvec where
        kernels.lm_head says so."""
        kc = (kernels or XLA).resolve(1)
        kw = {"on": kc.lm_head == "pallas", "table": tilings(kc.tilings), "interpret": kc.interpret,
              "out_dtype": jnp.float32}
        if self.lm_head is None:
            return gemv.matmul(h, self.embed[...].astype(self.dtype), transposed=True, **kw)
        return gemv.matmul(h, self.lm_head[...].astype(self.dtype), **kw)

    def __call__(self, tokens: jax.Array, positions: jax.Array | None = None, *,
                 kv_mask: jax.Array | None = None, cache: KVCache | None = None, cache_index=0,
                 segment_ids: jax.Array | None = None, remat: bool = False, kernels: DecodeKernels | None = None,
                 layouts: tuple = (), dropout_rng: jax.Array | None = None, attention: AttentionConfig | None = None):
        """float32 logits [B, T, V] (and the updated cache when one is given); see `hidden`."""
        h, new_cache = self.hidden(tokens, positions, kv_mask=kv_mask, cache=cache, cache_index=cache_index,
                                   segment_ids=segment_ids, remat=remat, kernels=kernels, layouts=layouts,
                                   dropout_rng=dropout_rng, attention=attention)
        out = self.logits(h, kernels)
        return out if cache is None else (out, new_cache)
