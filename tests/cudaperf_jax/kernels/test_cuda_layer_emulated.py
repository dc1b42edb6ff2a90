"""The step launch's kernels (cuda/layer_kernel.cuh's attend_kernel, matvec_kernel.cuh's matvecs, MLP and finish
kernels, in matvec.cu's order) run by the CPU emulation, against a numpy decoder layer with fused.py's bf16 roundings: Qwen2-like (qkv bias, GQA), Qwen3-like (q/k norms, no bias), left padding, a hidden
size that is not a multiple of 128, longer caches and attention head groups."""
import ctypes

import jax.numpy as jnp
import numpy as np
import pytest

from cudaperf_jax.kernels import cuda_build, cuda_step
from kernels_harness.emulation import EmulatedLibrary, build_shared_library

ENTRY = r'''
using namespace cudaperf_layer;

void fill(LayerParams& p, void** b, const int* n, const float* fl) {
  p.d = n[0]; p.h = n[1]; p.hkv = n[2]; p.dh = n[3]; p.f = n[4]; p.s_len = n[5]; p.chunk = n[6];
  p.attn_splits = n[7];
  for (int i = 0; i < 4; ++i) { p.split[i] = n[8 + i]; p.cols[i] = n[12 + i]; }
  p.span_max = (p.s_len + p.attn_splits - 1) / p.attn_splits;
  p.eps_attn = fl[0]; p.eps_mlp = fl[1]; p.eps_qk = fl[2]; p.scale = fl[3];
  typedef const __nv_bfloat16* cb;
  p.x = (cb)b[0]; p.ss = (const float*)b[1]; p.attn_scale = (cb)b[2]; p.mlp_scale = (cb)b[3]; p.w_qkv = (cb)b[4];
  p.b_qkv = (cb)b[5]; p.q_norm = (cb)b[6]; p.k_norm = (cb)b[7]; p.cos = (const float*)b[8]; p.sin = (const float*)b[9];
  p.kv_mask = (const int*)b[10]; p.cache_index = (const int*)b[11]; p.k_cache = (__nv_bfloat16*)b[12];
  p.v_cache = (__nv_bfloat16*)b[13]; p.w_o = (cb)b[14]; p.b_o = (cb)b[15]; p.w_gu = (cb)b[16]; p.b_gu = (cb)b[17];
  p.w_down = (cb)b[18]; p.b_down = (cb)b[19]; p.qkv_parts = (float*)b[20]; p.acc = (float*)b[21]; p.ml = (float*)b[22];
  p.o_parts = (float*)b[23]; p.x_mid = (__nv_bfloat16*)b[24]; p.ss_mid = (float*)b[25]; p.gu_parts = (float*)b[26];
  p.down_parts = (float*)b[27]; p.x_out = (__nv_bfloat16*)b[28]; p.ss_out = (float*)b[29];
}

template <int TPR, int MODE>
int mv(const Prologue& pro, const __nv_bfloat16* w, int k, int n, int split, float* y,
       const cudaperf_matvec::Epilogue& epi) {
  const int smem = (k / split + (MODE == cudaperf_matvec::kResNorm ? k : 0)) * 4;
  cudaperf_matvec::matvec_kernel<TPR, 4, MODE, true><<<dim3(n / (8 * TPR), split), kThreads, smem>>>(
      pro, epi, w, n, k / split, y, n, 0);
  cudaDeviceSynchronize();
  return (int)cudaGetLastError();
}

template <int MODE>
int mv_cols(int cols, const Prologue& pro, const __nv_bfloat16* w, int k, int n, int split, float* y,
            const cudaperf_matvec::Epilogue& epi = {}) {
  if (cols == 256) return mv<32, MODE>(pro, w, k, n, split, y, epi);
  if (cols == 128) return mv<16, MODE>(pro, w, k, n, split, y, epi);
  return mv<8, MODE>(pro, w, k, n, split, y, epi);
}

// A layer's standalone kernels with the finish kernels (matvec.cu layer_kernels without the fold), in its order.
// arg: the attention's head groups.
extern "C" int run_layer_kernels(void** b, const int* n, const float* fl, int arg) {
  const int head_groups = arg, attend_pdl = 0;
  LayerParams p = {};
  fill(p, b, n, fl);
  p.attn_hsplit = head_groups;
  const int g = p.h / p.hkv, n_qkv = (p.h + 2 * p.hkv) * p.dh, kc = cudaperf_matvec::kFinishChunk;
  int e = mv_cols<cudaperf_matvec::kNorm>(p.cols[0], norm_prologue(p, false), p.w_qkv, p.d, n_qkv, p.split[0], p.qkv_parts);
  if (e) return e;
  const size_t att_smem = attend_smem_bytes(g, p.dh, p.span_max);
  if (p.dh != 128 || g / head_groups > 4) return 98;   // the cases below: head dim 128, <= 4 heads per block
  cudaFuncSetAttribute(attend_kernel<128, 4>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)att_smem);
  attend_kernel<128, 4><<<p.hkv * p.attn_splits * head_groups, kThreads, att_smem>>>(p, attend_pdl);
  cudaDeviceSynchronize();
  if ((e = (int)cudaGetLastError())) return e;
  if ((e = mv_cols<cudaperf_matvec::kAttn>(p.cols[1], attn_prologue(p), p.w_o, p.h * p.dh, p.d, p.split[1], p.o_parts))) return e;
  cudaperf_matvec::finish_kernel<true><<<p.d / kc, kc>>>(p.x, p.o_parts, p.split[1], p.d, p.b_o, p.x_mid, p.ss_mid, 0);
  cudaDeviceSynchronize();
  if ((e = (int)cudaGetLastError())) return e;
  if ((e = mv_cols<cudaperf_matvec::kNorm>(p.cols[2], norm_prologue(p, true), p.w_gu, p.d, 2 * p.f, p.split[2], p.gu_parts))) return e;
  if ((e = mv_cols<cudaperf_matvec::kSwiglu>(p.cols[3], swiglu_prologue(p), p.w_down, p.f, p.d, p.split[3], p.down_parts))) return e;
  cudaperf_matvec::finish_kernel<true><<<p.d / kc, kc>>>(p.x_mid, p.down_parts, p.split[3], p.d, p.b_down, p.x_out, p.ss_out, 0);
  cudaDeviceSynchronize();
  return (int)cudaGetLastError();
}

// to_fixed / from_fixed: out[0] = from_fixed(sum of to_fixed(v[0..5])), out[1] the same added in reverse order,
// out[2] with v[6] (2^20) added, out[3] with v[7] and v[8] (inf, nan) added.
__global__ void fixed_sums_kernel(const float* v, float* out) {
  using namespace cudaperf_matvec;
  unsigned long long a = 0, b = 0;
  for (int i = 0; i < 6; ++i) a += to_fixed(v[i]);
  for (int i = 5; i >= 0; --i) b += to_fixed(v[i]);
  out[0] = from_fixed(a);
  out[1] = from_fixed(b);
  out[2] = from_fixed(a + to_fixed(v[6]));
  out[3] = from_fixed(a + to_fixed(v[7]) + to_fixed(v[8]));
}

extern "C" int fixed_sums(const float* v, float* out) {
  fixed_sums_kernel<<<1, 1>>>(v, out);
  cudaDeviceSynchronize();
  return (int)cudaGetLastError();
}

// The step launch with its finish kernels folded into their consumers (matvec.cu's layer_kernels with kFoldOn, as
// StepImpl chains them): layer l's buffers at b + 30 l, the residual stream and the scratch those of layer 0.
// arg: the layer count + 100 x the one-kernel MLP's blocks (kFoldMlp: mlp_kernel instead of gate_up and down; 0 for
// the two kernels) + 100000 with its staggered adds (kFoldMlpRotate), + 200000 as mlp_kernel_lean (kFoldMlpLean), + 300000
// group-major (kFoldMlpGM: w_gu as cuda_step.mlp_gm_layout) as mlp_kernel_lean (+ 500000 as well: the test gives it
// row-major weights), + 400000 the same as mlp_kernel, + 600000 group-major as mlp_kernel_capped of 768 threads,
// + 700000 group-major wide (more groups a block than warps: the host's choice then); + 10000000: qkv's sums as fixed
// point after the first layer (kPfQkvFixed: o clears them, the attention reads them).
extern "C" int run_step_fold(void** b, const int* n, const float* fl, int arg) {
  using namespace cudaperf_matvec;
  const int n_layers = arg % 100, mlp_blocks = arg / 100 % 1000, variant = arg / 100000 % 100;
  const bool qkv_fixed = arg / 10000000 != 0;
  LayerParams p0 = {};
  fill(p0, b, n, fl);
  const __nv_bfloat16* prev_b_down = nullptr;
  const int n_qkv = (p0.h + 2 * p0.hkv) * p0.dh, kc = kFinishChunk;
  for (int l = 0; l < n_layers; ++l) {
    LayerParams p = {};
    fill(p, b + 30 * l, n, fl);
    p.qkv_parts = p0.qkv_parts; p.acc = p0.acc; p.ml = p0.ml; p.o_parts = p0.o_parts; p.x_mid = p0.x_mid;
    p.ss_mid = p0.ss_mid; p.gu_parts = p0.gu_parts; p.down_parts = p0.down_parts; p.x_out = p0.x_out;
    p.ss_out = p0.ss_out;
    if (l > 0) { p.x = p0.x_out; p.ss = p0.ss_out; }
    p.attn_hsplit = 1;
    int e;
    if (l == 0) {
      Prologue qp = norm_prologue(p, false);
      qp.zero = fold_sums(p.o_parts);
      qp.n_zero = p.d;
      e = mv_cols<kNorm>(p.cols[0], qp, p.w_qkv, p.d, n_qkv, p.split[0], p.qkv_parts);
    } else {
      Epilogue qe = {};
      if (qkv_fixed) {
        qe.mode = kEpiFixed;
        qe.fixed = fold_sums(p.qkv_parts);
        p.qkv_fixed = 1;
      }
      e = mv_cols<kResNorm>(p.cols[0], resnorm_prologue(p, false, prev_b_down), p.w_qkv, p.d, n_qkv, p.split[0],
                            p.qkv_parts, qe);
    }
    if (e) return e;
    const size_t att_smem = attend_smem_bytes(p.h / p.hkv, p.dh, p.span_max);
    if (p.dh != 128 || p.h / p.hkv > 4) return 98;
    cudaFuncSetAttribute(attend_kernel<128, 4>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)att_smem);
    attend_kernel<128, 4><<<p.hkv * p.attn_splits, kThreads, att_smem>>>(p, 0);
    cudaDeviceSynchronize();
    if ((e = (int)cudaGetLastError())) return e;
    Epilogue oe = {}, de = {};
    oe.mode = de.mode = kEpiFixed;
    oe.fixed = fold_sums(p.o_parts);
    de.fixed = fold_sums(p.down_parts);
    Prologue op = attn_prologue(p);
    if (qkv_fixed) {   // cleared for the next layer's qkv
      op.zero2 = fold_sums(p.qkv_parts);
      op.n_zero2 = n_qkv;
    }
    if (mlp_blocks) {
      op.zero = fold_sums(p.down_parts);
      op.n_zero = p.d;
    }
    if ((e = mv_cols<kAttn>(p.cols[1], op, p.w_o, p.h * p.dh, p.d, p.split[1], p.o_parts, oe))) return e;
    if (mlp_blocks) {   // matvec.cu's launch_mlp
      Prologue mp = resnorm_prologue(p, true, nullptr);
      mp.zero = nullptr;
      mp.n_zero = 0;
      const int nt = variant == 6 ? 768 : kMlpThreads;
      const size_t smem = (variant == 6 ? mlp_smem_floats<768>(p.d, p.f, mlp_blocks)
                                        : mlp_smem_floats<kMlpThreads>(p.d, p.f, mlp_blocks)) * 4;
      auto kernel = variant == 1 ? mlp_kernel<kMlpThreads, 2>
                    : variant == 2 ? mlp_kernel_lean<kMlpThreads, 1>
                    : variant == 3 || variant == 5 ? mlp_kernel_lean<kMlpThreads, 1, true>
                    : variant == 4 ? mlp_kernel<kMlpThreads, 1, true>
                    : variant == 6 ? mlp_kernel_capped<768, 64, 6, 4>
                    : variant == 7 ? mlp_kernel<kMlpThreads, 1, true, 4, 4, true> : mlp_kernel<kMlpThreads, 1>;
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
      kernel<<<mlp_blocks, nt, smem>>>(mp, p.w_gu, p.b_gu, p.w_down, p.d, p.f, fold_sums(p.down_parts), 0);
      cudaDeviceSynchronize();
      if ((e = (int)cudaGetLastError())) return e;
    } else {
      if ((e = mv_cols<kResNorm>(p.cols[2], resnorm_prologue(p, true, nullptr), p.w_gu, p.d, 2 * p.f, p.split[2], p.gu_parts))) return e;
      if ((e = mv_cols<kSwiglu>(p.cols[3], swiglu_prologue(p), p.w_down, p.f, p.d, p.split[3], p.down_parts, de))) return e;
    }
    prev_b_down = p.b_down;
  }
  finish_kernel<true, true><<<p0.d / kc, kc>>>(p0.x_mid, p0.down_parts, 1, p0.d, prev_b_down, p0.x_out, p0.ss_out, 0);
  cudaDeviceSynchronize();
  return (int)cudaGetLastError();
}
'''
BF16 = jnp.bfloat16


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    layer_src = cuda_build.LAYER_KERNEL.read_text().replace("#pragma once", "").replace('#include "matvec_kernel.cuh"', "")
    src = cuda_build.KERNEL.read_text().replace("#pragma once", "") + layer_src + ENTRY
    res = build_shared_library(src, tmp_path_factory.mktemp("layer") / "layer.so", checks=False)
    assert res.ok, res.log[:3000]
    lib = EmulatedLibrary(res.path)
    fns = {}
    for name in ("run_layer_kernels", "run_step_fold"):
        fns[name] = lib.entry(name)
        fns[name].argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
    fns["fixed_sums"] = lib.entry("fixed_sums")
    fns["fixed_sums"].argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    return lib, fns


def _bf(a):
    return np.asarray(a, np.float32).astype(BF16)


def _r(a):
    return _bf(a).astype(np.float32)


def _norm(x, scale, eps):
    rstd = np.float32(1.0) / np.sqrt(np.float32(np.sum(x.astype(np.float64) ** 2) / x.size) + np.float32(eps))
    return _r(_r(x * rstd) * scale)


def _rope(a, cos, sin):
    half = a.shape[-1] // 2
    lo, hi = a[..., :half], a[..., half:]
    return np.concatenate([_r(lo * cos[:half] - hi * sin[:half]), _r(hi * cos[half:] + lo * sin[half:])], axis=-1)


def attention_half(w, x, kc, vc, mask, idx, cos, sin, heads, eps):
    """numpy attention block with fused.py's roundings: (x + attention, k row, v row written at idx)."""
    hkv, _, dh = kc.shape
    g = heads // hkv
    f32 = {k: (None if v is None else v.astype(np.float32)) for k, v in w.items()}
    xn = _norm(x, f32["attn_scale"], eps)
    qkv = _r(xn.astype(np.float64) @ f32["w_qkv"].astype(np.float64))
    if f32["b_qkv"] is not None:
        qkv = _r(qkv + f32["b_qkv"])
    qkv = qkv.reshape(heads + 2 * hkv, dh)
    q, k, v = qkv[:heads], qkv[heads:heads + hkv], qkv[heads + hkv:]
    if f32["q_norm"] is not None:
        q = np.stack([_norm(r, f32["q_norm"], eps) for r in q])
        k = np.stack([_norm(r, f32["k_norm"], eps) for r in k])
    q, k = _rope(q, cos, sin), _rope(k, cos, sin)
    out = np.zeros((heads, dh), np.float32)
    for h in range(heads):
        j = h // g
        valid = (np.arange(kc.shape[1]) < idx) & (mask != 0)
        keys = np.where(valid[:, None], kc[j].astype(np.float32), 0.0)
        vals = np.where(valid[:, None], vc[j].astype(np.float32), 0.0)
        s = (keys @ q[h]) * dh ** -0.5
        s_own = float(q[h] @ k[j]) * dh ** -0.5
        own = mask[idx] != 0
        m = max(s[valid].max(initial=-1e30), s_own if own else -1e30)
        p = np.where(valid, np.exp(s - m), 0.0)
        p_own = np.exp(s_own - m) if own else 0.0
        num = (_r(p)[:, None] * vals).sum(0) + p_own * v[j]
        out[h] = num / (p.sum() + p_own)
    attn = _r(out.reshape(-1))
    o = _r(attn.astype(np.float64) @ f32["w_o"].astype(np.float64))
    if f32["b_o"] is not None:
        o = _r(o + f32["b_o"])
    return _r(x + o), k, v


def mlp_half(w, x1, eps):
    """numpy MLP block with fused.py's roundings: x1 + mlp(x1)."""
    f32 = {k: (None if v is None else v.astype(np.float32)) for k, v in w.items()}
    gu = _r(_norm(x1, f32["mlp_scale"], eps).astype(np.float64) @ f32["w_gu"].astype(np.float64))
    if f32["b_gu"] is not None:
        gu = _r(gu + f32["b_gu"])
    f = gu.shape[0] // 2
    gate, up = gu[:f], gu[f:]
    act = _r(_r(gate * _r(1.0 / (1.0 + np.exp(-gate)))) * up)
    down = _r(act.astype(np.float64) @ f32["w_down"].astype(np.float64))
    if f32["b_down"] is not None:
        down = _r(down + f32["b_down"])
    return _r(x1 + down)


CASES = {   # d, heads, kv heads, head dim, F, cache slots, bias, q/k norm, attention splits, tiling, blocks per SM
    # (the one-kernel cases) or the attention's head groups (the seven-kernel launch: *_kernels)
    "qwen2": (256, 6, 2, 32, 320, 40, True, False, 3, ((2, 64), (3, 64), (2, 128), (5, 128)), 7),
    "qwen3": (192, 4, 2, 64, 256, 33, False, True, 4, ((3, 64), (2, 64), (1, 128), (4, 64)), 5),
    # the seven-kernel launch: chunk 128, 256 columns per block, splits past the layer kernel's 16, head dim 128
    "qwen3_kernels": (256, 4, 2, 128, 512, 33, False, True, 4, ((16, 256), (32, 256), (16, 256), (32, 256)), 1),
    "qwen2_kernels": (256, 6, 2, 128, 384, 40, True, False, 8, ((4, 64), (3, 128), (2, 128), (24, 128)), 1),
    # long splits: more key/value pieces than one batch of registers (the attention's staging loop)
    "long_kernels": (256, 4, 2, 128, 256, 300, False, False, 2, ((4, 64), (4, 64), (2, 128), (4, 64)), 1),
    # attend_kernel blocks taking half of a KV head's four query heads each
    "groups_kernels": (256, 8, 2, 128, 384, 40, True, False, 4, ((4, 64), (4, 128), (2, 128), (24, 128)), 2),
}


@pytest.mark.parametrize("case,idx,pad", [("qwen3_kernels", 17, 3), ("qwen3_kernels", 0, 0), ("qwen2_kernels", 39, 5),
                                          ("long_kernels", 290, 7), ("groups_kernels", 39, 5),
                                          ("groups_kernels", 0, 0)])
def test_layer_matches_numpy(lib, case, idx, pad):
    lib_, fns = lib
    fn = fns["run_layer_kernels"]
    d, heads = CASES[case][:2]
    blocks = CASES[case][10]
    rng = np.random.default_rng(idx + pad + d)
    w, kc, vc = _layer_weights(rng, case, idx, pad)
    x, ss, mask, cos, sin, chunk = _step_inputs(rng, case, idx, pad)
    want_mid, want_k, want_v = attention_half(w, x.astype(np.float32), kc, vc, mask, idx, cos, sin, heads, 1e-6)
    k_out, v_out = kc.copy(), vc.copy()
    bufs = _buffers(case, w, x, ss, mask, idx, cos, sin, k_out, v_out)
    rc = _run(fn, [bufs], case, blocks)
    assert rc == 0, lib_.last_error()
    got_mid, got_x = bufs[24].astype(np.float32), bufs[28].astype(np.float32)
    assert np.isfinite(got_x).all()
    # each half against numpy given the same input: equal but for a few one-ulp roundings (summation order)
    np.testing.assert_allclose(got_mid, want_mid, rtol=0, atol=2 ** -7 * np.abs(want_mid).max())
    assert np.mean(got_mid == want_mid) > 0.6
    want_x = mlp_half(w, got_mid, 1e-6)
    np.testing.assert_allclose(got_x, want_x, rtol=0, atol=2 ** -7 * np.abs(want_x).max())
    assert np.mean(got_x == want_x) > 0.6
    _check_cache(k_out, v_out, kc, idx, want_k, want_v)
    got_ss = bufs[29]
    np.testing.assert_allclose(got_ss, [np.sum(got_x[i:i + chunk] ** 2) for i in range(0, d, chunk)], rtol=1e-5)


def _numpy_step(case, idx, pad, layers):
    """Random step inputs and `layers` layers' weights and caches for `case` (seeded by idx, pad, layers), and numpy's
    residual stream after them: (x, ss, mask, cos, sin, chunk, [(weights, k cache, v cache)], numpy's output)."""
    heads = CASES[case][1]
    rng = np.random.default_rng(idx + pad + layers)
    x, ss, mask, cos, sin, chunk = _step_inputs(rng, case, idx, pad)
    weights = [_layer_weights(rng, case, idx, pad) for _ in range(layers)]
    want = x.astype(np.float32)
    for w, kc, vc in weights:
        mid, _, _ = attention_half(w, want, kc, vc, mask, idx, cos, sin, heads, 1e-6)
        want = mlp_half(w, mid, 1e-6)
    return x, ss, mask, cos, sin, chunk, weights, want


@pytest.mark.parametrize("case,idx,pad,layers", [("qwen2_kernels", 39, 5, 1), ("qwen2_kernels", 21, 0, 3),
                                                 ("qwen3_kernels", 17, 3, 2)])
def test_the_step_with_folded_finishes_matches_numpy(lib, case, idx, pad, layers):
    """CUDAPERF_CUDA_FOLD_FINISH: o and down add fixed-point column sums, the next norm prologue rebuilds the residual
    in every block (no finish kernels but one after the last layer). Over 1-3 layers: (nearly) the seven-kernel
    launches' result layer after layer (only summation orders differ), and numpy's layers within the bf16 roundings
    that compound over the layers."""
    lib_, fns = lib
    d, heads = CASES[case][:2]
    x, ss, mask, cos, sin, chunk, weights, want = _numpy_step(case, idx, pad, layers)
    per_layer, xi, ssi = [], x, ss
    for w, kc, vc in weights:
        per_layer.append(_buffers(case, w, x, ss, mask, idx, cos, sin, kc.copy(), vc.copy()))
        seven = _buffers(case, w, xi, ssi, mask, idx, cos, sin, kc.copy(), vc.copy())
        assert _run(fns["run_layer_kernels"], [seven], case, 1) == 0, lib_.last_error()
        xi, ssi = seven[28].copy(), seven[29].copy()
    rc = _run(fns["run_step_fold"], per_layer, case, layers)
    assert rc == 0, lib_.last_error()
    got = per_layer[0][28].astype(np.float32)
    assert np.isfinite(got).all()
    assert np.mean(got == xi.astype(np.float32)) > 0.95
    np.testing.assert_allclose(got, want, rtol=0, atol=2 ** -6 * np.abs(want).max())
    np.testing.assert_allclose(per_layer[0][29], [np.sum(got[i:i + chunk] ** 2) for i in range(0, d, chunk)], rtol=1e-5)
    w, kc, vc = weights[0]   # the first layer's input is exact: its new cache rows are numpy's
    _, want_k, want_v = attention_half(w, x.astype(np.float32), kc, vc, mask, idx, cos, sin, heads, 1e-6)
    _check_cache(per_layer[0][12], per_layer[0][13], kc, idx, want_k, want_v)


@pytest.mark.parametrize("case,idx,pad,layers", [("qwen2_kernels", 21, 0, 3), ("qwen3_kernels", 17, 3, 2)])
def test_qkv_sums_as_fixed_point_match_the_partials(lib, case, idx, pad, layers):
    """CUDAPERF_CUDA_QKV_FIXED: after the first layer qkv adds its column sums as fixed point, the o kernel clears
    them for the next layer and the attention reads one sum a column: near the step with split-K partials (the sums
    rounded once at 2^-28 instead of added as floats), the same cache rows in the first layer, and numpy's layers within
    the bf16 roundings."""
    lib_, fns = lib
    x, ss, mask, cos, sin, _chunk, weights, want = _numpy_step(case, idx, pad, layers)
    got = {}
    for fixed in (0, 1):
        bufs = [_buffers(case, w, x, ss, mask, idx, cos, sin, kc.copy(), vc.copy()) for w, kc, vc in weights]
        assert _run(fns["run_step_fold"], bufs, case, layers + 10000000 * fixed) == 0, lib_.last_error()
        got[fixed] = (bufs[0][28].astype(np.float32), [(b[12].copy(), b[13].copy()) for b in bufs])
    (a, caches_a), (b, caches_b) = got[0], got[1]
    for ca, cb in zip(caches_a[0], caches_b[0]):   # the first layer reads the partials either way: its k and v rows
        np.testing.assert_array_equal(ca, cb)
    np.testing.assert_allclose(b, a, rtol=0, atol=2 ** -7 * np.abs(a).max())
    assert np.mean(a == b) > 0.7
    np.testing.assert_allclose(b, want, rtol=0, atol=2 ** -6 * np.abs(want).max())
    for la, lb in zip(caches_a[1:], caches_b[1:]):   # later layers' new k and v rows: near (the rest is NaN padding)
        for ca, cb in zip(la, lb):
            new_a, new_b = ca[:, idx].astype(np.float32), cb[:, idx].astype(np.float32)
            np.testing.assert_allclose(new_b, new_a, rtol=0, atol=2 ** -6 * np.abs(new_a).max())


@pytest.mark.parametrize("case,idx,pad,layers,blocks", [("qwen2_kernels", 39, 5, 1, 5), ("qwen3_kernels", 21, 0, 2, 3)])
def test_the_one_kernel_mlp_matches_the_two_kernels(lib, case, idx, pad, layers, blocks):
    """CUDAPERF_CUDA_MLP: each layer's gate_up and down as one mlp_kernel whose blocks own uneven ranges of intermediate
    features (5 or 3 blocks over 48 or 64 groups of eight), adding down's sums as fixed point. Over 1-2 layers: near the
    two-kernel fold (the gate and up sums are added in another order) and numpy's layers within the bf16 roundings;
    with the staggered adds (CUDAPERF_CUDA_MLP=rotate) and as mlp_kernel_lean (=lean) bit-equal to the in-order adds;
    with gate_up group-major (=gm: the gate and up sums added in another order) near them, the same with and without
    the register cap, in blocks of 768 threads, and with more groups a block than warps."""
    lib_, fns = lib
    d = CASES[case][0]
    x, ss, mask, cos, sin, chunk, weights, want = _numpy_step(case, idx, pad, layers)
    got = {}
    for b, rot in ((0, 0), (blocks, 0), (blocks, 1), (blocks, 2), (blocks, 3), (blocks, 4), (blocks, 5), (blocks, 6),
                   (1, 7), (blocks, 7)):   # one block: more groups than warps (wide)
        bufs = [_buffers(case, w, x, ss, mask, idx, cos, sin, kc.copy(), vc.copy()) for w, kc, vc in weights]
        if rot in (3, 4, 6, 7):   # 5: the group-major kernel on the row-major weights (the layout matters)
            for layer_bufs in bufs:
                layer_bufs[16] = np.ascontiguousarray(cuda_step.mlp_gm_layout(layer_bufs[16]))
        assert _run(fns["run_step_fold"], bufs, case, layers + 100 * b + 100000 * rot) == 0, lib_.last_error()
        got[b, rot] = (bufs[0][28].astype(np.float32), bufs[0][29].copy(), bufs[-1][12], bufs[-1][13])
    one, two = got[blocks, 0], got[0, 0]
    for variant in (1, 2):
        for a, b in zip(got[blocks, variant], one):
            np.testing.assert_array_equal(a, b)
    for a, b in zip(got[blocks, 4], got[blocks, 3]):
        np.testing.assert_array_equal(a, b)
    gm = got[blocks, 3][0]
    for key in ((blocks, 3), (blocks, 6), (blocks, 7), (1, 7)):
        np.testing.assert_allclose(got[key][0], one[0], rtol=0, atol=2 ** -7 * np.abs(one[0]).max(), err_msg=str(key))
    assert np.mean(gm == one[0]) > 0.7                                      # other sums, mostly the same roundings
    assert np.abs(got[blocks, 5][0] - one[0]).max() > 0.1 * np.abs(one[0]).max()
    assert np.isfinite(one[0]).all()
    np.testing.assert_allclose(one[0], want, rtol=0, atol=2 ** -6 * np.abs(want).max())
    np.testing.assert_allclose(one[0], two[0], rtol=0, atol=2 ** -6 * np.abs(two[0]).max())
    assert np.mean(one[0] == two[0]) > 0.7
    np.testing.assert_allclose(one[1], [np.sum(one[0][i:i + chunk] ** 2) for i in range(0, d, chunk)], rtol=1e-5)
    if layers == 1:   # the new cache rows: the attention saw the same input
        np.testing.assert_array_equal(one[2], two[2])
        np.testing.assert_array_equal(one[3], two[3])


def test_fixed_point_sums_are_exact_and_flag_what_they_cannot_hold(lib):
    """to_fixed / from_fixed (the folded finish's accumulators): round(s * 2^28) summed as integers is the same in any
    order; |s| >= 2^20 or a non-finite s reads back as NaN."""
    lib_, fns = lib
    vals = np.array([0.5, -0.25, 3.0e-9, 1.0e5, -1.0e5, 1.0, 2.0 ** 20, np.inf, np.nan, 7.0], np.float32)
    out = np.zeros(4, np.float32)
    rc = fns["fixed_sums"](vals.ctypes.data, out.ctypes.data)
    assert rc == 0, lib_.last_error()
    assert out[0] == np.float32(0.5 - 0.25 + 1.0e5 - 1.0e5 + 1.0)   # the 3e-9 is below the 2^-28 step
    assert out[0] == out[1]                                            # reversed order: the same total
    assert np.isnan(out[2]) and np.isnan(out[3])                       # with 2^20, with inf / nan


def _layer_weights(rng, case, idx, pad):
    """A layer's weights (dict of bf16 arrays or None) and its caches with slots idx.. and the padding set to NaN."""
    d, heads, hkv, dh, f, s_len, bias, qk = CASES[case][:8]
    n_qkv = (heads + 2 * hkv) * dh
    w = {"attn_scale": _bf(1 + 0.1 * rng.standard_normal(d)), "mlp_scale": _bf(1 + 0.1 * rng.standard_normal(d)),
         "w_qkv": _bf(rng.standard_normal((d, n_qkv)) / np.sqrt(d)),
         "b_qkv": _bf(0.1 * rng.standard_normal(n_qkv)) if bias else None,
         "q_norm": _bf(1 + 0.1 * rng.standard_normal(dh)) if qk else None,
         "k_norm": _bf(1 + 0.1 * rng.standard_normal(dh)) if qk else None,
         "w_o": _bf(rng.standard_normal((heads * dh, d)) / np.sqrt(heads * dh)),
         "b_o": _bf(0.1 * rng.standard_normal(d)) if bias else None,
         "w_gu": _bf(rng.standard_normal((d, 2 * f)) / np.sqrt(d)),
         "b_gu": _bf(0.1 * rng.standard_normal(2 * f)) if bias else None,
         "w_down": _bf(rng.standard_normal((f, d)) / np.sqrt(f)),
         "b_down": _bf(0.1 * rng.standard_normal(d)) if bias else None}
    kc = _bf(rng.standard_normal((hkv, s_len, dh)))
    vc = _bf(rng.standard_normal((hkv, s_len, dh)))
    kc[:, idx:], vc[:, idx:] = np.nan, np.nan   # slots not yet written must never be read
    kc[:, :pad], vc[:, :pad] = np.nan, np.nan   # left padding is masked, whatever it holds
    return w, kc, vc


def _step_inputs(rng, case, idx, pad):
    """(x bf16 [D], its chunks' sums of squares, kv_mask, cos, sin, chunk) of the new token at slot idx."""
    d, _, _, dh, _, s_len = CASES[case][:6]
    x = _bf(rng.standard_normal(d))
    chunk = 128 if d % 128 == 0 else 64
    xf = x.astype(np.float32)
    ss = np.array([np.sum(xf[i:i + chunk] ** 2) for i in range(0, d, chunk)], np.float32)
    mask = np.ones(s_len, np.int32)
    mask[:pad] = 0
    pos = idx - pad
    inv = 1.0 / (10000.0 ** (np.arange(0, dh, 2) / dh))
    ang = np.concatenate([pos * inv, pos * inv]).astype(np.float32)
    return x, ss, mask, np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32), chunk


def _buffers(case, w, x, ss, mask, idx, cos, sin, k_out, v_out):
    """The 30 buffers of the ENTRY's fill(): inputs, weights (None: absent), caches (updated in place), scratch."""
    d, heads, hkv, dh, f, _, _, _, splits, tiling = CASES[case][:10]
    n_qkv = (heads + 2 * hkv) * dh
    chunk = 128 if d % 128 == 0 else 64
    bufs = [x, ss, w["attn_scale"], w["mlp_scale"], w["w_qkv"], w["b_qkv"], w["q_norm"], w["k_norm"], cos, sin, mask,
            np.array([idx], np.int32), k_out, v_out, w["w_o"], w["b_o"], w["w_gu"], w["b_gu"], w["w_down"], w["b_down"],
            np.zeros(tiling[0][0] * n_qkv, np.float32), np.zeros(hkv * splits * (heads // hkv) * dh, np.float32),
            np.zeros(hkv * splits * 2 * (heads // hkv), np.float32), np.zeros(tiling[1][0] * d, np.float32),
            np.zeros(d, BF16), np.zeros(d // chunk, np.float32), np.zeros(tiling[2][0] * 2 * f, np.float32),
            np.zeros(tiling[3][0] * d, np.float32), np.zeros(d, BF16), np.zeros(d // chunk, np.float32)]
    bufs = [None if b is None else np.ascontiguousarray(b) for b in bufs]   # absent biases and norms: null
    bufs[12], bufs[13] = k_out, v_out
    return bufs


def _run(fn, layer_bufs, case, arg):
    """fn(pointers to every layer's 30 buffers, ints, floats, arg): the ENTRY's return code."""
    d, heads, hkv, dh, f, s_len, _, _, splits, tiling = CASES[case][:10]
    flat = [b for bufs in layer_bufs for b in bufs]
    ptrs = (ctypes.c_void_p * len(flat))(*[None if b is None else b.ctypes.data for b in flat])
    chunk = 128 if d % 128 == 0 else 64
    ints = np.array([d, heads, hkv, dh, f, s_len, chunk, splits, *(s for s, _ in tiling), *(c for _, c in tiling)],
                    np.int32)
    eps = np.float32(1e-6)
    floats = np.array([eps, eps, eps, dh ** -0.5], np.float32)
    return fn(ptrs, ints.ctypes.data, floats.ctypes.data, arg)


def _check_cache(k_out, v_out, kc, idx, want_k, want_v):
    """The new token's key and value at slot idx, nothing else written."""
    np.testing.assert_allclose(k_out[:, idx].astype(np.float32), want_k, rtol=0, atol=0.02 * np.abs(want_k).max())
    np.testing.assert_allclose(v_out[:, idx].astype(np.float32), want_v, rtol=0.01, atol=1e-6)
    others = np.ones(k_out.shape[1], bool)
    others[idx] = False
    np.testing.assert_array_equal(k_out[:, others].view(np.uint16), kc[:, others].view(np.uint16))  # nothing else written
