// cudaperf CPU emulation: the block- and warp-level part of cooperative groups (this_thread_block,
// tiled_partition<N> with shuffles, votes and sync, cg::reduce, cg::inclusive_scan / exclusive_scan).
// Grid-wide groups and asynchronous copies are not supported (the rewriter names them).
#pragma once
#include "cudaperf_emu.h"

namespace cooperative_groups {
namespace detail {
static inline unsigned linear_tid() {
  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
static inline unsigned block_threads() { return blockDim.x * blockDim.y * blockDim.z; }
}  // namespace detail

struct thread_group {
  void sync() const { __syncthreads(); }
  unsigned long long thread_rank() const { return detail::linear_tid(); }
  unsigned long long num_threads() const { return detail::block_threads(); }
  unsigned long long size() const { return detail::block_threads(); }
};

struct thread_block : thread_group {
  dim3 group_index() const { return dim3(blockIdx.x, blockIdx.y, blockIdx.z); }
  dim3 thread_index() const { return dim3(threadIdx.x, threadIdx.y, threadIdx.z); }
  dim3 group_dim() const { return blockDim; }
  dim3 dim_threads() const { return blockDim; }
};
static inline thread_block this_thread_block() { return thread_block(); }
static inline void sync(const thread_group& g) { g.sync(); }

template <unsigned N>
struct thread_block_tile {
  static_assert(N >= 1 && N <= 32 && (N & (N - 1)) == 0, "tile sizes are powers of two up to 32");
  static unsigned lane() { return detail::linear_tid() % 32u; }
  static unsigned mask() {
    return N == 32 ? 0xffffffffu : (((1u << N) - 1u) << ((lane() / N) * N));
  }
  unsigned long long thread_rank() const { return detail::linear_tid() % N; }
  unsigned long long num_threads() const { return N; }
  unsigned long long size() const { return N; }
  unsigned long long meta_group_rank() const { return detail::linear_tid() / N; }
  unsigned long long meta_group_size() const { return (detail::block_threads() + N - 1) / N; }
  void sync() const { __syncwarp(mask()); }
  template <class T> T shfl(T v, int src) const { return __shfl_sync(mask(), v, src, N); }
  template <class T> T shfl_down(T v, unsigned d) const { return __shfl_down_sync(mask(), v, d, N); }
  template <class T> T shfl_up(T v, unsigned d) const { return __shfl_up_sync(mask(), v, d, N); }
  template <class T> T shfl_xor(T v, unsigned m) const { return __shfl_xor_sync(mask(), v, (int)m, N); }
  unsigned ballot(int p) const { return (__ballot_sync(mask(), p) & mask()) >> ((lane() / N) * N); }
  int any(int p) const { return ballot(p) != 0; }
  int all(int p) const { return ballot(p) == (N == 32 ? 0xffffffffu : (1u << N) - 1u); }
  template <class T> unsigned match_any(T v) const {
    return (__match_any_sync(mask(), v) & mask()) >> ((lane() / N) * N);
  }
};
template <unsigned N, class Parent> static inline thread_block_tile<N> tiled_partition(const Parent&) {
  return thread_block_tile<N>();
}

template <class T> struct plus { T operator()(const T& a, const T& b) const { return a + b; } };
template <class T> struct less { T operator()(const T& a, const T& b) const { return b < a ? b : a; } };
template <class T> struct greater { T operator()(const T& a, const T& b) const { return a < b ? b : a; } };
template <class T> struct bit_and { T operator()(const T& a, const T& b) const { return a & b; } };
template <class T> struct bit_or { T operator()(const T& a, const T& b) const { return a | b; } };
template <class T> struct bit_xor { T operator()(const T& a, const T& b) const { return a ^ b; } };

template <unsigned N, class T, class Op>
static inline T reduce(const thread_block_tile<N>& g, T v, Op op) {
  for (unsigned o = N / 2; o > 0; o /= 2) v = op(v, g.shfl_xor(v, o));
  return v;
}
template <unsigned N, class T, class Op = plus<T>>
static inline T inclusive_scan(const thread_block_tile<N>& g, T v, Op op = Op()) {
  const unsigned r = (unsigned)g.thread_rank();
  for (unsigned d = 1; d < N; d *= 2) {
    T u = g.shfl_up(v, d);
    if (r >= d) v = op(v, u);
  }
  return v;
}
template <unsigned N, class T, class Op = plus<T>>
static inline T exclusive_scan(const thread_block_tile<N>& g, T v, Op op = Op()) {
  T inc = inclusive_scan(g, v, op);
  T prev = g.shfl_up(inc, 1);
  return g.thread_rank() == 0 ? T() : prev;
}
}  // namespace cooperative_groups
