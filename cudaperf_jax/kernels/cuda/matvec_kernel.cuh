// The batch-1 matvec kernel of matvec.cu (see there), without the XLA FFI: tests build it with the CPU
// emulation (kernels_harness.emulation) and check it against numpy.
#pragma once
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace cudaperf_matvec {

constexpr int kThreads = 256;

// Programmatic dependent launch hooks: griddepcontrol instructions on sm_90; nothing elsewhere (the CPU emulation in
// tests). The wait is followed by an acquire fence (SASS: CCTL.IVALL, the SM's L1 invalidated): griddepcontrol.wait
// alone (ACQBULK) leaves L1 lines that a block of an earlier kernel loaded while this one was already resident - in a
// PDL chain kernels launch ahead of their producers - and plain loads then read stale activations (seen as wrong
// tokens in the Qwen3-shaped tests, 2026-12-03).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define MATVEC_RELEASE_DEPENDENTS() asm volatile("griddepcontrol.launch_dependents;" :::)
#define MATVEC_WAIT_FOR_PRODUCER() asm volatile("griddepcontrol.wait;\n\tfence.acquire.gpu;" ::: "memory")
#else
#define MATVEC_RELEASE_DEPENDENTS() ((void)0)
#define MATVEC_WAIT_FOR_PRODUCER() ((void)0)
#endif

// The kernels' `pdl` argument: 0 an ordinary launch; otherwise kPdlOn, plus kPdlLate to let the next kernel launch
// only once this one's wait has returned (instead of at its start: then every kernel of a chain can become resident
// early, its blocks holding SM slots while they wait).
// kPdlNoAttr (host side, matvec.cu): an ordinary launch - after everything before it on the stream - of a kernel that
// still lets the next one launch early. The step launch uses kPdlOn | kPdlLate (`late`; `on` alone measured slower).
constexpr int kPdlOn = 1, kPdlLate = 2, kPdlNoAttr = 8;
__device__ __forceinline__ void pdl_start(int pdl) {
  if ((pdl & (kPdlOn | kPdlLate)) == kPdlOn) MATVEC_RELEASE_DEPENDENTS();
}
__device__ __forceinline__ void pdl_wait(int pdl) {
  if (pdl) MATVEC_WAIT_FOR_PRODUCER();
  if (pdl & kPdlLate) MATVEC_RELEASE_DEPENDENTS();
}

__device__ __forceinline__ uint4 load_stream(const __nv_bfloat16* p) {
  return __ldg(reinterpret_cast<const uint4*>(p));
}

__device__ __forceinline__ void fma8(float (&acc)[8], const uint4& v, float x) {
  const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    acc[2 * i] += __uint_as_float(words[i] << 16) * x;
    acc[2 * i + 1] += __uint_as_float(words[i] & 0xffff0000u) * x;
  }
}

// A thread's rows of a weight column piece: rows first, first + step, ... below n, each a 16-byte load at wp + row *
// stride (8 columns). preload_rows issues the first U of them (zeros past n, or for all if !on), before the caller's
// dependency wait; stream_rows adds those U rows and then the rest, U loads in flight at a time, times x[row] to acc.
template <int U>
__device__ __forceinline__ void preload_rows(uint4 (&pre)[U], const __nv_bfloat16* wp, size_t stride, int first,
                                             int step, int n, bool on = true) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int r = first + u * step;
    pre[u] = on && r < n ? load_stream(wp + r * stride) : make_uint4(0, 0, 0, 0);
  }
}

template <int U>
__device__ __forceinline__ void stream_rows(float (&acc)[8], const uint4 (&pre)[U], const __nv_bfloat16* wp,
                                            size_t stride, int first, int step, int n, const float* x) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int r = first + u * step;
    if (r < n) fma8(acc, pre[u], x[r]);
  }
  for (int r0 = first + U * step; r0 < n; r0 += U * step) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int r = r0 + u * step;
      v[u] = r < n ? load_stream(wp + r * stride) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int r = r0 + u * step;
      if (r < n) fma8(acc, v[u], x[r]);
    }
  }
}

enum Mode { kParts = 0, kNorm = 1, kSwiglu = 2, kAttn = 3, kResNorm = 4 };

// Fixed-point split-K sums, for the step launch with its finish kernels folded into their consumers
// (the step launch's folded finishes): each block of the producer adds its column sums s as round(s * 2^28) to a 64-bit integer
// accumulator per column. Integer adds give the same total in any order, so the result stays deterministic, unlike
// float atomics. |s| < 2^20 keeps a term below 2^48, so up to 256 splits cannot overflow; a larger or non-finite s adds
// kFixedBad instead, which from_fixed turns into NaN (as a float sum of such partials would be Inf or NaN, or at least
// far outside bf16 activations' range).
constexpr double kFixedScale = 268435456.0;   // 2^28
constexpr long long kFixedBad = 1ll << 58;
__device__ __forceinline__ unsigned long long to_fixed(float s) {
  const long long v = fabsf(s) < 1048576.f ? llrint(static_cast<double>(s) * kFixedScale) : kFixedBad;
  return static_cast<unsigned long long>(v);
}
__device__ __forceinline__ float from_fixed(unsigned long long a) {
  const long long v = static_cast<long long>(a);
  if (v >= (1ll << 57) || v <= -(1ll << 57)) return NAN;
  return static_cast<float>(static_cast<double>(v) / kFixedScale);
}

struct Prologue {
  const float* xp;              // parts: [n_parts, x_stride]; swiglu: [n_parts, x_stride = 2F]
  int n_parts, x_stride;
  const __nv_bfloat16* x;       // norm
  const float* ss;              // norm: n_chunks sums of squares of x's chunks
  int n_chunks, k_total;
  float eps;
  const __nv_bfloat16* vec;     // norm: scale [K]; swiglu: bias [2F] or null
  const float* acc;             // attn: [Hkv, splits, gp, dh]
  const float* ml;              // attn: [Hkv, splits, 2, gp]
  int splits, gp, dh, group;
  // resnorm (the folded finish): x + the producer's fixed-point sums racc [k_total] (+ rbias, or null) is the new
  // residual r; the column-tile-0 blocks write it to xo over their K slice, every block normalises its slice of it
  const unsigned long long* racc;
  const __nv_bfloat16* rbias;
  __nv_bfloat16* xo;
  // n_zero entries of zero are set to 0 by block (0, 0) after the dependency wait (a later kernel's fixed-point sums)
  unsigned long long* zero;
  int n_zero;
  unsigned long long* zero2;    // a second region to clear (n_zero2 entries; the o kernel: qkv's fixed-point sums)
  int n_zero2;
};

// What a block does with its column sums. kEpiPartials: y[split, col] (the consumer sums the splits);
// kEpiFixed: fixed[col] += to_fixed(s) (no partials written; the folded finish). (Epilogues in which the last block of
// a column tile summed the splits were slower than a finish kernel: docs/decode_kernels.md.)
enum EpilogueMode { kEpiPartials = 0, kEpiFixed = 3 };

struct Epilogue {
  int mode;
  unsigned long long* fixed;    // kEpiFixed: [N], zero before the launch
};

__device__ __forceinline__ float round_bf16(float v) { return __bfloat162float(__float2bfloat16(v)); }

// The block's sum of v for every thread: warp shuffles, then the warps' sums in order (every caller's rounding; the
// same value in every block that sums the same data). warp_buf: kWarps floats of shared memory, free again once every
// thread has passed the next __syncthreads; all threads of the block must call it.
template <int kWarps>
__device__ __forceinline__ float block_sum_all(float v, float* warp_buf) {
#pragma unroll
  for (int off = 16; off > 0; off /= 2) v += __shfl_down_sync(0xffffffffu, v, off);
  if (threadIdx.x % 32 == 0) warp_buf[threadIdx.x / 32] = v;
  __syncthreads();
  float t = 0.f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) t += warp_buf[w];
  return t;
}

// block_sum_all, written to *out by thread 0.
template <int kWarps>
__device__ __forceinline__ void block_sum_to(float v, float* warp_buf, float* out) {
  const float t = block_sum_all<kWarps>(v, warp_buf);
  if (threadIdx.x == 0) *out = t;
}

// Activation loads: L2 (__ldcg) in the persistent layer kernel, whose blocks read what other blocks of the same launch
// wrote before a grid barrier (which invalidates no L1); plain loads (L1 may serve repeats) everywhere else - PDL
// chains included, since their wait is followed by an acquire fence (MATVEC_WAIT_FOR_PRODUCER).
template <bool kL2, typename T>
__device__ __forceinline__ T act(const T* p) {
  if (kL2) return __ldcg(p);
  return *p;
}

// acc + p[0] + p[stride] + ... + p[(n - 1) * stride], added in that order, with up to kMax loads in flight at once:
// one L2 round trip for n <= kMax where sum_strided's batches take ceil(n / 16) (plain loads, as the compiler unrolls
// them) or ceil(n / 8). For the latency-bound consumers of split-K partials (finish, the norm prologue's sums of
// squares): each round trip they save comes off the PDL chain's critical path.
template <int kMax, bool kL2 = false>
__device__ __forceinline__ float sum_wide(float acc, const float* p, int n, size_t stride) {
  for (int q0 = 0; q0 < n; q0 += kMax) {
    float t[kMax];
#pragma unroll
    for (int u = 0; u < kMax; ++u) t[u] = q0 + u < n ? act<kL2>(p + static_cast<size_t>(q0 + u) * stride) : 0.f;
#pragma unroll
    for (int u = 0; u < kMax; ++u) {
      if (q0 + u < n) acc += t[u];
    }
  }
  return acc;
}

// acc + p[0] + p[stride] + ... + p[(n - 1) * stride], added in that order, the loads issued eight at a time (L2-only
// loads are inline assembly, which the compiler does not hoist past the adds: one load per round trip otherwise).
template <bool kL2>
__device__ __forceinline__ float sum_strided(float acc, const float* p, int n, size_t stride) {
  if constexpr (!kL2) {   // plain loads: the compiler batches them itself (the code the one-kernel calls were measured with)
    for (int q = 0; q < n; ++q) acc += p[static_cast<size_t>(q) * stride];
  } else {
    acc = sum_wide<8, true>(acc, p, n, stride);
  }
  return acc;
}

// silu(gate) * up of feature k in bf16 roundings, as fused.py's swiglu prologue: g and u are the float sums of
// the gate and up columns; bias [2f] (gate's, then up's) or null.
__device__ __forceinline__ float swiglu_bf16(float g, float u, const __nv_bfloat16* bias, int f, int k) {
  g = round_bf16(g);
  u = round_bf16(u);
  if (bias != nullptr) {
    g = round_bf16(g + __bfloat162float(bias[k]));
    u = round_bf16(u + __bfloat162float(bias[f + k]));
  }
  const float sig = round_bf16(1.f / (1.f + expf(-g)));   // jax.nn.silu in bf16: g * sigmoid(g)
  const float act = round_bf16(g * sig);
  return round_bf16(act * u);
}

template <int MODE, bool kL2 = false>
__device__ __forceinline__ float input_at(const Prologue& p, int k, float rstd) {
  if (MODE == kNorm) {
    const float xn = round_bf16(__bfloat162float(act<kL2>(p.x + k)) * rstd);
    return round_bf16(xn * __bfloat162float(p.vec[k]));
  }
  if (MODE == kAttn) {   // flash-decoding's combine of the head's splits, as fused.py's "attn" prologue
    const int h = k / p.dh, d = k % p.dh, j = h / p.group, r = h % p.group;
    const float* ml = p.ml + static_cast<size_t>(j) * p.splits * 2 * p.gp;
    float mx = -INFINITY, num = 0.f, den = 0.f;
    if constexpr (!kL2) {   // plain loads, in two round trips for up to kB splits: every split's m, then every l and acc
      constexpr int kB = 8;
      if (p.splits <= kB) {
        float m8[kB], l8[kB], a8[kB];
#pragma unroll
        for (int u = 0; u < kB; ++u) m8[u] = u < p.splits ? ml[u * 2 * p.gp + r] : -INFINITY;
#pragma unroll
        for (int u = 0; u < kB; ++u) {
          l8[u] = u < p.splits ? ml[u * 2 * p.gp + p.gp + r] : 0.f;
          a8[u] = u < p.splits ? p.acc[((static_cast<size_t>(j) * p.splits + u) * p.gp + r) * p.dh + d] : 0.f;
        }
#pragma unroll
        for (int u = 0; u < kB; ++u) mx = fmaxf(mx, m8[u]);
#pragma unroll
        for (int u = 0; u < kB; ++u) {
          if (u >= p.splits) break;
          const float wgt = expf(m8[u] - mx);
          den += wgt * l8[u];
          num += wgt * a8[u];
        }
      } else {
#pragma unroll 4
        for (int c = 0; c < p.splits; ++c) mx = fmaxf(mx, ml[c * 2 * p.gp + r]);
#pragma unroll 4
        for (int c = 0; c < p.splits; ++c) {
          const float wgt = expf(ml[c * 2 * p.gp + r] - mx);
          den += wgt * ml[c * 2 * p.gp + p.gp + r];
          num += wgt * p.acc[((static_cast<size_t>(j) * p.splits + c) * p.gp + r) * p.dh + d];
        }
      }
    } else {   // the same math, the loads issued in batches (eight maxima, then four splits' m, l and acc)
      for (int c0 = 0; c0 < p.splits; c0 += 8) {
        float m8[8];
#pragma unroll
        for (int u = 0; u < 8; ++u) m8[u] = c0 + u < p.splits ? act<kL2>(ml + (c0 + u) * 2 * p.gp + r) : -INFINITY;
#pragma unroll
        for (int u = 0; u < 8; ++u) mx = fmaxf(mx, m8[u]);
      }
      for (int c0 = 0; c0 < p.splits; c0 += 4) {
        float m4[4], l4[4], a4[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          const int c = c0 + u < p.splits ? c0 + u : c0;
          m4[u] = act<kL2>(ml + c * 2 * p.gp + r);
          l4[u] = act<kL2>(ml + c * 2 * p.gp + p.gp + r);
          a4[u] = act<kL2>(p.acc + ((static_cast<size_t>(j) * p.splits + c) * p.gp + r) * p.dh + d);
        }
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          if (c0 + u >= p.splits) break;
          const float wgt = expf(m4[u] - mx);
          den += wgt * l4[u];
          num += wgt * a4[u];
        }
      }
    }
    return round_bf16(num / fmaxf(den, 1e-30f));
  }
  const int f = p.x_stride / 2;
  return swiglu_bf16(sum_strided<kL2>(0.f, p.xp + k, p.n_parts, p.x_stride),
                     sum_strided<kL2>(0.f, p.xp + f + k, p.n_parts, p.x_stride), p.vec, f, k);
}

// The prologue's input slice xs [ks] = the matvec input over rows k0 .. k0 + ks (see Mode), for a block of NT threads;
// with kResNorm the blocks of column tile 0 also write the rebuilt residual to pro.xo over the slice, and xs is
// followed by k_total floats of scratch. red: at least NT / 32 floats of shared memory. The caller syncs after it.
template <int MODE, bool kL2 = false, int NT = kThreads>
__device__ __forceinline__ void fill_input(const Prologue& pro, int k0, int ks, int tile, float* xs, float* red) {
  if (MODE == kParts) {
    for (int i = threadIdx.x; i < ks; i += NT) {
      xs[i] = round_bf16(sum_strided<kL2>(0.f, pro.xp + k0 + i, pro.n_parts, pro.x_stride));
    }
  } else if (MODE == kResNorm) {
    // fused.finish folded in: every block rebuilds the whole residual r = round(x + round(round(sum) + bias))
    // (rs: k_total floats of shared memory after xs; loads kB per thread in flight), sums its squares and normalises
    // its slice; the blocks of column tile 0 write r over their slice to xo
    float* rs = xs + ks;
    float sq = 0.f;
    constexpr int kB = 4;
    for (int i0 = threadIdx.x; i0 < pro.k_total; i0 += kB * NT) {
      float xv[kB], bv[kB];
      unsigned long long av[kB];
#pragma unroll
      for (int u = 0; u < kB; ++u) {
        const int i = i0 + u * NT;
        const bool ok = i < pro.k_total;
        xv[u] = ok ? __bfloat162float(act<kL2>(pro.x + i)) : 0.f;
        av[u] = ok ? act<kL2>(pro.racc + i) : 0ull;
        bv[u] = ok && pro.rbias != nullptr ? __bfloat162float(pro.rbias[i]) : 0.f;
      }
#pragma unroll
      for (int u = 0; u < kB; ++u) {
        const int i = i0 + u * NT;
        if (i < pro.k_total) {
          float y = round_bf16(from_fixed(av[u]));
          if (pro.rbias != nullptr) y = round_bf16(y + bv[u]);
          const float r = round_bf16(xv[u] + y);
          rs[i] = r;
          sq += r * r;
        }
      }
    }
    const float rstd = rsqrtf(block_sum_all<NT / 32>(sq, red) / pro.k_total + pro.eps);
    for (int i = threadIdx.x; i < ks; i += NT) {
      const float r = rs[k0 + i];
      xs[i] = round_bf16(round_bf16(r * rstd) * __bfloat162float(pro.vec[k0 + i]));
      if (tile == 0) pro.xo[k0 + i] = __float2bfloat16(r);
    }
  } else {
    int i0 = threadIdx.x;
    float rstd = 0.f;
    if (MODE == kNorm) {
      // the thread's first two entries of x and of the scale are loaded together with the sums of squares (in order,
      // up to 16 in flight: one round trip for hidden sizes up to 2048), then normalised as input_at does
      constexpr int kPre = 2;
      float xr[kPre], vr[kPre];
#pragma unroll
      for (int u = 0; u < kPre; ++u) {
        const int i = threadIdx.x + u * NT;
        xr[u] = i < ks ? __bfloat162float(act<kL2>(pro.x + k0 + i)) : 0.f;
        vr[u] = i < ks ? __bfloat162float(pro.vec[k0 + i]) : 0.f;
      }
      rstd = rsqrtf(sum_wide<12, kL2>(0.f, pro.ss, pro.n_chunks, 1) / pro.k_total + pro.eps);
#pragma unroll
      for (int u = 0; u < kPre; ++u) {
        const int i = threadIdx.x + u * NT;
        if (i < ks) xs[i] = round_bf16(round_bf16(xr[u] * rstd) * vr[u]);
      }
      i0 += kPre * NT;
    }
    for (int i = i0; i < ks; i += NT) xs[i] = input_at<MODE, kL2>(pro, k0 + i, rstd);
  }
}

// One block's share of a matvec: the columns of column tile `tile` over K slice `split` (ks rows). Issues the first U
// weight rows, calls wait() (the caller's dependency wait: PDL's griddepcontrol.wait, the layer kernel's grid
// barrier, or nothing), fills xs [ks] with the prologue's input, streams the rest of the slice, and returns the
// column sum of thread c = threadIdx.x (c < 8 * TPR; others get 0). red: (kThreads / TPR) x (8 * TPR + 1) floats
// of shared memory. kL2: activations are read with __ldcg (the persistent layer kernel; see act).
template <int TPR, int U, int MODE, bool kL2, typename Wait>
__device__ __forceinline__ float matvec_columns(const Prologue& pro, const __nv_bfloat16* __restrict__ w, int n,
                                                int ks, int tile, int split, float* xs, float* red, Wait wait) {
  constexpr int kGroups = kThreads / TPR;   // row groups
  constexpr int kCols = 8 * TPR;            // output columns per block
  const int group = threadIdx.x / TPR, lane = threadIdx.x % TPR;
  const int k0 = split * ks;
  const int col = tile * kCols + lane * 8;
  const __nv_bfloat16* wp = w + static_cast<size_t>(k0) * n + col;

  uint4 pre[U];
  preload_rows(pre, wp, n, group, kGroups, ks);
  wait();
  fill_input<MODE, kL2>(pro, k0, ks, tile, xs, red);
  __syncthreads();

  float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  stream_rows(acc, pre, wp, n, group, kGroups, ks, xs);
#pragma unroll
  for (int j = 0; j < 8; ++j) red[group * (kCols + 1) + lane * 8 + j] = acc[j];
  __syncthreads();
  float s = 0.f;
  if (threadIdx.x < kCols) {
#pragma unroll 8
    for (int g = 0; g < kGroups; ++g) s += red[g * (kCols + 1) + threadIdx.x];
  }
  return s;
}

// kL2: activations read with __ldcg (see act; pdl_chain.cu (removed; docs/decode_kernels.md) times both); the handlers use plain loads.
template <int TPR, int U, int MODE, bool kL2 = false>
__global__ void __launch_bounds__(kThreads) matvec_kernel(Prologue pro, Epilogue epi, const __nv_bfloat16* __restrict__ w,
                                                         int n, int ks, float* __restrict__ y, int y_stride, int pdl) {
  constexpr int kGroups = kThreads / TPR;   // row groups
  constexpr int kCols = 8 * TPR;            // output columns per block
  extern __shared__ float xs[];             // the input slice, summed and rounded: ks floats
  __shared__ float red[kGroups][kCols + 1];

  pdl_start(pdl);
  float s = matvec_columns<TPR, U, MODE, kL2>(pro, w, n, ks, blockIdx.x, blockIdx.y, xs, &red[0][0],
                                              [&] { pdl_wait(pdl); });
  static_assert(kCols <= kThreads, "one column per thread in the epilogue");
  const int c = threadIdx.x, oc = blockIdx.x * kCols + c;   // this thread's output column
  if (blockIdx.x == 0 && blockIdx.y == 0) {   // after the wait (in matvec_columns)
    if (pro.zero != nullptr)
      for (int i = threadIdx.x; i < pro.n_zero; i += kThreads) pro.zero[i] = 0ull;
    if (pro.zero2 != nullptr)
      for (int i = threadIdx.x; i < pro.n_zero2; i += kThreads) pro.zero2[i] = 0ull;
  }
  if (epi.mode == kEpiFixed) {
    if (c < kCols) atomicAdd(epi.fixed + oc, to_fixed(s));
    return;
  }
  if (c < kCols) y[static_cast<size_t>(blockIdx.y) * y_stride + oc] = s;
}

// The MLP of a decoder layer as ONE kernel (the step launch with folded finishes): no grid-wide
// dependency between gate_up and down, since each block owns a range of intermediate features. Block b of the grid
// (one per SM: kMlpThreads threads, the whole register file) takes the features [fa, fa + nf) of the 8-feature groups
// split as evenly as the grid allows (F = 8960 over 132 SMs: 64 or 72 features) and
//   1. rebuilds and normalises the whole input (pro: the kResNorm prologue over k_total = d rows; block 0 writes the
//      residual to pro.xo), having issued its first kU1 weight rows before the dependency wait;
//   2. streams gate_up's columns fa.. and f + fa.. over all d rows ([d, 2f]: nf / 4 threads a row, one 16-byte load
//      of eight columns each), sums them per column and applies SwiGLU (swiglu_bf16, bias b_gu or null) into hs [nf];
//      its first kU2 rows of down are requested before that reduction, so that the stream does not stop;
//   3. streams down's rows fa .. fa + nf ([f, d]: d / 8 threads a row, 16-byte loads) times hs and adds each of the
//      d column sums to out as fixed point (to_fixed; deterministic) - the next norm prologue, or the last layer's
//      finish, reads them.
// The gate and up sums take one split (all d rows in one block) instead of gate_up's split-K partials, so they round
// differently from the two-kernel MLP (float sums in another order). Four-feature groups with 8-byte loads balanced the
// blocks better but were 24-45 us a step slower on the H200 (2026-12-03). Needs d % 8 == 0, f % 8 == 0, d / 8 <= NT and
// nf <= NT (mlp_max_features). Dynamic shared memory: mlp_smem_floats floats.
constexpr int kMlpThreads = 1024;
__host__ __device__ constexpr int mlp_max_features(int f, int blocks) {
  return 8 * ((f / 8 + blocks - 1) / blocks);
}
// xs and its scratch (2 d), hs (nf), and the larger of the row groups' sums: phase 2's g1 (8 tpr1 + 1) <= 8.5 NT (tpr1
// >= 2), phase 3's (NT / (d / 8)) (d + 1)
template <int NT>
__host__ __device__ inline size_t mlp_smem_floats(int d, int f, int blocks) {
  const size_t red1 = 8 * NT + NT / 2, red2 = static_cast<size_t>(NT / (d / 8)) * (d + 1);
  return 2 * static_cast<size_t>(d) + mlp_max_features(f, blocks) + (red1 > red2 ? red1 : red2);
}

// The group-major phase 2's reduction: each lane holds 8 column sums of one half (lane % 2: gate or up) over its rows;
// the 16 lanes of each half meet by shuffles (xor over lane bits 1-4) and lanes 0 and 1 write out [16] (gate, then up).
__device__ __forceinline__ void warp_half_sums(float (&acc)[8], float* out) {
#pragma unroll
  for (int j = 0; j < 8; ++j) {
#pragma unroll
    for (int o = 2; o < 32; o *= 2) acc[j] += __shfl_xor_sync(0xffffffffu, acc[j], o);
  }
  if ((threadIdx.x & 31) < 2) {
#pragma unroll
    for (int j = 0; j < 8; ++j) out[(threadIdx.x & 1) * 8 + j] = acc[j];
  }
}

// kAdd: how the block adds its d column sums to out - 1 in column order, 2 starting at a column that depends on the
// block (blocks spread over d in 32-column steps, so that the ~130 blocks ending together do not add to the same
// addresses at once; the same totals: the sums are integers) - or 0 (pdl_chain.cu (removed; docs/decode_kernels.md) only): no adds (wrong
// sums; prices them).
template <int NT, int kAdd, bool kGM = false, int kU1 = 4, int kU2 = 4, bool kWide = false>
__device__ __forceinline__ void mlp_body(Prologue pro, const __nv_bfloat16* __restrict__ w_gu,
                                         const __nv_bfloat16* __restrict__ b_gu,
                                         const __nv_bfloat16* __restrict__ w_down, int d, int f,
                                         unsigned long long* __restrict__ out, int pdl) {
  extern __shared__ float smem[];
  const int octs = f / 8, q0 = static_cast<int>(static_cast<long long>(blockIdx.x) * octs / gridDim.x),
            q1 = static_cast<int>(static_cast<long long>(blockIdx.x + 1) * octs / gridDim.x);
  const int fa = 8 * q0, nf = 8 * (q1 - q0), nf_max = mlp_max_features(f, gridDim.x);
  float* xs = smem;                // [d] the normalised input, then (with rs) the rebuilt residual's scratch
  float* hs = smem + 2 * d;        // [nf] SwiGLU of the block's features
  float* red = hs + nf_max;        // the row groups' column sums (phase 2, then phase 3)

  // phase 2's mapping: tpr1 threads a row (nf / 8 gate chunks, then nf / 8 up chunks), g1 row groups. kGM (w_gu
  // group-major, mlp_gm_layout): warp w takes group qw = w % nq of the block's nq = nf / 8 and every wpg-th 16-row band
  // of it from band w / nq (wpg: the warps of that group), lane l row l / 2 of the band, half l % 2 (gate or up): each
  // warp reads 512 contiguous bytes, each block one contiguous region. kWide (needed when a block has more groups than
  // warps; the host picks it): warp w takes the whole of groups w, w + NT / 32, ...
  const int tpr1 = nf / 4, g1 = tpr1 > 0 ? NT / tpr1 : 0, grp1 = tpr1 > 0 ? threadIdx.x / tpr1 : 0,
            lane1 = tpr1 > 0 ? threadIdx.x % tpr1 : 0;
  const int nq = nf / 8, warp = threadIdx.x / 32;
  constexpr bool wide = kWide;
  const int qw = nq > 0 && !wide ? warp % nq : warp;
  const int wpg = nq > 0 && !wide ? (NT / 32 - qw + nq - 1) / nq : 1;
  const bool on1 = kGM ? nq > 0 : tpr1 > 0 && grp1 < g1;
  const int col1 = lane1 < nf / 8 ? fa + 8 * lane1 : f + fa + 8 * (lane1 - nf / 8);
  const __nv_bfloat16* wp1 = kGM ? w_gu + (static_cast<size_t>(q0 + qw) * d * 16 + (threadIdx.x & 1) * 8)
                                 : w_gu + col1;
  const size_t n1 = kGM ? 16 : 2 * static_cast<size_t>(f);
  const int first1 = kGM ? 16 * (nq > 0 && !wide ? warp / nq : 0) + (threadIdx.x & 31) / 2 : grp1;
  const int step1 = kGM ? 16 * wpg : g1;

  pdl_start(pdl);
  uint4 pre1[kU1];
  preload_rows(pre1, wp1, n1, first1, step1, d, on1);
  pdl_wait(pdl);
  fill_input<kResNorm, false, NT>(pro, 0, d, blockIdx.x, xs, red);
  __syncthreads();

  if (kGM && !wide) {   // the warp's sums of its lanes of one half (xor over lane bits 1-4), then per warp [16] in red
    float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    if (on1) stream_rows(acc, pre1, wp1, n1, first1, step1, d, xs);
    warp_half_sums(acc, red + warp * 16);
  } else if (kGM) {   // wide: the same per group, into red [group][16]
    for (int q = qw; q < nq; q += NT / 32) {
      const __nv_bfloat16* wq = w_gu + (static_cast<size_t>(q0 + q) * d * 16 + (threadIdx.x & 1) * 8);
      if (q != qw) preload_rows(pre1, wq, n1, first1, step1, d);
      float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
      stream_rows(acc, pre1, wq, n1, first1, step1, d, xs);
      warp_half_sums(acc, red + q * 16);
    }
  } else if (on1) {
    float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    stream_rows(acc, pre1, wp1, n1, grp1, g1, d, xs);
#pragma unroll
    for (int j = 0; j < 8; ++j) red[grp1 * (8 * tpr1 + 1) + lane1 * 8 + j] = acc[j];
  }

  // phase 3's mapping: tpr2 = d / 8 threads a row of down, g2 row groups over the block's nf rows; their first kU2
  // rows are requested now, before the reduction below
  const int tpr2 = d / 8, g2 = NT / tpr2, grp2 = threadIdx.x / tpr2, lane2 = threadIdx.x % tpr2;
  const bool on2 = grp2 < g2;
  const __nv_bfloat16* wp2 = w_down + static_cast<size_t>(fa) * d + 8 * lane2;
  uint4 pre2[kU2];
  preload_rows(pre2, wp2, d, grp2, g2, nf, on2);
  __syncthreads();
  if (static_cast<int>(threadIdx.x) < nf) {   // gate and up sums of feature fa + t over the row groups, in order
    const int c = threadIdx.x;
    float g = 0.f, u = 0.f;
    if (kGM && wide) {
      g = red[c / 8 * 16 + c % 8];
      u = red[c / 8 * 16 + 8 + c % 8];
    } else if (kGM) {   // over the warps of group c / 8
      for (int w = c / 8; w < NT / 32; w += nq) {
        g += red[w * 16 + c % 8];
        u += red[w * 16 + 8 + c % 8];
      }
    } else {
      const int stride1 = 8 * tpr1 + 1;
#pragma unroll 8
      for (int q = 0; q < g1; ++q) {
        g += red[q * stride1 + c];
        u += red[q * stride1 + nf + c];
      }
    }
    hs[c] = swiglu_bf16(g, u, b_gu, f, fa + c);
  }
  __syncthreads();

  if (on2) {
    float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    stream_rows(acc, pre2, wp2, d, grp2, g2, nf, hs);
#pragma unroll
    for (int j = 0; j < 8; ++j) red[grp2 * (d + 1) + lane2 * 8 + j] = acc[j];
  }
  __syncthreads();
  const int start = kAdd == 2 ? 32 * static_cast<int>(static_cast<long long>(blockIdx.x) * (d / 32) / gridDim.x) : 0;
  for (int c0 = threadIdx.x; c0 < d; c0 += NT) {
    const int c = c0 + start < d ? c0 + start : c0 + start - d;
    float s = 0.f;
    for (int q = 0; q < g2; ++q) s += red[q * (d + 1) + c];
    if (kAdd != 0) {
      atomicAdd(out + c, to_fixed(s));
    } else if (s == 12345.f) {   // keeps the sums (and so the whole product) from being optimised away
      out[c] = 0;
    }
  }
}

// kU1, kU2: 16-byte loads in flight per thread in phases 2 and 3.
template <int NT = kMlpThreads, int kAdd = 1, bool kGM = false, int kU1 = 4, int kU2 = 4, bool kWide = false>
__global__ void __launch_bounds__(NT, 1) mlp_kernel(Prologue pro, const __nv_bfloat16* __restrict__ w_gu,
                                                    const __nv_bfloat16* __restrict__ b_gu,
                                                    const __nv_bfloat16* __restrict__ w_down, int d, int f,
                                                    unsigned long long* __restrict__ out, int pdl) {
  mlp_body<NT, kAdd, kGM, kU1, kU2, kWide>(pro, w_gu, b_gu, w_down, d, f, out, pdl);
}

// mlp_kernel held to kMlpLeanRegs registers a thread (the row-major form the step launch runs for an unprepared gate_up; 58 otherwise): 1024 x 48 leaves 16K of
// the SM's 64K registers, so that a block of the next layer's qkv kernel (256 threads, <= 64 registers) can become
// resident while the MLP drains and stream its first weight rows before its PDL wait (with 58 no qkv block fits
// beside it). ptxas (CUDA 13.0, sm_90): 48 registers, no spills for kAdd 1; group-major (kGM) with 3 of phase 2's loads in
// flight a thread (4: 40 bytes of spills, 765 us against 686 a step in pdl_chain.cu (removed; docs/decode_kernels.md)), 8 bytes of spills.
constexpr int kMlpLeanRegs = 48;
template <int NT = kMlpThreads, int kAdd = 1, bool kGM = false>
__global__ void __maxnreg__(kMlpLeanRegs) mlp_kernel_lean(Prologue pro, const __nv_bfloat16* __restrict__ w_gu,
                                                          const __nv_bfloat16* __restrict__ b_gu,
                                                          const __nv_bfloat16* __restrict__ w_down, int d, int f,
                                                          unsigned long long* __restrict__ out, int pdl) {
  mlp_body<NT, kAdd, kGM, kGM ? 3 : 4>(pro, w_gu, b_gu, w_down, d, f, out, pdl);
}

// mlp_kernel with blocks of NT threads held to kRegs registers, NT x kRegs <= 48K so that a block of the next qkv
// kernel (16K) fits beside it (as mlp_kernel_lean does) while more loads stay in flight than lean's 48 registers
// allow: gm768 (768 x 64, six gate_up loads a thread: 72 KB a SM against lean's 64 KB; the default),
// group-major. ptxas (CUDA 13.0, sm_90): no spills. (640 x 72 and 512 x 96, eight and twelve loads, were slower.)
template <int NT, int kRegs, int kU1, int kU2, bool kGM = true>
__global__ void __maxnreg__(kRegs) mlp_kernel_capped(Prologue pro, const __nv_bfloat16* __restrict__ w_gu,
                                                     const __nv_bfloat16* __restrict__ b_gu,
                                                     const __nv_bfloat16* __restrict__ w_down, int d, int f,
                                                     unsigned long long* __restrict__ out, int pdl) {
  mlp_body<NT, 1, kGM, kU1, kU2>(pro, w_gu, b_gu, w_down, d, f, out, pdl);
}

// fused.finish as a CUDA kernel, so that it can take part in programmatic dependent launch: one block of
// kFinishChunk threads per chunk of the residual stream x [N]:
//   xo[i] = round(x[i] + round(round(sum_p parts[p, i]) + bias[i]))   (bias optional; P = 0: xo = x)
//   ss[chunk] = sum over the chunk of xo^2
// With pdl it lets the next kernel launch at once (that kernel prefetches its weights meanwhile) and waits for the
// previous kernel before reading anything.
constexpr int kFinishChunk = 128;

// kFixed: parts are the fixed-point sums of kEpiFixed ([N] unsigned 64-bit integers; n_parts > 0 means present).
template <bool kL2 = false, bool kFixed = false>
__global__ void __launch_bounds__(kFinishChunk) finish_kernel(const __nv_bfloat16* __restrict__ x,
                                                              const float* __restrict__ parts, int n_parts,
                                                              int stride, const __nv_bfloat16* __restrict__ bias,
                                                              __nv_bfloat16* __restrict__ xo, float* __restrict__ ss,
                                                              int pdl) {
  pdl_start(pdl);
  pdl_wait(pdl);
  const int i = blockIdx.x * kFinishChunk + threadIdx.x;
  float xn = __bfloat162float(act<kL2>(x + i));
  if (n_parts > 0) {
    float y = kFixed ? from_fixed(act<kL2>(reinterpret_cast<const unsigned long long*>(parts) + i))
                     : sum_wide<64, kL2>(0.f, parts + i, n_parts, stride);   // one round trip up to 64 partials
    y = round_bf16(y);
    if (bias != nullptr) y = round_bf16(y + __bfloat162float(bias[i]));
    xn = round_bf16(xn + y);
  }
  xo[i] = __float2bfloat16(xn);
  float sq = xn * xn;
  __shared__ float warp_sq[kFinishChunk / 32];
  block_sum_to<kFinishChunk / 32>(sq, warp_sq, ss + blockIdx.x);
}

}  // namespace cudaperf_matvec
