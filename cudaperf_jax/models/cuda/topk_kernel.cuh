// Exact top-k of long float32 rows (batch-1 sampling over a vocabulary) without XLA's sorts, as two kernels:
//   topk_slices: block (s, b) sorts slice s (kSlice entries) of row b in shared memory (bitonic) and writes its
//                k best (value, index) pairs as candidates;
//   topk_merge:  block b sorts row b's candidates (ceil(V / kSlice) * k of them, at most kMergeMax) and writes the
//                k best, in descending order.
// Order: larger value first, among equal values the smaller index (so ties resolve as lax.top_k's first-seen
// order). NaNs sort last. cuda_matvec.py calls it through the XLA FFI (matvec.cu); tests run it emulated.
#pragma once
#include <cstdint>
#include <cuda_runtime.h>

namespace cudaperf_topk {

constexpr int kSlice = 2048;       // entries per slice block
constexpr int kSliceThreads = 256;
constexpr int kMergeMax = 8192;    // candidates one merge block sorts
constexpr int kMergeThreads = 1024;
constexpr int kMaxK = 64;

// a before b in the output order
__device__ __forceinline__ bool before(float va, int ia, float vb, int ib) {
  const bool na = va != va, nb = vb != vb;   // NaN last
  if (na || nb) return !na && nb ? true : (na && nb ? ia < ib : false);
  return va > vb || (va == vb && ia < ib);
}

// sorts n (a power of two) pairs in shared memory into descending order; all threads of the block call it
__device__ void bitonic_sort(float* v, int* id, int n) {
  for (int size = 2; size <= n; size <<= 1) {
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      for (int t = threadIdx.x; t < n / 2; t += blockDim.x) {
        const int lo = 2 * stride * (t / stride) + (t % stride), hi = lo + stride;
        const bool desc = (lo & size) == 0;
        const bool swap = desc ? before(v[hi], id[hi], v[lo], id[lo]) : before(v[lo], id[lo], v[hi], id[hi]);
        if (swap) {
          const float tv = v[lo];
          v[lo] = v[hi];
          v[hi] = tv;
          const int ti = id[lo];
          id[lo] = id[hi];
          id[hi] = ti;
        }
      }
      __syncthreads();
    }
  }
}

__global__ void __launch_bounds__(kSliceThreads) topk_slices(const float* __restrict__ x, int v_len, int k,
                                                             float* __restrict__ cand_v, int* __restrict__ cand_i) {
  __shared__ float sv[kSlice];
  __shared__ int si[kSlice];
  const int s = blockIdx.x, b = blockIdx.y, base = s * kSlice;
  const float* row = x + static_cast<size_t>(b) * v_len;
  for (int t = threadIdx.x; t < kSlice; t += blockDim.x) {
    const int j = base + t;
    sv[t] = j < v_len ? row[j] : -INFINITY;
    si[t] = j < v_len ? j : 0x7fffffff;
  }
  __syncthreads();
  bitonic_sort(sv, si, kSlice);
  const size_t out = (static_cast<size_t>(b) * gridDim.x + s) * k;
  for (int t = threadIdx.x; t < k; t += blockDim.x) {
    cand_v[out + t] = sv[t];
    cand_i[out + t] = si[t];
  }
}

// dynamic shared memory: n2 floats then n2 ints, n2 = the candidates per row rounded up to a power of two
__global__ void __launch_bounds__(kMergeThreads) topk_merge(const float* __restrict__ cand_v,
                                                            const int* __restrict__ cand_i, int n_cand, int n2, int k,
                                                            float* __restrict__ vals, int* __restrict__ idx) {
  extern __shared__ float smem[];
  float* sv = smem;
  int* si = reinterpret_cast<int*>(smem + n2);
  const int b = blockIdx.x;
  for (int t = threadIdx.x; t < n2; t += blockDim.x) {
    sv[t] = t < n_cand ? cand_v[static_cast<size_t>(b) * n_cand + t] : -INFINITY;
    si[t] = t < n_cand ? cand_i[static_cast<size_t>(b) * n_cand + t] : 0x7fffffff;
  }
  __syncthreads();
  bitonic_sort(sv, si, n2);
  for (int t = threadIdx.x; t < k; t += blockDim.x) {
    vals[static_cast<size_t>(b) * k + t] = sv[t];
    idx[static_cast<size_t>(b) * k + t] = si[t];
  }
}

}  // namespace cudaperf_topk
