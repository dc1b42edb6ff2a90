"""The CUDA matvec kernel itself (cuda/matvec_kernel.cuh, which matvec.cu launches through the XLA FFI), run by
the CPU emulation (kernels_harness.emulation) against numpy for each prologue, column tiling and split, with
fused.py's bf16 roundings. The FFI wrapper and PDL need a GPU (test_kernels_gpu.py)."""
import ctypes

import jax.numpy as jnp
import numpy as np
import pytest

from cudaperf_jax.kernels import cuda_build, cuda_ffi
from kernels_harness.emulation import EmulatedLibrary, build_shared_library

ENTRY = r'''
using namespace cudaperf_matvec;

template <int TPR, int U, int MODE>
static int go(const Prologue& pro, const Epilogue& epi, const __nv_bfloat16* w, int k, int n, int split, float* y,
              int y_stride) {
  const int ks = k / split;
  matvec_kernel<TPR, U, MODE><<<dim3(n / (8 * TPR), split, 1), dim3(kThreads, 1, 1), ks * sizeof(float)>>>(
      pro, epi, w, n, ks, y, y_stride, 1);
  cudaDeviceSynchronize();
  return (int)cudaGetLastError();
}

template <int MODE>
static int pick(int cols, int unroll, const Prologue& pro, const Epilogue& epi, const __nv_bfloat16* w, int k, int n,
                int split, float* y, int y_stride) {
  if (unroll == 8) return go<16, 8, MODE>(pro, epi, w, k, n, split, y, y_stride);   // (128 columns only)
  if (cols == 256) return go<32, 4, MODE>(pro, epi, w, k, n, split, y, y_stride);
  if (cols == 128) return go<16, 4, MODE>(pro, epi, w, k, n, split, y, y_stride);
  return go<8, 4, MODE>(pro, epi, w, k, n, split, y, y_stride);
}

extern "C" int entry(int mode, const float* xp, int n_parts, int x_stride, const __nv_bfloat16* x, const float* ss,
                     int n_chunks, float eps, const __nv_bfloat16* vec, const float* acc, const float* ml, int splits,
                     int gp, int dh, int group, const __nv_bfloat16* w, int k, int n, int split, float* y, int y_stride,
                     int cols, int unroll) {
  Prologue pro = {};
  pro.xp = xp; pro.n_parts = n_parts; pro.x_stride = x_stride; pro.x = x; pro.ss = ss; pro.n_chunks = n_chunks;
  pro.k_total = k; pro.eps = eps; pro.vec = vec; pro.acc = acc; pro.ml = ml; pro.splits = splits; pro.gp = gp;
  pro.dh = dh; pro.group = group;
  const Epilogue epi = {};   // partials
  switch (mode) {
    case 0: return pick<kParts>(cols, unroll, pro, epi, w, k, n, split, y, y_stride);
    case 1: return pick<kNorm>(cols, unroll, pro, epi, w, k, n, split, y, y_stride);
    case 2: return pick<kSwiglu>(cols, unroll, pro, epi, w, k, n, split, y, y_stride);
    default: return pick<kAttn>(cols, unroll, pro, epi, w, k, n, split, y, y_stride);
  }
}

extern "C" int finish(const __nv_bfloat16* x, const float* parts, int n_parts, int stride, const __nv_bfloat16* bias,
                      __nv_bfloat16* xo, float* ss, int n) {
  finish_kernel<false><<<n / kFinishChunk, kFinishChunk>>>(x, parts, n_parts, stride, bias, xo, ss, 1);
  cudaDeviceSynchronize();
  return (int)cudaGetLastError();
}
'''
MODES = {"parts": 0, "norm": 1, "swiglu": 2, "attn": 3}
BF16 = jnp.bfloat16


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    src = cuda_build.KERNEL.read_text().replace("#pragma once", "") + ENTRY
    res = build_shared_library(src, tmp_path_factory.mktemp("mv") / "matvec.so", checks=False)
    assert res.ok, res.log[:2000]
    lib = EmulatedLibrary(res.path)
    fn = lib.entry("entry")
    fn.argtypes = [ctypes.c_int] + [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                                    ctypes.c_int, ctypes.c_float, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    fn.argtypes += [ctypes.c_int] * 4 + [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                                         ctypes.c_int]
    fn.argtypes += [ctypes.c_int] * 2
    return lib, fn


def _ptr(a):
    return None if a is None else a.ctypes.data_as(ctypes.c_void_p)


def _bf(a):
    return np.asarray(a, np.float32).astype(BF16)


def _r(a):  # round to bf16, back to float32
    return _bf(a).astype(np.float32)


def run(lib, mode, w, split, y_extra=0, xp=None, x=None, ss=None, n_chunks=0, eps=0.0, vec=None, acc=None, ml=None,
        group=1, cols=None, unroll=4):
    """The kernel's float32 split-K partials [split, N]."""
    lib_, fn = lib
    k, n = w.shape
    cols = cols or cuda_ffi.default_cols(n)
    y = np.full((split, n + y_extra), np.nan, np.float32)
    keep = [np.ascontiguousarray(a) if a is not None else None for a in (xp, x, ss, vec, acc, ml, w)]
    xp_, x_, ss_, vec_, acc_, ml_, w_ = keep
    rc = fn(MODES[mode], _ptr(xp_), 0 if xp is None else xp.shape[0], 0 if xp is None else xp.shape[1], _ptr(x_), _ptr(ss_),
            n_chunks, eps, _ptr(vec_), _ptr(acc_), _ptr(ml_), 0 if acc is None else acc.shape[1],
            0 if acc is None else acc.shape[2], 0 if acc is None else acc.shape[3], group, _ptr(w_), k, n, split,
            _ptr(y), n + y_extra, cols, unroll)
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


@pytest.mark.parametrize("k,split,n_chunks", [(256, 2, 2), (2560, 2, 20)])
def test_norm_prologue(lib, k, split, n_chunks):
    """The sums of squares in one batch of loads up to 12 chunks, more after it; a block's first two input entries
    per thread loaded with them, the rest (K slices past 512 rows) as before."""
    rng = np.random.default_rng(k)
    n = 192
    w = _bf(rng.standard_normal((k, n)))
    x, scale = _bf(rng.standard_normal(k)), _bf(rng.standard_normal(k))
    xf = x.astype(np.float32)
    ss = np.zeros(n_chunks + 6, np.float32)   # entries past n_chunks must not be read
    ss[n_chunks:] = np.nan
    ss[:n_chunks] = (xf.reshape(n_chunks, -1) ** 2).sum(axis=1)
    got = run(lib, "norm", w, split, x=x, ss=ss, n_chunks=n_chunks, eps=1e-6, vec=scale)
    total = np.float32(0)
    for v in ss[:n_chunks]:   # the kernel's order
        total = np.float32(total + v)
    rstd = np.float32(1.0) / np.sqrt(np.float32(total / k + 1e-6))
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


@pytest.mark.parametrize("splits", [4, 11])
def test_attention_merge_prologue(lib, splits):
    """Up to 8 splits in two batches of loads (every m, then every l and acc), more split by split."""
    rng = np.random.default_rng(3 + splits)
    hkv, gp, dh, g, n = 2, 16, 32, 3, 128
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


@pytest.mark.parametrize("cols,unroll", [(64, 4), (128, 4), (256, 4), (128, 8)])
def test_column_tilings_and_unrolls(lib, cols, unroll):
    rng = np.random.default_rng(cols + unroll)
    k, n = 320, 512
    w = _bf(rng.standard_normal((k, n)))
    xp = rng.standard_normal((2, k)).astype(np.float32)
    _check(run(lib, "parts", w, 5, xp=xp, cols=cols, unroll=unroll), _r(xp.sum(axis=0)), w)


def _ordered(y):
    t = np.zeros(y.shape[1], np.float32)
    for row in y:
        t = t + row
    return t


@pytest.mark.parametrize("n_parts,bias", [(0, False), (1, False), (5, True), (40, True), (70, False)])
def test_the_finish_kernel_is_fuseds(lib, n_parts, bias):
    lib_, _ = lib
    fn = lib_.entry("finish")
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                   ctypes.c_void_p, ctypes.c_int]
    rng = np.random.default_rng(n_parts)
    n = 384
    x = _bf(rng.standard_normal(n))
    parts = rng.standard_normal((max(n_parts, 1), n + 32)).astype(np.float32)
    b = _bf(rng.standard_normal(n)) if bias else None
    xo, ss = np.zeros(n, BF16), np.full(n // 128, np.nan, np.float32)
    assert fn(_ptr(x), _ptr(parts), n_parts, n + 32, _ptr(b), _ptr(xo), _ptr(ss), n) == 0, lib_.last_error()
    want = x.astype(np.float32)
    if n_parts:
        v = _r(_ordered(parts[:n_parts, :n]))
        if bias:
            v = _r(v + b.astype(np.float32))
        want = _r(want + v)
    np.testing.assert_array_equal(xo.astype(np.float32), want)
    np.testing.assert_allclose(ss, (want.reshape(-1, 128) ** 2).sum(axis=1), rtol=1e-5)
