"""Every layer of a batch-1 decode step from ONE FFI call (matvec.cu StepImpl), for hidden sizes >= STEP_MIN_D.

Per layer five kernels (four with the one-kernel MLP), chained by programmatic dependent launch (PDL `late`: a kernel
lets the next launch once its own wait has returned, so one kernel runs ahead prefetching its first weights), across
the layer boundaries too:

  qkv     matvec with the RMSNorm prologue; after the first layer its split-K column sums go to 64-bit fixed-point
          accumulators (deterministic in any order) and the attention reads one sum a column;
  attend  layer_kernel.cuh's attention (cache splits x query-head groups), writes the new key and value in place;
  o       matvec with the attention-merge prologue, adding into the residual's fixed-point sums (the `fold finish`:
          the next norm prologue rebuilds the residual stream, no finish kernel);
  mlp     gate_up and down as one kernel (group-major gate_up, `mlp_gm_layout`, blocks of 768 threads held to 64
          registers), adding into the residual's fixed-point sums; a gate_up not laid out group-major runs the
          row-major `lean` kernel; shapes it does not take run gate_up and down as two kernels.

The numbers follow the XLA path's roundings (bf16 after each projection). History and timings: docs/decode_kernels.md.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from cudaperf_jax.kernels import cuda_ffi
from cudaperf_jax.kernels.cuda_build import TARGETS, require_gpu

STEP_MIN_D = 1024        # the step launch runs from this hidden size on (SmolLM2-135M, D 576, was faster without)
FINISH_CHUNK = 128       # entries of the residual stream per sum of squares (fused.FINISH_CHUNK)
MAX_GROUP, MAX_SMEM = 16, 200 * 1024   # layer_kernel.cuh's kMaxGroup; the handler's shared-memory cap
ATTEND_MAX_SLOTS = 128   # layer_kernel.cuh kAttendMaxSlots
ATTN_SPLITS = 8          # cache splits per KV head (H200, 192-slot cache: 1.641 ms a step with 8, 1.696 with 4)
BLOCKS_PER_SM = 3        # layer_kernel.cuh's kLayerMinBlocks
PDL_LATE = 3             # matvec_kernel.cuh's kPdlOn | kPdlLate
PF_QKV_FIXED = 8         # layer_kernel.cuh kPfQkvFixed
MLP_LEAN, MLP_GM768 = 3, 6   # matvec.cu StepImpl's MLP codes: row-major lean kernel; group-major, 768 threads

LAYER_KEYS = ("attn_scale", "mlp_scale", "w_qkv", "b_qkv", "q_norm", "k_norm", "k_cache", "v_cache", "w_o", "b_o",
              "w_gu", "b_gu", "w_down", "b_down")
LAYER_OPTIONAL = ("b_qkv", "q_norm", "b_o", "b_gu", "b_down")   # in the order of the handler's has_* ints
_DUMMY_BF16 = np.zeros((1,), jnp.bfloat16)


def _heads_ok(heads: int, kv_heads: int, head_dim: int) -> bool:
    return (kv_heads >= 1 and heads % kv_heads == 0 and heads // kv_heads <= MAX_GROUP
            and head_dim in (32, 64, 128, 256))


def tilings(d: int, n_qkv: int, hdh: int, f: int, table: dict) -> list[tuple[int, int, int, int, int]]:
    """(K, N, split_k, cols, unroll) of the step's qkv, o, gate_up and down matvecs."""
    return [(k, n, *cuda_ffi.tiling_for(k, n, table, step=True)) for k, n in ((d, n_qkv), (hdh, d), (d, 2 * f), (f, d))]


def attn_splits(s_len: int) -> int:
    """Cache splits per KV head: ATTN_SPLITS, raised until a split's slots (in shared memory) fit ATTEND_MAX_SLOTS."""
    return max(ATTN_SPLITS, -(-s_len // ATTEND_MAX_SLOTS))


def head_groups(g: int) -> int:
    """Attention blocks per (KV head, cache split): one query head per block when g >= 4, else one block."""
    return g if g >= 4 else 1


def supported(d: int, heads: int, kv_heads: int, head_dim: int, f: int, s_len: int, table: dict) -> bool:
    """Shapes the step launch takes: the attention's head limits, FINISH_CHUNK dividing D, the matvec tilings, the
    attention split in shared memory."""
    if d < STEP_MIN_D or not _heads_ok(heads, kv_heads, head_dim) or d % FINISH_CHUNK:
        return False
    g = heads // kv_heads
    n_qkv = (heads + 2 * kv_heads) * head_dim
    if not all(cuda_ffi.supported(k, n, s, c) for k, n, s, c, _ in tilings(d, n_qkv, heads * head_dim, f, table)):
        return False
    span = -(-s_len // attn_splits(s_len))
    kv = span * (head_dim + (0 if head_dim == 32 else 32)) * 2   # layer_kernel.cuh attend_smem_bytes
    att = max(kv, 2 * 256 * g * 4) + kv + ((g + 2) * head_dim + (g + 1) * head_dim + 32 + g * span + span +
                                           3 * MAX_GROUP + 2 * head_dim) * 4
    return att <= MAX_SMEM


def mlp_gm_layout(w_gu):
    """gate_up ([D, 2, F] or [D, 2F]: gate columns, then up columns) group-major: [F / 8, D, 16], row r of group q
    holding gate columns 8q..8q+7 then up columns 8q..8q+7 - each 8-feature group one contiguous block
    (matvec_kernel.cuh mlp_body kGM). numpy or jax arrays."""
    d = w_gu.shape[0]
    f = w_gu.size // (2 * d)
    return w_gu.reshape(d, 2, f // 8, 8).transpose(2, 0, 1, 3).reshape(f // 8, d, 16)


def mlp_row_major(w_gm):
    """mlp_gm_layout's inverse: [F / 8, D, 16] -> [D, 2F] (gate columns, then up columns)."""
    q, d, _ = w_gm.shape
    return w_gm.reshape(q, d, 2, 8).transpose(1, 2, 0, 3).reshape(d, 16 * q)


def gm_applies(d: int, f: int) -> bool:
    """Whether the one-kernel MLP takes these sizes (then the group-major gate_up is worth preparing)."""
    return d % 8 == 0 and f % 8 == 0 and d <= 8192


def head_dim_scale(dh: int) -> float:
    """The attention scale fused.attend uses (dh ** -0.5)."""
    return dh ** -0.5


def _opt(a):
    """An optional bf16 parameter, or the 1-element dummy the handler ignores."""
    return _DUMMY_BF16 if a is None else a.astype(jnp.bfloat16)


def _plan(d, cache_shape, n_qkv, hdh, f, heads, chunk, optional, pdl, table):
    """The handler's int attributes and its outputs other than the caches."""
    _, hkv, s_len, dh = cache_shape
    splits = attn_splits(s_len)
    full = tilings(d, n_qkv, hdh, f, table)
    tiling, unrolls = [(s, c) for _, _, s, c, _ in full], [u for *_, u in full]
    if chunk != FINISH_CHUNK or not supported(d, heads, hkv, dh, f, s_len, table):
        raise ValueError(f"cuda_step.step: shapes not taken (D {d}, heads {heads}/{hkv}, head dim {dh}, F {f}, cache "
                         f"{s_len}, chunk {chunk}); check cuda_step.supported")
    require_gpu()
    g = heads // hkv
    bf, f32 = jnp.bfloat16, jnp.float32
    scratch = [jax.ShapeDtypeStruct((d,), bf), jax.ShapeDtypeStruct((d // chunk,), f32),
               jax.ShapeDtypeStruct((tiling[0][0] * n_qkv,), f32), jax.ShapeDtypeStruct((hkv * splits * g * dh,), f32),
               jax.ShapeDtypeStruct((hkv * splits * 2 * g,), f32), jax.ShapeDtypeStruct((tiling[1][0] * d,), f32),
               jax.ShapeDtypeStruct((d,), bf), jax.ShapeDtypeStruct((d // chunk,), f32),
               jax.ShapeDtypeStruct((tiling[2][0] * 2 * f,), f32), jax.ShapeDtypeStruct((tiling[3][0] * d,), f32)]
    # heads, splits, 4 splits, 4 cols, chunk, 5 has_*, pdl, mode 2 (standalone kernels), blocks/SM, 4 unrolls,
    # head groups, then 4 words of prefetch settings: only the flags word (index 25) is used (kPfQkvFixed)
    ints = [heads, splits, *(s for s, _ in tiling), *(c for _, c in tiling), chunk, *(a is not None for a in optional),
            int(pdl), 2, BLOCKS_PER_SM, *unrolls, head_groups(g), 0, 0, 0, 0]
    return ints, scratch


def step(x, ss, layers, *, cos, sin, kv_mask, cache_index, heads: int, chunk: int, eps_attn: float, eps_mlp: float,
         eps_qk: float, table: dict, pdl: bool = True):
    """Every decoder layer of a batch-1 decode step from one FFI call, with fused.py's roundings.

    x bf16 [D] and ss (its sums of squares per `chunk` entries, fused.finish's) are the first layer's input; layers:
    one dict per layer with LAYER_KEYS (weights bf16 w_qkv [D, (H + 2 Hkv) Dh], w_o [H Dh, D], w_gu [D, 2F] or
    group-major [F / 8, D, 16], w_down [F, D]; optional ones None, the same ones in every layer; caches
    [1, Hkv, S, Dh] bf16, updated in place: donate them); cos/sin float32 [Dh]; kv_mask [S]; cache_index int32.
    pdl: chain the kernels by PDL (only for weights no kernel of the program writes). Returns (x_out bf16 [D], its
    sums of squares, new k caches, new v caches)."""
    if not layers:
        raise ValueError("cuda_step.step: needs at least one layer")
    first = layers[0]
    optional = tuple(first[k] for k in LAYER_OPTIONAL)
    if any((l[k] is None) != (first[k] is None) for l in layers for k in LAYER_OPTIONAL):
        raise ValueError("cuda_step.step: every layer must have the same optional parameters")
    d, f = x.shape[0], first["w_down"].shape[0]
    ints, scratch = _plan(d, first["k_cache"].shape, first["w_qkv"].shape[1], first["w_o"].shape[0], f, heads, chunk,
                          optional, PDL_LATE if pdl else 0, table)
    bf, f32 = jnp.bfloat16, jnp.float32
    fold = ints[3] >= 2 and ints[5] >= 2   # o and down split-K >= 2: their scratch holds the fixed-point sums
    if fold and ints[2] >= 2:
        ints[25] |= PF_QKV_FIXED
    mlp = fold and gm_applies(d, f)
    gm = first["w_gu"].ndim == 3
    if gm and not mlp:   # prepared for a one-kernel MLP that does not run: row-major
        layers = [dict(l, w_gu=mlp_row_major(l["w_gu"])) for l in layers]
        gm = False
    code = MLP_GM768 if gm else MLP_LEAN
    args = [x.astype(bf), ss.astype(f32), cos.astype(f32), sin.astype(f32), kv_mask.astype(jnp.int32),
            jnp.asarray(cache_index, jnp.int32).reshape(1)]
    aliases, cache_shapes = {}, []
    for l in layers:
        for key in LAYER_KEYS:
            if key in ("k_cache", "v_cache"):
                aliases[len(args)] = len(scratch) + len(cache_shapes)
                cache_shapes.append(jax.ShapeDtypeStruct(l[key].shape, bf))
                args.append(l[key])
            else:
                args.append(_opt(l[key]))
    floats = np.asarray([eps_attn, eps_mlp, eps_qk, head_dim_scale(first["k_cache"].shape[3])], np.float32)
    out = jax.ffi.ffi_call(TARGETS["step"][0], scratch + cache_shapes, input_output_aliases=aliases)(
        *args, ints=np.asarray(ints + [len(layers), int(fold), code if mlp else 0], np.int64), floats=floats)
    caches = out[len(scratch):]
    return out[0], out[1], list(caches[0::2]), list(caches[1::2])
