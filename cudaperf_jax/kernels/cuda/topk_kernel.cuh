// Exact top-k of long float32 rows (batch-1 sampling over a vocabulary) without sorting the row, as two kernels:
//   topk_maxima: one warp per kChunk-entry chunk of a row writes the chunk's largest key (keys below);
//   topk_select: one block per row. T = the k-th largest chunk maximum bounds the row's k-th largest entry from
//                below (k distinct entries reach T), so every top-k entry lies in a chunk whose maximum is >= T.
//                Fast path (2026-12-03: 13 us a step on the H200, 23 before): T' = T's top 16 bits (two radix
//                passes), the entries >= T' of the chunks reaching it collected (~k of them) and ordered by
//                counting. Otherwise (more than kCand such entries, e.g. many ties): the block keeps the chunks
//                reaching T (~k of them, k * kChunk entries), finds the k-th largest key among their entries by radix
//                selection, gathers the entries above it plus the ties of smallest index, and writes them in order.
// The radix selections (four passes of 8-bit digits over shared-memory histograms, warp-aggregated increments)
// replace the per-slice bitonic sorts of the first version (2048 entries per block and an 8192-entry merge, slower
// than XLA's chunked sorts on the H200, 2026-12-03). The kept entries' keys are staged in shared memory once; the
// maxima's and the staged entries' loads are all issued before any is stored (the plain load-store loops compiled to
// one global round trip per iteration: 5 + 7 of them for Qwen's vocabulary; topk_select took 23 us in the step).
// Order: larger value first, among equal values the smaller index (lax.top_k's first-seen order); -0.0 equals
// 0.0; NaNs sort last. With lse (optional), the row's logsumexp comes along (the sampler's log-probabilities without
// two more passes over the row): topk_maxima writes each chunk's largest value and its sum of exp(x - that), the
// select block merges them (NaN and +inf entries make it NaN, an all -inf row gives -inf, as XLA's log_softmax).
// cuda_ffi.py calls it through the XLA FFI (matvec.cu); tests run it emulated.
#pragma once
#include <cstdint>
#include <cuda_runtime.h>

namespace cudaperf_topk {

constexpr int kChunk = 64;            // entries per screening chunk: two per lane of one warp
constexpr int kMaxChunks = 4096;      // chunks of a row one select block holds: V <= 262144
constexpr int kMaximaThreads = 256;
constexpr int kSelectThreads = 512;
constexpr int kMaxK = 64;
constexpr int kStage = 8192;          // kept entries whose keys the select block stages in shared memory (else it
                                      // re-reads them from global memory in every pass)
constexpr int kCand = 512;            // the fast path's candidates: entries at or above the coarse threshold

// order-preserving unsigned key: a larger float has a larger key; -0.0 and 0.0 share one; NaN is 0 (smallest)
__device__ __forceinline__ unsigned key_of(float f) {
  if (f != f) return 0u;
  const unsigned u = __float_as_uint(f == 0.0f ? 0.0f : f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// ms (or null): [B, n_chunks] (largest value, sum of exp(x - largest)) per chunk, for the row's logsumexp
__global__ void __launch_bounds__(kMaximaThreads) topk_maxima(const float* __restrict__ x, int v_len, int n_chunks,
                                                              unsigned* __restrict__ maxima, float2* __restrict__ ms) {
  const int lane = threadIdx.x & 31, c = blockIdx.x * (kMaximaThreads / 32) + (threadIdx.x >> 5);
  if (c >= n_chunks) return;   // a whole warp
  const float* row = x + static_cast<size_t>(blockIdx.y) * v_len;
  const int j = c * kChunk + lane;
  const float x0 = j < v_len ? row[j] : -INFINITY, x1 = j + 32 < v_len ? row[j + 32] : -INFINITY;
  unsigned m = j < v_len ? key_of(x0) : 0u;
  if (j + 32 < v_len) m = max(m, key_of(x1));
  for (int o = 16; o > 0; o >>= 1) m = max(m, __shfl_xor_sync(0xffffffffu, m, o));
  const size_t at = static_cast<size_t>(blockIdx.y) * n_chunks + c;
  if (lane == 0) maxima[at] = m;
  if (ms != nullptr) {
    float mf = fmaxf(x0, x1);   // (fmaxf skips NaN; a NaN entry still makes the sum NaN below)
    for (int o = 16; o > 0; o >>= 1) mf = fmaxf(mf, __shfl_xor_sync(0xffffffffu, mf, o));
    float e = mf == -INFINITY ? 0.f : expf(x0 - mf) + expf(x1 - mf);
    for (int o = 16; o > 0; o >>= 1) e += __shfl_xor_sync(0xffffffffu, e, o);
    if (lane == 0) ms[at] = make_float2(mf, e);
  }
}

// (m, s) <- the logsumexp pieces of (m, s) and (pm, ps): the larger maximum, the sums rescaled to it
__device__ __forceinline__ void lse_merge(float& m, float& s, float pm, float ps) {
  if (pm == -INFINITY) return;   // an empty piece (exp(-inf - -inf) would be NaN)
  if (pm > m) {
    s = s * expf(m - pm) + ps;
    m = pm;
  } else {
    s += ps * expf(pm - m);
  }
}

struct SelectShared {
  union {
    unsigned keys[kMaxChunks];   // the row's chunk maxima, until the kept chunks are known
    unsigned stage[kStage];      // then the kept chunks' entries' keys (when they fit)
  };
  unsigned short chunks[kMaxChunks];   // the kept chunks, in no particular order
  unsigned hist[256];
  int sel_idx[kMaxK];          // the k chosen entries' indices, in no particular order
  unsigned sel_key[kMaxK];
  unsigned cand_key[kCand];    // the fast path's candidates (key, index), in no particular order
  int cand_idx[kCand];
  unsigned digit, need;        // one radix pass's result
  int n_kept, n_sel, n_gt, n_tie, n_cand;
  float lse_m[kSelectThreads / 32], lse_s[kSelectThreads / 32];   // the warps' logsumexp pieces
};

// The need-th largest (1-based; need <= the number of valid keys) of the keys visit() produces. All threads of
// the block call it; visit(f) calls f(key, valid) for the calling thread's share, the same number of times for
// every lane of a warp (f aggregates a warp's increments with __match_any_sync). With last_shift > 0 it stops
// after the digits down to bit last_shift: the result is that key with its lower bits zero, a lower bound that at
// least `need` keys reach.
template <class Visit>
__device__ unsigned radix_select(SelectShared& s, unsigned need, Visit visit, int last_shift = 0) {
  const int lane = threadIdx.x & 31;
  unsigned prefix = 0, decided = 0;   // the high digits found so far, and their bit mask
  for (int shift = 24; shift >= last_shift; shift -= 8) {
    for (int t = threadIdx.x; t < 256; t += blockDim.x) s.hist[t] = 0;
    __syncthreads();
    visit([&](unsigned key, bool valid) {
      const unsigned d = valid && (key & decided) == prefix ? (key >> shift) & 255u : 256u;
      const unsigned peers = __match_any_sync(0xffffffffu, d);
      if (d < 256u && lane == __ffs(peers) - 1) atomicAdd(&s.hist[d], static_cast<unsigned>(__popc(peers)));
    });
    __syncthreads();
    if (threadIdx.x < 32) {   // lane l owns digits 255 - 8l down to 248 - 8l; a scan finds the need-th from the top
      unsigned c[8], sum = 0;
      for (int i = 0; i < 8; ++i) sum += (c[i] = s.hist[255 - 8 * lane - i]);
      unsigned incl = sum;
      for (int o = 1; o < 32; o <<= 1) {
        const unsigned y = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += y;
      }
      unsigned acc = incl - sum;
      if (acc < need && incl >= need) {
        for (int i = 0; i < 8; ++i) {
          if (acc + c[i] >= need) {
            s.digit = 255u - 8u * lane - i;
            s.need = need - acc;
            break;
          }
          acc += c[i];
        }
      }
    }
    __syncthreads();
    prefix |= s.digit << shift;
    decided |= 255u << shift;
    need = s.need;
  }
  return prefix;
}

// The place of (key, j) among n (key, index) pairs: how many come before it (a larger key, or an equal key and a
// smaller index - lax.top_k's order).
__device__ __forceinline__ int rank_among(const unsigned* keys, const int* idxs, int n, unsigned key, int j) {
  int rank = 0;
  for (int o = 0; o < n; ++o) rank += keys[o] > key || (keys[o] == key && idxs[o] < j);
  return rank;
}

// dynamic shared memory: none (SelectShared is static); one block per row
// ms, lse: topk_maxima's logsumexp pieces and the rows' logsumexp [B], or both null.
__global__ void __launch_bounds__(kSelectThreads) topk_select(const float* __restrict__ x, int v_len, int n_chunks,
                                                              const unsigned* __restrict__ maxima, int k,
                                                              float* __restrict__ vals, int* __restrict__ idx,
                                                              const float2* __restrict__ ms, float* __restrict__ lse) {
  __shared__ SelectShared s;
  const int b = blockIdx.x, lane = threadIdx.x & 31, warp0 = threadIdx.x & ~31;
  const float* row = x + static_cast<size_t>(b) * v_len;
  {   // the maxima: every load of the thread in flight at once, then stored (a load-store loop waited for each load)
    constexpr int kPer = kMaxChunks / kSelectThreads;
    unsigned r[kPer];
#pragma unroll
    for (int u = 0; u < kPer; ++u) {
      const int c = threadIdx.x + u * kSelectThreads;
      r[u] = c < n_chunks ? maxima[static_cast<size_t>(b) * n_chunks + c] : 0u;
    }
#pragma unroll
    for (int u = 0; u < kPer; ++u) {
      const int c = threadIdx.x + u * kSelectThreads;
      if (c < n_chunks) s.keys[c] = r[u];
    }
  }
  if (ms != nullptr) {   // the thread's chunks' logsumexp pieces merged, then the warp's (thread 0 merges the warps')
    constexpr int kPer = kMaxChunks / kSelectThreads;
    float2 p[kPer];   // all loaded before any is merged (a load-merge loop waited for each load)
#pragma unroll
    for (int u = 0; u < kPer; ++u) {
      const int c = threadIdx.x + u * kSelectThreads;
      p[u] = c < n_chunks ? ms[static_cast<size_t>(b) * n_chunks + c] : make_float2(-INFINITY, 0.f);
    }
    float m = -INFINITY, sum = 0.f;
#pragma unroll
    for (int u = 0; u < kPer; ++u) lse_merge(m, sum, p[u].x, p[u].y);
    for (int o = 16; o > 0; o >>= 1) {
      const float pm = __shfl_xor_sync(0xffffffffu, m, o), ps = __shfl_xor_sync(0xffffffffu, sum, o);
      lse_merge(m, sum, pm, ps);
    }
    if (lane == 0) {
      s.lse_m[threadIdx.x / 32] = m;
      s.lse_s[threadIdx.x / 32] = sum;
    }
  }
  if (threadIdx.x == 0) s.n_kept = s.n_sel = s.n_gt = s.n_tie = s.n_cand = 0;
  __syncthreads();
  auto place = [&](int rank, int j) {   // the entry j is the rank-th of the top k
    const float v = row[j];
    vals[static_cast<size_t>(b) * k + rank] = v;
    idx[static_cast<size_t>(b) * k + rank] = j;
  };
  auto finish = [&]() {   // thread 0, after the place() calls: the logsumexp
    if (threadIdx.x != 0 || lse == nullptr) return;
    float m = -INFINITY, sum = 0.f;   // (the warps' pieces were stored before a barrier)
    for (int w = 0; w < kSelectThreads / 32; ++w) lse_merge(m, sum, s.lse_m[w], s.lse_s[w]);
    lse[b] = m == -INFINITY ? -INFINITY : m + logf(sum);
  };
  const unsigned n_top = static_cast<unsigned>(k < n_chunks ? k : n_chunks);
  auto each_maximum = [&](auto f) {
    for (int c0 = warp0; c0 < n_chunks; c0 += blockDim.x) {
      const bool valid = c0 + lane < n_chunks;
      f(valid ? s.keys[c0 + lane] : 0u, valid);
    }
  };
  auto keep_chunks = [&](unsigned t) {   // the chunks whose maximum reaches t
    for (int c = threadIdx.x; c < n_chunks; c += blockDim.x)
      if (s.keys[c] >= t) s.chunks[atomicAdd(&s.n_kept, 1)] = static_cast<unsigned short>(c);
    __syncthreads();
  };
  auto kept_index = [&](int e, int n) {   // the row index of kept entry e of n (v_len past them)
    return e < n ? s.chunks[e / kChunk] * kChunk + e % kChunk : v_len;
  };
  constexpr int kPerStage = kStage / kSelectThreads;
  // the thread's kept entries e = threadIdx.x + u * kSelectThreads of n, every load in flight before any is used (a
  // load-store loop waited for each); past them or the row: NaN, whose key is 0
  auto load_kept = [&](float (&r)[kPerStage], int n) {
#pragma unroll
    for (int u = 0; u < kPerStage; ++u) {
      const int j = kept_index(threadIdx.x + u * kSelectThreads, n);
      r[u] = j < v_len ? row[j] : __int_as_float(0x7fffffff);
    }
  };
  {   // Fast path: T' = the k-th largest chunk maximum's top 16 bits (two radix passes, not four). The entries
      // >= T' lie in the chunks whose maximum reaches T'; when at least k (non-NaN) entries reach T' - checked, as
      // there are k maxima >= T' unless the row has fewer than k chunks - the top k (ties included) are among them.
      // Usually few more than k entries reach T': they are collected and ordered by counting, without the
      // entry-level radix selection.
    const unsigned t_lo = radix_select(s, n_top, each_maximum, 16);
    keep_chunks(t_lo);
    const int n_entries = s.n_kept * kChunk;
    if (n_entries <= kStage) {
      float r[kPerStage];
      load_kept(r, n_entries);   // (NaN, key 0, is never a candidate)
#pragma unroll
      for (int u = 0; u < kPerStage; ++u) {
        const int e = threadIdx.x + u * kSelectThreads;
        const unsigned key = key_of(r[u]);
        if (e < n_entries && key >= t_lo && key != 0u) {
          const int at = atomicAdd(&s.n_cand, 1);
          if (at < kCand) {
            s.cand_key[at] = key;
            s.cand_idx[at] = kept_index(e, n_entries);
          }
        }
      }
      __syncthreads();
      const int n_c = s.n_cand;
      if (n_c >= k && n_c <= kCand) {   // (fewer than k: NaN entries are among the top k; the general path below)
        for (int c = threadIdx.x; c < n_c; c += blockDim.x) {   // each candidate's place among them
          const int rank = rank_among(s.cand_key, s.cand_idx, n_c, s.cand_key[c], s.cand_idx[c]);
          if (rank < k) place(rank, s.cand_idx[c]);
        }
        finish();
        return;
      }
    }
    __syncthreads();   // (every thread has read n_kept)
    if (threadIdx.x == 0) s.n_kept = 0;
    __syncthreads();
  }
  // General path. T: the k-th largest chunk maximum (with fewer chunks than k, the smallest: every chunk is kept)
  keep_chunks(radix_select(s, n_top, each_maximum));
  const int n_cand = s.n_kept * kChunk;
  const bool staged = n_cand <= kStage;   // (the maxima are no longer needed: their space takes the entries' keys)
  if (staged) {   // the thread's entries loaded together, then stored
    float r[kPerStage];
    load_kept(r, n_cand);
#pragma unroll
    for (int u = 0; u < kPerStage; ++u) {
      const int e = threadIdx.x + u * kSelectThreads;
      if (e < n_cand) s.stage[e] = key_of(r[u]);
    }
    __syncthreads();
  }
  auto each_entry = [&](auto g) {   // g(key, index, valid) over the kept chunks' entries, warp-uniformly
    for (int e0 = warp0; e0 < n_cand; e0 += blockDim.x) {
      const int e = e0 + lane, j = kept_index(e, n_cand);
      g(j < v_len ? (staged ? s.stage[e] : key_of(row[j])) : 0u, j, j < v_len);
    }
  };
  // K: the k-th largest key of the row (at least k entries are kept)
  const unsigned k_key = radix_select(s, static_cast<unsigned>(k), [&](auto f) {
    each_entry([&](unsigned key, int, bool valid) { f(key, valid); });
  });
  each_entry([&](unsigned key, int, bool valid) {
    if (valid && key > k_key) atomicAdd(&s.n_gt, 1);
    if (valid && key == k_key) atomicAdd(&s.n_tie, 1);
  });
  __syncthreads();
  // the ties at K that make up the k: those of the smallest indices (the m-th smallest index is the m-th largest
  // of ~index among the ties)
  const int m = k - s.n_gt;
  unsigned last = 0xffffffffu;   // the largest tie index taken
  if (s.n_tie > m) {
    last = ~radix_select(s, static_cast<unsigned>(m), [&](auto f) {
      each_entry([&](unsigned key, int j, bool valid) { f(~static_cast<unsigned>(j), valid && key == k_key); });
    });
  }
  each_entry([&](unsigned key, int j, bool valid) {
    if (valid && (key > k_key || (key == k_key && static_cast<unsigned>(j) <= last))) {
      const int p = atomicAdd(&s.n_sel, 1);
      s.sel_key[p] = key;
      s.sel_idx[p] = j;
    }
  });
  __syncthreads();
  if (threadIdx.x < k)   // each chosen entry's place among them
    place(rank_among(s.sel_key, s.sel_idx, k, s.sel_key[threadIdx.x], s.sel_idx[threadIdx.x]), s.sel_idx[threadIdx.x]);
  finish();
}

}  // namespace cudaperf_topk
