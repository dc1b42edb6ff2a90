"""The CUDA matvec kernel itself (cuda/matvec_kernel.cuh, which matvec.cu launches through the XLA FFI), run by
the CPU emulation (kernels_harness.emulation) against numpy for each prologue, column tiling and split, with
decode_fused's bf16 roundings. The FFI wrapper and PDL need a GPU (test_cuda_matvec_gpu.py)."""
import ctypes

import jax.numpy as jnp
import numpy as np
import pytest

from cudaperf_jax.models import cuda_matvec as cm
from kernels_harness.emulation import EmulatedLibrary, build_shared_library

ENTRY = r'''
using namespace cudaperf_matvec;

template <int TPR, int MODE>
static int go(const Prologue& pro, const __nv_bfloat16* w, int k, int n, int split, float* y, int y_stride) {
  const int ks = k / split;
  matvec_kernel<TPR, 4, MODE><<<dim3(n / (8 * TPR), split, 1), dim3(kThreads, 1, 1), ks * sizeof(float)>>>(
      pro, w, n, ks, y, y_stride, 1);
  cudaDeviceSynchronize();
  return (int)cudaGetLastError();
}

template <int MODE>
static int pick(const Prologue& pro, const __nv_bfloat16* w, int k, int n, int split, float* y, int y_stride) {
  if (n % 256 == 0) return go<32, MODE>(pro, w, k, n, split, y, y_stride);
  if (n % 128 == 0) return go<16, MODE>(pro, w, k, n, split, y, y_stride);
  return go<8, MODE>(pro, w, k, n, split, y, y_stride);
}

extern "C" int entry(int mode, const float* xp, int n_parts, int x_stride, const __nv_bfloat16* x, const float* ss,
                     int n_chunks, float eps, const __nv_bfloat16* vec, const float* acc, const float* ml, int splits,
                     int gp, int dh, int group, const __nv_bfloat16* w, int k, int n, int split, float* y, int y_stride,
                     cudaStream_t stream) {
  Prologue pro = {};
  pro.xp = xp; pro.n_parts = n_parts; pro.x_stride = x_stride; pro.x = x; pro.ss = ss; pro.n_chunks = n_chunks;
  pro.k_total = k; pro.eps = eps; pro.vec = vec; pro.acc = acc; pro.ml = ml; pro.splits = splits; pro.gp = gp;
  pro.dh = dh; pro.group = group;
  switch (mode) {
    case 0: return pick<kParts>(pro, w, k, n, split, y, y_stride);
    case 1: return pick<kNorm>(pro, w, k, n, split, y, y_stride);
    case 2: return pick<kSwiglu>(pro, w, k, n, split, y, y_stride);
    default: return pick<kAttn>(pro, w, k, n, split, y, y_stride);
  }
}
'''
MODES = {"parts": 0, "norm": 1, "swiglu": 2, "attn": 3}
BF16 = jnp.bfloat16


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    src = cm.KERNEL.read_text().replace("#pragma once", "") + ENTRY
    res = build_shared_library(src, tmp_path_factory.mktemp("mv") / "matvec.so", checks=False)
    assert res.ok, res.log[:2000]
    lib = EmulatedLibrary(res.path)
    fn = lib.entry("entry")
    fn.argtypes = [ctypes.c_int] + [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                                    ctypes.c_int, ctypes.c_float, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    fn.argtypes += [ctypes.c_int] * 4 + [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                                         ctypes.c_int, ctypes.c_void_p]
    return lib, fn


def _ptr(a):
    return None if a is None else a.ctypes.data_as(ctypes.c_void_p)


def _bf(a):
    return np.asarray(a, np.float32).astype(BF16)


def _r(a):  # round to bf16, back to float32
    return _bf(a).astype(np.float32)


def run(lib, mode, w, split, y_extra=0, xp=None, x=None, ss=None, n_chunks=0, eps=0.0, vec=None, acc=None, ml=None,
        group=1):
    lib_, fn = lib
    k, n = w.shape
    y = np.full((split, n + y_extra), np.nan, np.float32)
    keep = [np.ascontiguousarray(a) if a is not None else None for a in (xp, x, ss, vec, acc, ml, w)]
    xp_, x_, ss_, vec_, acc_, ml_, w_ = keep
    rc = fn(MODES[mode], _ptr(xp_), 0 if xp is None else xp.shape[0], 0 if xp is None else xp.shape[1], _ptr(x_), _ptr(ss_),
            n_chunks, eps, _ptr(vec_), _ptr(acc_), _ptr(ml_), 0 if acc is None else acc.shape[1],
            0 if acc is None else acc.shape[2], 0 if acc is None else acc.shape[3], group, _ptr(w_), k, n, split,
            _ptr(y), n + y_extra, None)
    assert rc == 0, lib_.last_error()
    assert np.isnan(y[:, n:]).all()   # columns past N are left alone
    return y[:, :n]


def _check(got, xin, w):
    want = xin.astype(np.float64) @ w.astype(np.float32).astype(np.float64)
    np.testing.assert_allclose(got.sum(axis=0), want, rtol=1e-4, atol=2e-3 * np.abs(want).max())


@pytest.mark.parametrize("k,n,split", [(192, 320, 3), (128, 256, 1), (96, 128, 2), (640, 64, 5), (1024, 128, 2)])
def test_partials_in_partials_out(lib, k, n, split):
    rng = np.random.default_rng(k + n)
    w = _bf(rng.standard_normal((k, n)))
    xp = rng.standard_normal((3, k + 16)).astype(np.float32)
    got = run(lib, "parts", w, split, y_extra=8, xp=xp)
    _check(got, _r(xp.sum(axis=0)[:k]), w)


def test_norm_prologue(lib):
    rng = np.random.default_rng(1)
    k, n = 256, 192
    w = _bf(rng.standard_normal((k, n)))
    x, scale = _bf(rng.standard_normal(k)), _bf(rng.standard_normal(k))
    xf = x.astype(np.float32)
    ss = np.zeros(8, np.float32)
    ss[:2] = [np.sum(xf[:128] ** 2), np.sum(xf[128:] ** 2)]
    got = run(lib, "norm", w, 2, x=x, ss=ss, n_chunks=2, eps=1e-6, vec=scale)
    rstd = np.float32(1.0) / np.sqrt(np.float32(ss.sum() / k + 1e-6))
    _check(got, _r(_r(xf * rstd) * scale.astype(np.float32)), w)


@pytest.mark.parametrize("bias", [False, True])
def test_swiglu_prologue(lib, bias):
    rng = np.random.default_rng(2)
    k, n = 128, 128
    w = _bf(rng.standard_normal((k, n)))
    parts = rng.standard_normal((4, 2 * k)).astype(np.float32)
    b = _bf(rng.standard_normal(2 * k)) if bias else None
    got = run(lib, "swiglu", w, 4, xp=parts, vec=b)
    g, u = _r(parts[:, :k].sum(axis=0)), _r(parts[:, k:].sum(axis=0))
    if bias:
        g, u = _r(g + b[:k].astype(np.float32)), _r(u + b[k:].astype(np.float32))
    act = _r(g * _r(1.0 / (1.0 + np.exp(-g))))
    _check(got, _r(act * u), w)


def test_attention_merge_prologue(lib):
    rng = np.random.default_rng(3)
    hkv, splits, gp, dh, g, n = 2, 4, 16, 32, 3, 128
    acc = rng.standard_normal((hkv, splits, gp, dh)).astype(np.float32)
    m = rng.standard_normal((hkv, splits, gp)).astype(np.float32)
    m[:, 3] = -1e30   # an empty split, as attend writes for slots past the cache index
    l = (np.abs(rng.standard_normal((hkv, splits, gp))) + 0.5).astype(np.float32)
    ml = np.stack([m, l], axis=2)
    w = _bf(rng.standard_normal((hkv * g * dh, n)))
    got = run(lib, "attn", w, 3, acc=acc, ml=ml, group=g)
    wgt = np.exp(m - m.max(axis=1, keepdims=True))                      # [hkv, splits, gp]
    out = (acc * wgt[..., None]).sum(axis=1) / (wgt * l).sum(axis=1)[..., None]   # [hkv, gp, dh]
    _check(got, _r(out[:, :g].reshape(-1)), w)
