"""The attention of the decoder's cache-free (training) forward, chosen by one typed config.

    cfg = AttentionConfig()                         # auto: pallas on one GPU, xla elsewhere
    run = cfg.resolve()                             # `auto` replaced by what runs here (static in jit)
    out = flash(q, k, v, segments, run)             # q [B, T, H, Dh], k/v [B, T, Hkv, Dh] -> [B, T, H, Dh]

The mask is the same for every implementation: query i sees key j iff j <= i and segments[b, j] == segments[b, i]
(Decoder.hidden maps packed SFT rows' segment_ids and RL's kv_mask onto `segments`, see `segments_of`).

Implementations (`implementation`):
  xla     the decoder's einsum + softmax: float32 scores [B, H, T, T] per layer (12 heads at T=3072: 453 MB a row, a
          layer, before the masked copy, the probabilities and their gradients). The only one on the CPU.
  pallas  flash attention in Pallas' Triton backend (jax.experimental.pallas.ops.gpu.attention.mha): blocks of
          queries against blocks of keys with an online softmax, causal blocks above the diagonal skipped, segment
          ids compared in the kernel, its own fused backward kernel (dq, dk, dv from the saved log-sum-exp); no
          [T, T] buffer. Keys and values are repeated to the query heads (the kernel has no groups); T is padded to
          a multiple of the blocks (padding is its own segment, after every real key). One device only (a
          pallas_call has no partitioning rule: on a mesh use cudnn or xla). interpret=True runs it in Pallas'
          interpreter (CPU tests).
  cudnn   cuDNN's fused flash attention (jax.nn.dot_product_attention(implementation="cudnn")): causal, grouped
          heads natively, the segment mask as an additive bf16 bias [B, 1, T, T] (whose gradient cuDNN also
          computes); bfloat16 / float16 compute and a GPU only.

The decode path (a KV cache) always uses the XLA attention (one query row per step; Pallas' decode kernels elsewhere).
"""
from __future__ import annotations

import dataclasses
import functools
import warnings

import jax
import jax.numpy as jnp

from cudaperf_jax.experiment.config import ConfigFieldError

IMPLEMENTATIONS = ("auto", "xla", "pallas", "cudnn")
GPU_DEFAULT = "pallas"   # what `auto` runs on one GPU (benchmarks/train_speed.py measures xla, pallas, cudnn)
PAD_SEGMENT = -1         # the segment id of the positions `flash` pads T with (real ids are >= 0)


@dataclasses.dataclass(frozen=True)
class AttentionConfig:
    """Which attention the cache-free forward (SFT and RL updates, RL's reference pass) runs; frozen and hashable, a
    static argument of the jitted steps. The block fields tune `pallas` only."""
    implementation: str = "auto"   # auto (pallas on one GPU, xla elsewhere) | xla | pallas | cudnn
    block_q: int = 128             # pallas forward: query rows per program (a power of two >= 16)
    block_k: int = 128             # pallas forward: keys per inner step (a power of two >= 16)
    block_bwd: int = 64            # pallas backward: the query and key blocks of the dq/dk/dv kernel
    num_warps: int = 0             # pallas: warps per program (0: the kernel's default, 4 or 8 by head dim/blocks)
    interpret: bool = False        # pallas in Pallas' interpreter (runs on the CPU; tests)

    def __post_init__(self):
        if self.implementation not in IMPLEMENTATIONS:
            raise ConfigFieldError(f"attention.implementation={self.implementation!r}: choose one of "
                                   f"{', '.join(IMPLEMENTATIONS)}")
        for name in ("block_q", "block_k", "block_bwd"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 16 or v & (v - 1):
                raise ConfigFieldError(f"attention.{name}={v!r}: use a power of two >= 16")
        if not isinstance(self.num_warps, int) or self.num_warps not in (0, 1, 2, 4, 8, 16):
            raise ConfigFieldError(f"attention.num_warps={self.num_warps!r}: use 0 (the kernel's default) or a power "
                                   "of two up to 16")

    def resolve(self) -> AttentionConfig:
        """This config with `auto` replaced by what runs here: pallas (GPU_DEFAULT) on one GPU, pallas in the
        interpreter when interpret is set, xla elsewhere."""
        if self.implementation != "auto":
            return self
        if self.interpret:
            return dataclasses.replace(self, implementation="pallas")
        one_gpu = jax.default_backend() == "gpu" and jax.device_count() == 1
        return dataclasses.replace(self, implementation=GPU_DEFAULT if one_gpu else "xla")

    @property
    def fused(self) -> bool:
        """Whether this (resolved) config runs a fused kernel (`flash`) rather than the decoder's XLA attention."""
        return self.implementation in ("pallas", "cudnn")


XLA_ATTENTION = AttentionConfig(implementation="xla")


def segments_of(b: int, t: int, kv_mask: jax.Array | None, segment_ids: jax.Array | None) -> jax.Array:
    """int32[B, T] segment ids whose causal same-segment mask is the decoder's mask for every query of a real token.

    segment_ids (packed rows, 0 on padding) as they are; kv_mask (bool[B, T], False on padding) as 1 real / 0 padding;
    both: segment_ids + 1 where kv_mask, 0 elsewhere. A query at a masked position then sees the other masked
    positions before it, where the XLA mask lets it see the real keys before it (or, with none, every key evenly):
    only such queries' outputs differ, and nothing reads them (losses weigh them 0, real tokens never attend to
    them)."""
    if segment_ids is None and kv_mask is None:
        return jnp.zeros((b, t), jnp.int32)
    if kv_mask is None:
        return segment_ids.astype(jnp.int32)
    real = kv_mask.astype(bool)
    if segment_ids is None:
        return real.astype(jnp.int32)
    return jnp.where(real, segment_ids.astype(jnp.int32) + 1, 0)


def flash(q: jax.Array, k: jax.Array, v: jax.Array, segments: jax.Array, cfg: AttentionConfig) -> jax.Array:
    """Causal same-segment attention of a resolved fused config (pallas | cudnn): q [B, T, H, Dh], k and v
    [B, T, Hkv, Dh] (H a multiple of Hkv; query head h reads key head h // (H / Hkv)), segments int32[B, T] ->
    [B, T, H, Dh] in q's dtype, scaled by Dh^-0.5."""
    if cfg.implementation == "pallas":
        return _pallas(q, k, v, segments, cfg)
    if cfg.implementation == "cudnn":
        return _cudnn(q, k, v, segments)
    raise ValueError(f"attention.implementation={cfg.implementation!r} is not a fused kernel; resolve the config and "
                     "use the decoder's XLA attention for xla")


@functools.cache
def _mha():
    with warnings.catch_warnings():   # deprecated in jax 0.11 in favour of tokamax (not a dependency here)
        warnings.simplefilter("ignore", DeprecationWarning)
        from jax.experimental.pallas.ops.gpu import attention
    return attention


def _pallas(q, k, v, segments, cfg: AttentionConfig):
    if not cfg.interpret and jax.default_backend() != "gpu":
        raise ValueError("attention.implementation='pallas' compiles for a GPU; on the CPU use xla (or auto), or "
                         "attention.interpret=true (Pallas' interpreter, slow)")
    mha = _mha()
    _, t, h, dh = q.shape
    g = h // k.shape[2]
    if g > 1:   # the kernel has no head groups; the gradient of the repeat sums the groups back
        k, v = jnp.repeat(k, g, axis=2), jnp.repeat(v, g, axis=2)
    fit = 1 << max(t - 1, 1).bit_length()              # the smallest power of two >= t
    blocks = tuple(max(16, min(x, fit)) for x in (cfg.block_q, cfg.block_k, cfg.block_bwd))
    step = max(blocks)
    padded = -(-t // step) * step
    if padded != t:   # padding: its own segment, after every real key (causality keeps real queries off it)
        pad = ((0, 0), (0, padded - t), (0, 0), (0, 0))
        q, k, v = jnp.pad(q, pad), jnp.pad(k, pad), jnp.pad(v, pad)
        segments = jnp.pad(segments, ((0, 0), (0, padded - t)), constant_values=PAD_SEGMENT)
    bq, bk, bb = blocks
    sizes = mha.BlockSizes(block_q=bq, block_k=bk, block_q_dkv=bb, block_kv_dkv=bb, block_q_dq=bb, block_kv_dq=bb)
    out = mha.mha(q, k, v, segments, sm_scale=dh ** -0.5, causal=True, block_sizes=sizes,
                  num_warps=cfg.num_warps or None, interpret=cfg.interpret)
    return out[:, :t]


def _cudnn(q, k, v, segments):
    if q.dtype not in (jnp.bfloat16, jnp.float16):
        raise ValueError(f"attention.implementation='cudnn' needs bfloat16 or float16 compute, not {q.dtype}; use "
                         "dtype=bfloat16 or attention.implementation=pallas|xla")
    mask = segments[:, None, :, None] == segments[:, None, None, :]          # [B, 1, T, T]
    return jax.nn.dot_product_attention(q, k, v, mask=mask, is_causal=True, implementation="cudnn")
