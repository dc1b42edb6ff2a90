"""The one-kernel decoder layer (cuda/layer_kernel.cuh) run by the CPU emulation, one launch per phase (the grid
barrier of the persistent launch needs a GPU: test_cuda_matvec_gpu.py), against a numpy decoder layer with
decode_fused's bf16 roundings: Qwen2-like (qkv bias, GQA), Qwen3-like (q/k norms, no bias), left padding, a hidden
size that is not a multiple of 128, and fewer blocks than work items (the phases' grid-stride loops)."""
import ctypes

import jax.numpy as jnp
import numpy as np
import pytest

from cudaperf_jax.models import cuda_matvec as cm
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

extern "C" int run_layer(void** b, const int* n, const float* fl, int blocks) {
  LayerParams p = {};
  fill(p, b, n, fl);
  const size_t smem = layer_smem_bytes(p);
  cudaFuncSetAttribute(layer_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  for (int ph = 0; ph < kPhases; ++ph) {
    layer_kernel<<<blocks, kThreads, smem>>>(p, ph, ph + 1, 0);
    cudaDeviceSynchronize();
    int e = (int)cudaGetLastError();
    if (e) return e;
  }
  return 0;
}

template <int TPR, int MODE>
int mv(const Prologue& pro, const __nv_bfloat16* w, int k, int n, int split, float* y) {
  const cudaperf_matvec::Epilogue epi = {};
  cudaperf_matvec::matvec_kernel<TPR, 4, MODE, true><<<dim3(n / (8 * TPR), split), kThreads, (k / split) * 4>>>(
      pro, epi, w, n, k / split, y, n, 0);
  cudaDeviceSynchronize();
  return (int)cudaGetLastError();
}

template <int MODE>
int mv_cols(int cols, const Prologue& pro, const __nv_bfloat16* w, int k, int n, int split, float* y) {
  if (cols == 256) return mv<32, MODE>(pro, w, k, n, split, y);
  if (cols == 128) return mv<16, MODE>(pro, w, k, n, split, y);
  return mv<8, MODE>(pro, w, k, n, split, y);
}

// The seven standalone kernels of the handler's `kernels` launch (matvec.cu layer_kernels), in its order.
extern "C" int run_layer_kernels(void** b, const int* n, const float* fl, int head_groups) {
  LayerParams p = {};
  fill(p, b, n, fl);
  p.attn_hsplit = head_groups;
  const int g = p.h / p.hkv, n_qkv = (p.h + 2 * p.hkv) * p.dh, kc = cudaperf_matvec::kFinishChunk;
  int e = mv_cols<cudaperf_matvec::kNorm>(p.cols[0], norm_prologue(p, false), p.w_qkv, p.d, n_qkv, p.split[0], p.qkv_parts);
  if (e) return e;
  const size_t att_smem = attend_smem_bytes(g, p.dh, p.span_max);
  if (p.dh != 128 || g / head_groups > 4) return 98;   // the cases below: head dim 128, <= 4 heads per block
  cudaFuncSetAttribute(attend_kernel<128, 4>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)att_smem);
  attend_kernel<128, 4><<<p.hkv * p.attn_splits * head_groups, kThreads, att_smem>>>(p, 0);
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
'''
BF16 = jnp.bfloat16


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    layer_src = cm.LAYER_KERNEL.read_text().replace("#pragma once", "").replace('#include "matvec_kernel.cuh"', "")
    src = cm.KERNEL.read_text().replace("#pragma once", "") + layer_src + ENTRY
    res = build_shared_library(src, tmp_path_factory.mktemp("layer") / "layer.so", checks=False)
    assert res.ok, res.log[:3000]
    lib = EmulatedLibrary(res.path)
    fns = {}
    for name in ("run_layer", "run_layer_kernels"):
        fns[name] = lib.entry(name)
        fns[name].argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
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
    """numpy attention block with decode_fused's roundings: (x + attention, k row, v row written at idx)."""
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
    """numpy MLP block with decode_fused's roundings: x1 + mlp(x1)."""
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


@pytest.mark.parametrize("case,idx,pad", [("qwen2", 21, 0), ("qwen2", 39, 5), ("qwen3", 0, 0), ("qwen3", 17, 3),
                                          ("qwen3_kernels", 17, 3), ("qwen3_kernels", 0, 0), ("qwen2_kernels", 39, 5),
                                          ("long_kernels", 290, 7), ("groups_kernels", 39, 5),
                                          ("groups_kernels", 0, 0)])
def test_layer_matches_numpy(lib, case, idx, pad):
    lib_, fns = lib
    fn = fns["run_layer_kernels" if case.endswith("_kernels") else "run_layer"]
    d, heads, hkv, dh, f, s_len, bias, qk, splits, tiling, blocks = CASES[case]
    rng = np.random.default_rng(idx + pad + d)
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
    x = _bf(rng.standard_normal(d))
    chunk = 128 if d % 128 == 0 else 64
    xf = x.astype(np.float32)
    ss = np.array([np.sum(xf[i:i + chunk] ** 2) for i in range(0, d, chunk)], np.float32)
    kc = _bf(rng.standard_normal((hkv, s_len, dh)))
    vc = _bf(rng.standard_normal((hkv, s_len, dh)))
    kc[:, idx:], vc[:, idx:] = np.nan, np.nan   # slots not yet written must never be read
    mask = np.ones(s_len, np.int32)
    mask[:pad] = 0
    kc[:, :pad], vc[:, :pad] = np.nan, np.nan   # left padding is masked, whatever it holds
    pos = idx - pad
    inv = 1.0 / (10000.0 ** (np.arange(0, dh, 2) / dh))
    ang = np.concatenate([pos * inv, pos * inv]).astype(np.float32)
    cos, sin = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
    want_mid, want_k, want_v = attention_half(w, xf, kc, vc, mask, idx, cos, sin, heads, 1e-6)

    eps = np.float32(1e-6)
    k_out, v_out = kc.copy(), vc.copy()
    bufs = [x, ss, w["attn_scale"], w["mlp_scale"], w["w_qkv"], w["b_qkv"], w["q_norm"], w["k_norm"], cos, sin, mask,
            np.array([idx], np.int32), k_out, v_out, w["w_o"], w["b_o"], w["w_gu"], w["b_gu"], w["w_down"], w["b_down"],
            np.zeros(tiling[0][0] * n_qkv, np.float32), np.zeros(hkv * splits * (heads // hkv) * dh, np.float32),
            np.zeros(hkv * splits * 2 * (heads // hkv), np.float32), np.zeros(tiling[1][0] * d, np.float32),
            np.zeros(d, BF16), np.zeros(d // chunk, np.float32), np.zeros(tiling[2][0] * 2 * f, np.float32),
            np.zeros(tiling[3][0] * d, np.float32), np.zeros(d, BF16), np.zeros(d // chunk, np.float32)]
    bufs = [None if b is None else np.ascontiguousarray(b) for b in bufs]   # absent biases and norms: null
    bufs[12], bufs[13] = k_out, v_out
    ptrs = (ctypes.c_void_p * len(bufs))(*[None if b is None else b.ctypes.data for b in bufs])
    ints = np.array([d, heads, hkv, dh, f, s_len, chunk, splits, *(s for s, _ in tiling), *(c for _, c in tiling)],
                    np.int32)
    floats = np.array([eps, eps, eps, dh ** -0.5], np.float32)
    rc = fn(ptrs, ints.ctypes.data, floats.ctypes.data, blocks)
    assert rc == 0, lib_.last_error()
    got_mid, got_x = bufs[24].astype(np.float32), bufs[28].astype(np.float32)
    assert np.isfinite(got_x).all()
    # each half against numpy given the same input: equal but for a few one-ulp roundings (summation order)
    np.testing.assert_allclose(got_mid, want_mid, rtol=0, atol=2 ** -7 * np.abs(want_mid).max())
    assert np.mean(got_mid == want_mid) > 0.6
    want_x = mlp_half(w, got_mid, 1e-6)
    np.testing.assert_allclose(got_x, want_x, rtol=0, atol=2 ** -7 * np.abs(want_x).max())
    assert np.mean(got_x == want_x) > 0.6
    np.testing.assert_allclose(k_out[:, idx].astype(np.float32), want_k, rtol=0, atol=0.02 * np.abs(want_k).max())
    np.testing.assert_allclose(v_out[:, idx].astype(np.float32), want_v, rtol=0.01, atol=1e-6)
    others = np.ones(s_len, bool)
    others[idx] = False
    np.testing.assert_array_equal(k_out[:, others].view(np.uint16), kc[:, others].view(np.uint16))  # nothing else written
    got_ss = bufs[29]
    np.testing.assert_allclose(got_ss, [np.sum(got_x[i:i + chunk] ** 2) for i in range(0, d, chunk)], rtol=1e-5)
