"""The CUDA top-k (cuda/topk_kernel.cuh, which matvec.cu launches through the XLA FFI for the sampler) run by the
CPU emulation (kernels_harness.emulation) against numpy: values in descending order, ties by smaller index."""
import ctypes

import numpy as np
import pytest

from cudaperf_jax.kernels import cuda_build, cuda_ffi
from kernels_harness.emulation import EmulatedLibrary, build_shared_library

ENTRY = r'''
using namespace cudaperf_topk;

// ms, lse: null, or the rows' logsumexp pieces [b, 2 n_chunks] and logsumexp [b]
extern "C" int topk(const float* x, int b, int v, int k, unsigned* maxima, float* vals, int* idx, float* ms,
                    float* lse) {
  const int n_chunks = (v + kChunk - 1) / kChunk, warps = kMaximaThreads / 32;
  topk_maxima<<<dim3((n_chunks + warps - 1) / warps, b), kMaximaThreads>>>(x, v, n_chunks, maxima, (float2*)ms);
  cudaDeviceSynchronize();
  topk_select<<<b, kSelectThreads>>>(x, v, n_chunks, maxima, k, vals, idx, (const float2*)ms, lse);
  cudaDeviceSynchronize();
  return (int)cudaGetLastError();
}
'''


@pytest.fixture(scope="module")
def topk(tmp_path_factory):
    src = cuda_build.TOPK_KERNEL.read_text().replace("#pragma once", "") + ENTRY
    res = build_shared_library(src, tmp_path_factory.mktemp("topk") / "topk.so", checks=False)
    assert res.ok, res.log[:2000]
    lib = EmulatedLibrary(res.path)
    fn = lib.entry("topk")
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int] + [ctypes.c_void_p] * 5

    def run(x, k, with_lse=False):
        x = np.ascontiguousarray(x, np.float32)
        b, v = x.shape
        n_chunks = -(-v // cuda_ffi.TOPK_CHUNK)
        maxima = np.zeros((b, n_chunks), np.uint32)
        vals, idx = np.zeros((b, k), np.float32), np.zeros((b, k), np.int32)
        ms, lse = np.zeros((b, 2 * n_chunks), np.float32), np.full(b, 7.0, np.float32)

        def ptr(a):
            return a.ctypes.data_as(ctypes.c_void_p)
        extra = (ptr(ms), ptr(lse)) if with_lse else (None, None)
        assert fn(ptr(x), b, v, k, ptr(maxima), ptr(vals), ptr(idx), *extra) == 0, lib.last_error()
        return (vals, idx, lse) if with_lse else (vals, idx)
    return run


def _want(x, k):
    order = np.lexsort((np.arange(x.shape[1])[None, :].repeat(x.shape[0], 0), -x), axis=-1)[:, :k]
    return np.take_along_axis(x, order, axis=-1), order


@pytest.mark.parametrize("b,v,k", [(1, 9000, 50), (2, 4096, 7), (1, 2048 * 3 + 5, 64), (3, 300, 1)])
def test_top_k_is_numpys(topk, b, v, k):
    x = np.random.default_rng(v + k).standard_normal((b, v)).astype(np.float32)
    vals, idx = topk(x, k)
    want_v, want_i = _want(x, k)
    np.testing.assert_array_equal(vals, want_v)
    np.testing.assert_array_equal(idx, want_i)


def test_ties_infinities_and_masked_entries(topk):
    x = np.full((1, 5000), -np.inf, np.float32)      # a masked row: everything -inf but a few entries
    x[0, [4999, 17, 2048, 3000]] = [1.0, 1.0, 2.0, 1.0]
    x[0, 100] = np.inf
    vals, idx = topk(x, 6)
    np.testing.assert_array_equal(vals[0], [np.inf, 2.0, 1.0, 1.0, 1.0, -np.inf])
    np.testing.assert_array_equal(idx[0, :5], [100, 2048, 17, 3000, 4999])
    assert idx[0, 5] == 0   # the -inf entry of smallest index, never padding


@pytest.mark.parametrize("b,v,k", [(2, 20000, 50), (1, 300, 64), (1, 151936, 50)])
def test_many_ties_at_the_kth_value(topk, b, v, k):
    """Values from a handful of levels: the k-th value is shared by many entries across many chunks, so the
    ties of smallest index must be picked (the second radix selection, over indices)."""
    x = np.random.default_rng(v).integers(0, 6, (b, v)).astype(np.float32)
    vals, idx = topk(x, k)
    want_v, want_i = _want(x, k)
    np.testing.assert_array_equal(vals, want_v)
    np.testing.assert_array_equal(idx, want_i)


def test_nans_last_and_signed_zeros_equal(topk):
    x = np.full((1, 700), -5.0, np.float32)
    x[0, [3, 650]] = np.nan
    x[0, [10, 20, 30]] = [0.0, -0.0, 0.0]
    x[0, 400] = 7.0
    vals, idx = topk(x, 4)
    np.testing.assert_array_equal(idx[0], [400, 10, 20, 30])   # -0.0 ties with 0.0 by index
    x[:] = np.nan
    x[0, 123] = 1.0
    vals, idx = topk(x, 3)
    assert vals[0, 0] == 1.0 and np.isnan(vals[0, 1:]).all()
    np.testing.assert_array_equal(idx[0], [123, 0, 1])


def _logsumexp(x):
    m = np.max(x, axis=-1, keepdims=True)
    return (m[:, 0] + np.log(np.sum(np.exp(x.astype(np.float64) - m), axis=-1))).astype(np.float32)


@pytest.mark.parametrize("b,v,k", [(1, 151936, 50), (3, 9000, 7), (2, 300, 64)])
def test_the_rows_logsumexp_comes_with_the_top_k(topk, b, v, k):
    """with_lse: each row's logsumexp from the chunks' (maximum, sum of exp) pieces merged in the select block; the
    top-k itself unchanged."""
    x = (4 * np.random.default_rng(v).standard_normal((b, v))).astype(np.float32)
    vals, idx, lse = topk(x, k, with_lse=True)
    np.testing.assert_allclose(lse, _logsumexp(x), rtol=2e-6)
    want_v, want_i = _want(x, k)
    np.testing.assert_array_equal(vals, want_v)
    np.testing.assert_array_equal(idx, want_i)


def test_logsumexp_of_masked_infinite_and_nan_rows(topk):
    """-inf entries (masked vocabulary) count for nothing, an all -inf row gives -inf, +inf or NaN gives NaN - as
    jax.nn.logsumexp does."""
    x = np.full((4, 5000), -np.inf, np.float32)
    x[0, [3, 4000]] = [1.0, 2.0]        # two finite entries in different chunks
    x[2, :] = 0.0
    x[2, 77] = np.inf
    x[3, :] = 0.0
    x[3, 4321] = np.nan
    _, _, lse = topk(x, 2, with_lse=True)
    np.testing.assert_allclose(lse[0], np.log(np.exp(1.0) + np.exp(2.0)), rtol=1e-6)
    assert lse[1] == -np.inf
    assert np.isnan(lse[2]) and np.isnan(lse[3])


@pytest.mark.parametrize("chunks,per_chunk", [(60, 20), (200, 1), (40, 64)])
def test_each_path_of_the_select_block(topk, chunks, per_chunk):
    """topk_select's fast path collects the entries reaching a coarse threshold (the k-th largest chunk maximum's top
    16 bits) and orders them by counting; too many candidates (60 chunks x 20 near-equal entries: 1200 > 512) or
    too many kept chunks (200 chunks reach the threshold: 12,800 entries > 8192 staged) take the radix path. Every
    case gives numpy's order, ties by smaller index."""
    rng = np.random.default_rng(chunks * per_chunk)
    x = rng.standard_normal((1, 151936)).astype(np.float32)
    for c in rng.choice(151936 // 64, chunks, replace=False):
        cols = c * 64 + rng.choice(64, per_chunk, replace=False)
        x[0, cols] = 10.0 + rng.integers(0, 40, per_chunk) * 2e-5   # the same top 16 bits of the key, many ties
    for k in (50, 7):
        vals, idx = topk(x, k)
        want_v, want_i = _want(x, k)
        np.testing.assert_array_equal(vals, want_v)
        np.testing.assert_array_equal(idx, want_i)

