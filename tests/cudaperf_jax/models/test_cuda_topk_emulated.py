"""The CUDA top-k (cuda/topk_kernel.cuh, which matvec.cu launches through the XLA FFI for the sampler) run by the
CPU emulation (kernels_harness.emulation) against numpy: values in descending order, ties by smaller index."""
import ctypes

import numpy as np
import pytest

from cudaperf_jax.models import cuda_matvec as cm
from kernels_harness.emulation import EmulatedLibrary, build_shared_library

ENTRY = r'''
using namespace cudaperf_topk;

extern "C" int topk(const float* x, int b, int v, int k, unsigned* maxima, float* vals, int* idx) {
  const int n_chunks = (v + kChunk - 1) / kChunk, warps = kMaximaThreads / 32;
  topk_maxima<<<dim3((n_chunks + warps - 1) / warps, b), kMaximaThreads>>>(x, v, n_chunks, maxima);
  cudaDeviceSynchronize();
  topk_select<<<b, kSelectThreads>>>(x, v, n_chunks, maxima, k, vals, idx);
  cudaDeviceSynchronize();
  return (int)cudaGetLastError();
}
'''


@pytest.fixture(scope="module")
def topk(tmp_path_factory):
    src = cm.TOPK_KERNEL.read_text().replace("#pragma once", "") + ENTRY
    res = build_shared_library(src, tmp_path_factory.mktemp("topk") / "topk.so", checks=False)
    assert res.ok, res.log[:2000]
    lib = EmulatedLibrary(res.path)
    fn = lib.entry("topk")
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int] + [ctypes.c_void_p] * 3

    def run(x, k):
        x = np.ascontiguousarray(x, np.float32)
        b, v = x.shape
        maxima = np.zeros((b, -(-v // cm.TOPK_CHUNK)), np.uint32)
        vals, idx = np.zeros((b, k), np.float32), np.zeros((b, k), np.int32)
        ptr = lambda a: a.ctypes.data_as(ctypes.c_void_p)  # noqa: E731
        assert fn(ptr(x), b, v, k, ptr(maxima), ptr(vals), ptr(idx)) == 0, lib.last_error()
        return vals, idx
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
