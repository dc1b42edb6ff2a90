// The step launch's layer pieces (matvec.cu StepImpl launches them through the XLA FFI; cuda_step.py plans them):
// LayerParams (one decoder layer's buffers and sizes), the prologue builders of its matvecs (RMSNorm, the attention
// merge, SwiGLU, the residual rebuilt from fixed-point sums), and attend_kernel: (KV head, cache split, head group)
// blocks that sum the qkv partials (or read their fixed-point sums), apply Qwen3's q/k norms and RoPE, write the new
// key and value into the cache (split 0) and run an unnormalised softmax over the split's slots (flash-decoding),
// with fused.py's roundings. (A persistent one-kernel layer with grid barriers lived here until it was measured
// about 2x slower than the chained kernels: docs/decode_kernels.md.)
#pragma once
#include "matvec_kernel.cuh"

namespace cudaperf_layer {

using cudaperf_matvec::kThreads;
using cudaperf_matvec::Prologue;
using cudaperf_matvec::round_bf16;
using cudaperf_matvec::pdl_start;
using cudaperf_matvec::pdl_wait;

constexpr int kRedFloats = 2080;   // max over TPR 8/16 of (kThreads / TPR) * (8 * TPR + 1): matvec_columns' red
constexpr int kMaxGroup = 16;      // query heads per KV head
constexpr int kMaxHeadDim = 256;
// LayerParams::pf_flags; kPfQkvFixed (the step launch with folded finishes):
// qkv adds its column sums as fixed point (kEpiFixed into qkv_parts) in every layer after the call's first, o clears
// them after the attention has read them, and the attention reads one sum a column (qkv_fixed) instead of split[0]
// partials.
constexpr int kPfQkvFixed = 8;

struct LayerParams {
  int d, h, hkv, dh, f, s_len, chunk;     // hidden, heads, KV heads, head dim, intermediate, cache slots, finish chunk
  float eps_attn, eps_mlp, eps_qk, scale;
  const __nv_bfloat16* x;                 // [d] the layer's input (residual stream)
  const float* ss;                        // [d / chunk] its chunks' sums of squares
  const __nv_bfloat16* attn_scale;        // [d]
  const __nv_bfloat16* mlp_scale;         // [d]
  const __nv_bfloat16* w_qkv;             // [d, (h + 2 hkv) dh]
  const __nv_bfloat16* b_qkv;             // [(h + 2 hkv) dh] or null
  const __nv_bfloat16* q_norm;            // [dh] or null (Qwen3)
  const __nv_bfloat16* k_norm;            // [dh] or null
  const float* cos;                       // [dh]
  const float* sin;                       // [dh]
  const int* kv_mask;                     // [s_len]
  const int* cache_index;                 // [1]: the new token's slot
  __nv_bfloat16* k_cache;                 // [hkv, s_len, dh] (updated in place at cache_index)
  __nv_bfloat16* v_cache;
  int attn_splits, span_max;              // cache splits per KV head; ceil(s_len / attn_splits)
  int attn_hsplit;                        // attend_kernel: blocks per (KV head, split), each with g / this q heads
  int pf_flags;                           // kPfQkvFixed: qkv's sums as fixed point (the step launch)
  const __nv_bfloat16* w_o;               // [h dh, d]
  const __nv_bfloat16* b_o;               // [d] or null
  const __nv_bfloat16* w_gu;              // [d, 2f] (gate columns, then up)
  const __nv_bfloat16* b_gu;              // [2f] or null
  const __nv_bfloat16* w_down;            // [f, d]
  const __nv_bfloat16* b_down;            // [d] or null
  int split[4], cols[4];                  // split-K and columns per item (64 or 128) of qkv, o, gate_up, down
  float* qkv_parts;                       // [split[0], (h + 2 hkv) dh]     (scratch)
  float* acc;                             // [hkv, attn_splits, g, dh]     (scratch)
  float* ml;                              // [hkv, attn_splits, 2, g]      (scratch)
  float* o_parts;                         // [split[1], d]                 (scratch)
  __nv_bfloat16* x_mid;                   // [d]
  float* ss_mid;                          // [d / chunk]
  float* gu_parts;                        // [split[2], 2f]                (scratch)
  float* down_parts;                      // [split[3], d]                 (scratch)
  __nv_bfloat16* x_out;                   // [d]
  float* ss_out;                          // [d / chunk]
  int qkv_fixed;                          // the attention reads qkv_parts as fixed-point sums [(h + 2 hkv) dh] (64-bit)
};

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int off = 16; off > 0; off /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

// sum_q p[q * stride] for q < n, eight loads in flight (not a serial chain of L2 round trips)
__device__ __forceinline__ float sum_parts(const float* p, int n, int stride) {
  float s[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  for (int q = 0; q < n; q += 8) {
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      if (q + u < n) s[u] += __ldcg(p + static_cast<size_t>(q + u) * stride);
    }
  }
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

// The KV head j's query heads h0 .. h0 + gl - 1 (default: all g), key and value of the new token, raw [gl + 2][dh]:
// the qkv partials' columns summed (+ bias), rounded. No barrier at the end.
// DH: the head dim when known at compile time (divisions by it become shifts), else 0 (p.dh). kL2: the partials are
// read with __ldcg (the layer kernel, whose blocks read what other blocks of the launch wrote before a grid barrier);
// attend_kernel reads them with plain loads (PDL's wait is followed by an acquire fence; matvec_kernel.cuh).
template <int DH = 0, bool kL2 = true>
__device__ void attn_sum_parts(const LayerParams& p, int j, float* raw, int h0 = 0, int gl = -1) {
  const int g = p.h / p.hkv, dh = DH ? DH : p.dh, n_qkv = (p.h + 2 * p.hkv) * dh;
  if (gl < 0) gl = g;
  const int rows = gl + 2;
  const int n = p.split[0];
  auto column = [&](int e) {   // raw entry e's column of qkv
    const int r = e / dh, d = e % dh;
    return (r < gl ? j * g + h0 + r : r == gl ? p.h + j : p.h + p.hkv + j) * dh + d;
  };
  if (p.qkv_fixed) {   // the column sums as fixed point (kPfQkvFixed): one load a column
    const unsigned long long* sums = reinterpret_cast<const unsigned long long*>(p.qkv_parts);
    for (int e = threadIdx.x; e < rows * dh; e += kThreads) {
      const int col = column(e);
      float r = round_bf16(cudaperf_matvec::from_fixed(cudaperf_matvec::act<kL2>(sums + col)));
      if (p.b_qkv != nullptr) r = round_bf16(r + __bfloat162float(p.b_qkv[col]));
      raw[e] = r;
    }
    return;
  }
  // the q heads', k's and v's columns summed over the qkv partials in order: two columns per thread at a time, up to
  // sixteen partials' loads of each in flight together - one L2 round trip for the default splits (a serial chain of
  // them cost the layer kernel ~25 us per layer, and attend_kernel sits on the PDL chain's critical path) - from
  // pointers stepped by a row (per-load 64-bit address arithmetic and predicates cost attend_kernel ~650 instructions
  // per warp, ncu 2026-12-03)
  constexpr int kU = 2, kQ = 16;
  const size_t row = static_cast<size_t>(n_qkv);
  for (int e0 = threadIdx.x; e0 < rows * dh; e0 += kU * kThreads) {
    int col[kU];
    const float* src[kU];   // column col[u] of partial q0
    float v[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int e = e0 + u * kThreads;
      col[u] = e < rows * dh ? column(e) : -1;
      src[u] = p.qkv_parts + (col[u] < 0 ? 0 : col[u]);
      v[u] = 0.f;
    }
    for (int q0 = 0; q0 < n; q0 += kQ) {
      float t[kQ][kU];
#pragma unroll
      for (int a = 0; a < kQ; ++a) {
#pragma unroll
        for (int u = 0; u < kU; ++u) t[a][u] = q0 + a < n && col[u] >= 0 ? cudaperf_matvec::act<kL2>(src[u] + a * row) : 0.f;
      }
#pragma unroll
      for (int a = 0; a < kQ; ++a) {
#pragma unroll
        for (int u = 0; u < kU; ++u) {
          if (q0 + a < n) v[u] += t[a][u];
        }
      }
#pragma unroll
      for (int u = 0; u < kU; ++u) src[u] += kQ * row;
    }
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      if (col[u] < 0) continue;
      float r = round_bf16(v[u]);
      if (p.b_qkv != nullptr) r = round_bf16(r + __bfloat162float(p.b_qkv[col[u]]));
      raw[e0 + u * kThreads] = r;
    }
  }
}

// rot [g + 1][rot_stride]: the q heads and k of raw after Qwen3's q/k norms and RoPE (cosp, sinp [dh]); rs [>= g + 1]
// scratch; g: the q heads in raw (default all of a KV head's). Starts and ends with __syncthreads.
template <int DH = 0>
__device__ void attn_rope(const LayerParams& p, const float* raw, float* rot, int rot_stride, float* rs,
                        const float* cosp, const float* sinp, int g = -1) {
  if (g < 0) g = p.h / p.hkv;
  const int dh = DH ? DH : p.dh, half = dh / 2;
  const int nw = kThreads / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (p.q_norm != nullptr) {   // Qwen3: RMSNorm over each q and k head's dims before RoPE
    for (int r = warp; r < g + 1; r += nw) {
      float s = 0.f;
      for (int d = lane; d < dh; d += 32) s += raw[r * dh + d] * raw[r * dh + d];
      s = warp_sum(s);
      if (lane == 0) rs[r] = rsqrtf(s / dh + p.eps_qk);
    }
    __syncthreads();
  }
  for (int e = threadIdx.x; e < (g + 1) * dh; e += kThreads) {
    const int r = e / dh, d = e % dh, pd = d < half ? d + half : d - half;
    float a = raw[r * dh + d], b = raw[r * dh + pd];
    if (p.q_norm != nullptr) {
      const __nv_bfloat16* nv = r < g ? p.q_norm : p.k_norm;
      a = round_bf16(round_bf16(a * rs[r]) * __bfloat162float(nv[d]));
      b = round_bf16(round_bf16(b * rs[r]) * __bfloat162float(nv[pd]));
    }
    rot[r * rot_stride + d] = d < half ? round_bf16(__fsub_rn(__fmul_rn(a, cosp[d]), __fmul_rn(b, sinp[d])))
                      : round_bf16(__fadd_rn(__fmul_rn(a, cosp[d]), __fmul_rn(b, sinp[d])));
  }
  __syncthreads();
}

// One warp per head hh: the split's softmax numerators over its nt scores sc[hh * sc_stride + t] (-inf where the
// slot is not attended), in place and rounded to bf16 (fused.py rounds p for P.V), with the new token's own score
// q . k (rot rows hh and g) on the first split (own); stat: running max m [kMaxGroup], l (the unrounded numerators
// + the own weight) [kMaxGroup], own weight [kMaxGroup]; g: the heads in rot (default all of a KV head's). Ends with
// __syncthreads.
__device__ void split_softmax(const LayerParams& p, const float* rot, int rot_stride, float* sc, int sc_stride, int nt,
                              bool own, float* stat, int g = -1) {
  if (g < 0) g = p.h / p.hkv;
  const int dh = p.dh, nw = kThreads / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int hh = warp; hh < g; hh += nw) {
    float s_own = 0.f;
    if (own) {
      for (int d = lane; d < dh; d += 32) s_own += rot[hh * rot_stride + d] * rot[g * rot_stride + d];
      s_own = warp_sum(s_own) * p.scale;
    }
    float m = -1e30f;   // fused.py's NEG: an empty split keeps it (its weight in the merge is then 0)
    for (int t = lane; t < nt; t += 32) m = fmaxf(m, sc[hh * sc_stride + t]);
    m = warp_max(m);
    if (own) m = fmaxf(m, s_own);
    float l = 0.f;
    for (int t = lane; t < nt; t += 32) {
      const float s = sc[hh * sc_stride + t];
      const float e = s == -INFINITY ? 0.f : expf(s - m);
      sc[hh * sc_stride + t] = round_bf16(e);
      l += e;
    }
    l = warp_sum(l);
    const float po = own ? expf(s_own - m) : 0.f;
    if (lane == 0) {
      stat[hh] = m;
      stat[kMaxGroup + hh] = l + po;
      stat[2 * kMaxGroup + hh] = po;
    }
  }
  __syncthreads();
}

// The matvec prologues (matvec_kernel.cuh) of a layer's projections: qkv (mlp false) and gate_up (mlp true) read
// RMSNorm of the residual stream, o merges the attention splits, down applies SwiGLU to gate_up's partials.
__host__ __device__ inline Prologue norm_prologue(const LayerParams& p, bool mlp) {
  Prologue pro = {};
  pro.x = mlp ? p.x_mid : p.x;
  pro.ss = mlp ? p.ss_mid : p.ss;
  pro.n_chunks = p.d / p.chunk;
  pro.k_total = p.d;
  pro.eps = mlp ? p.eps_mlp : p.eps_attn;
  pro.vec = mlp ? p.mlp_scale : p.attn_scale;
  return pro;
}

__host__ __device__ inline Prologue attn_prologue(const LayerParams& p) {
  Prologue pro = {};
  pro.acc = p.acc;
  pro.ml = p.ml;
  pro.splits = p.attn_splits;
  pro.gp = p.h / p.hkv;
  pro.dh = p.dh;
  pro.group = p.h / p.hkv;
  return pro;
}

__host__ __device__ inline Prologue swiglu_prologue(const LayerParams& p) {
  Prologue pro = {};
  pro.xp = p.gu_parts;
  pro.n_parts = p.split[2];
  pro.x_stride = 2 * p.f;
  pro.vec = p.b_gu;
  return pro;
}

// The step launch with its finish kernels folded into their consumers (matvec.cu's
// layer_kernels): o and down add their column sums to fixed-point accumulators of D entries (kEpiFixed; fold_sums,
// in the o_parts and down_parts scratch), and the next norm prologue rebuilds the residual from them (kResNorm): gate_up
// (mlp true) from the layer input x, o's sums and b_o into x_mid; qkv of every layer after the first (mlp false) from
// x_mid, down's sums and the previous layer's down bias into x_out (the next layer's x). Each accumulator is cleared
// by the kernel before its producer: qkv clears o's, gate_up clears down's.
__host__ __device__ inline unsigned long long* fold_sums(float* scratch) {
  return reinterpret_cast<unsigned long long*>(scratch);
}

__host__ __device__ inline Prologue resnorm_prologue(const LayerParams& p, bool mlp, const __nv_bfloat16* prev_b_down) {
  Prologue pro = {};
  pro.x = mlp ? p.x : p.x_mid;
  pro.racc = fold_sums(mlp ? p.o_parts : p.down_parts);
  pro.rbias = mlp ? p.b_o : prev_b_down;
  pro.xo = mlp ? p.x_mid : p.x_out;
  pro.k_total = p.d;
  pro.eps = mlp ? p.eps_mlp : p.eps_attn;
  pro.vec = mlp ? p.mlp_scale : p.attn_scale;
  pro.zero = fold_sums(mlp ? p.down_parts : p.o_parts);
  pro.n_zero = p.d;
  return pro;
}

// Slots of a cache split the standalone attention kernel stages in shared memory (the split count is raised until
// ceil(S / splits) fits: cuda_ffi.kernels_attn_splits).
constexpr int kAttendMaxSlots = 128;

// Row stride (bf16) of the staged keys and values: a multiple of 8 whose byte size is 64 more than a multiple of 128,
// so that the score loop's 16-byte reads of two adjacent rows by eight lanes fall in distinct banks.
__host__ __device__ constexpr int attend_row(int dh) { return dh == 32 ? dh : dh + 32; }

// Shared memory (bytes) of attend_kernel (cuda_ffi.layer_kernels_supported mirrors it): the keys [span_max][row]
// bf16, whose space the P.V partial sums [groups][g][dh] float32 reuse (at most 2048 g bytes), the values
// [span_max][row] bf16, then float32 raw [g + 2][dh], rot [g + 1][dh], rs [32], scores [g][span_max], valid [span_max],
// stat [3][kMaxGroup], cos and sin [2][dh].
__host__ __device__ inline size_t attend_smem_bytes(int g, int dh, int span_max) {
  const size_t kv = static_cast<size_t>(span_max) * attend_row(dh) * 2;
  const size_t red = static_cast<size_t>(2 * kThreads) * g * 4;
  return (kv > red ? kv : red) + kv +
         static_cast<size_t>((g + 2) * dh + (g + 1) * dh + 32 + g * span_max + span_max + 3 * kMaxGroup + 2 * dh) * 4;
}

// One-token attention of one (KV head, cache split[, head group]) per block: the layer handler's `kernels` and `step` launches
// (standalone kernels chained by programmatic dependent launch). DH: the head dim (32, 64, 128 or 256; attend_kernel_for).
// As attention_phase, with fused.py's roundings: the new token's q, k, v from the qkv partials, Qwen3's q/k norms,
// RoPE; split 0 writes the new k and v into the cache; the split's scores, unnormalised softmax and P.V -> acc [Hkv,
// splits, g, dh], ml [Hkv, splits, 2, g]. Built for few instructions per thread (a block runs once per layer, on a
// handful of SMs, so its time is its longest thread's dependent chain): the split's key and value rows are staged in
// shared memory by 16-byte loads issued together (the first batch while RoPE runs); a score is eight threads'
// partial dot products (each 16-byte key piece read once for all g heads) met by shuffles; P.V gives each thread a column
// pair of the values for all g heads over every (kThreads / (DH / 2))-th slot, the slot groups' sums met in shared
// memory. Masked slots get a zero softmax weight and zero value rows. p.attn_hsplit blocks share a (KV head, split),
// each taking g / attn_hsplit of its q heads (less work per block, more blocks; the first writes the cache). KG: the
// block's heads rounded up to 2, 4, 8 or 16 (the head loops are unrolled to KG, so few dead iterations).
template <int DH, int KG>
__global__ void __launch_bounds__(kThreads) attend_kernel(LayerParams p, int pdl) {
  constexpr int kRow = attend_row(DH), kPieces = DH / 8;
  constexpr int kTps = kPieces >= 8 ? 8 : 4, kPer = kPieces / kTps;   // scores: threads per slot, pieces per thread
  constexpr int kPairs = DH / 2, kGroups = kThreads / kPairs;   // P.V: column pairs x slot groups
  static_assert(DH >= 32 && DH <= kMaxHeadDim && DH % 32 == 0 && kThreads % kPairs == 0, "head dim");
  static_assert(KG <= kMaxGroup, "heads per KV head");
  extern __shared__ __align__(16) float smem[];
  pdl_start(pdl);
  const int g = p.h / p.hkv, cap = p.span_max, hs = max(p.attn_hsplit, 1), gl = g / hs;   // gl: this block's heads
  const int hp = blockIdx.x % hs, c = blockIdx.x / hs % p.attn_splits, j = blockIdx.x / hs / p.attn_splits;
  const int h0 = hp * gl;
  const size_t kv_bytes = static_cast<size_t>(cap) * kRow * 2, red_bytes = static_cast<size_t>(2 * kThreads) * g * 4;
  __nv_bfloat16* ks = reinterpret_cast<__nv_bfloat16*>(smem);                          // [cap][kRow]
  float* red = smem;                                                                    // [kGroups][g][DH] (after scores)
  __nv_bfloat16* vs = ks + (kv_bytes > red_bytes ? kv_bytes : red_bytes) / 2;           // [cap][kRow]
  float* raw = reinterpret_cast<float*>(vs + static_cast<size_t>(cap) * kRow);          // [g + 2][DH]
  float* rot = raw + (g + 2) * DH;                                                      // [g + 1][DH]
  float* rs = rot + (g + 1) * DH;
  float* sc = rs + 32;                                                                  // [g][cap]
  float* okf = sc + g * cap;                                                            // [cap]
  float* stat = okf + cap;                                                              // m, l, own weight
  float* csn = stat + 3 * kMaxGroup;                                                    // cos [DH], sin [DH]
  // Everything is read after the wait (the program's inputs may come from the XLA kernel just before this call, which
  // a PDL chain need not have waited for): (1) the index, cos/sin and the qkv partials, (2) the split's key and value
  // rows. (Loading the index and the first rows before the wait measured even: docs/decode_kernels.md.)
  int idx = 0, t0 = 0, nt = 0, total = 0;
  const size_t head = static_cast<size_t>(j) * p.s_len;
  const uint4 *kg = nullptr, *vg = nullptr;
  auto plan = [&] {   // the split's slots [t0, t0 + nt) and their 16-byte pieces of keys (and as many of values)
    const int span = (idx + p.attn_splits - 1) / p.attn_splits;
    t0 = c * span;
    nt = max(min(t0 + span, idx) - t0, 0);
    total = nt * kPieces;
    kg = reinterpret_cast<const uint4*>(p.k_cache + (head + t0) * DH);
    vg = reinterpret_cast<const uint4*>(p.v_cache + (head + t0) * DH);
  };
  auto dst = [&](__nv_bfloat16* base, int q) {
    return reinterpret_cast<uint4*>(base + (q / kPieces) * kRow + q % kPieces * 8);
  };
  constexpr int kBatch = 4;   // pieces of keys (and of values) per thread in flight at once
  uint4 kr[kBatch], vr[kBatch];
  auto load = [&](int q0) {
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int q = q0 + u * kThreads;
      if (q < total) {
        kr[u] = kg[q];
        vr[u] = vg[q];
      }
    }
  };
  auto store = [&](int q0) {
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int q = q0 + u * kThreads;
      if (q < total) {   // a masked slot's value row as zeros (left padding may hold anything, even NaN)
        *dst(ks, q) = kr[u];
        *dst(vs, q) = okf[q / kPieces] != 0.f ? vr[u] : make_uint4(0, 0, 0, 0);
      }
    }
  };
  pdl_wait(pdl);
  idx = *p.cache_index;
  static_assert(kMaxHeadDim <= kThreads, "a thread per cos/sin entry");
  const bool trig = static_cast<int>(threadIdx.x) < DH;
  const float cs_r = trig ? p.cos[threadIdx.x] : 0.f, sn_r = trig ? p.sin[threadIdx.x] : 0.f;
  attn_sum_parts<DH, false>(p, j, raw, h0, gl);
  if (trig) {
    csn[threadIdx.x] = cs_r;
    csn[DH + threadIdx.x] = sn_r;
  }
  plan();
  load(threadIdx.x);
  const bool own = c == 0 && p.kv_mask[idx] != 0;   // the token itself: first split only
  for (int t = threadIdx.x; t < nt; t += kThreads) okf[t] = p.kv_mask[t0 + t] != 0 ? 1.f : 0.f;
  attn_rope<DH>(p, raw, rot, DH, rs, csn, csn + DH, gl);   // starts and ends with __syncthreads (okf is complete)
  store(threadIdx.x);
  for (int q0 = threadIdx.x + kBatch * kThreads; q0 < total; q0 += kBatch * kThreads) {   // long splits
    load(q0);
    store(q0);
  }
  __syncthreads();   // the staged rows
  if (c == 0 && hp == 0) {   // the new token's key and value, in place
    for (int d = threadIdx.x; d < DH; d += kThreads) {
      p.k_cache[(head + idx) * DH + d] = __float2bfloat16(rot[gl * DH + d]);
      p.v_cache[(head + idx) * DH + d] = __float2bfloat16(raw[(gl + 1) * DH + d]);
    }
  }
  // scores: kTps threads per slot, thread `part` taking the key pieces part, part + kTps, ... for every head
  const int lane = threadIdx.x % 32;
  for (int e0 = threadIdx.x - lane; e0 < nt * kTps; e0 += kThreads) {   // warp-uniform bounds: the shuffles below
    const int e = e0 + lane, t = e / kTps, part = e % kTps;
    const bool live = t < nt;
    float acc[KG];
#pragma unroll
    for (int hh = 0; hh < KG; ++hh) acc[hh] = 0.f;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int piece = part + kTps * i;
      const uint4 kp = live ? *reinterpret_cast<const uint4*>(ks + t * kRow + piece * 8) : make_uint4(0, 0, 0, 0);
      const uint32_t w[4] = {kp.x, kp.y, kp.z, kp.w};
      float kf[8];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        kf[2 * u] = __uint_as_float(w[u] << 16);
        kf[2 * u + 1] = __uint_as_float(w[u] & 0xffff0000u);
      }
#pragma unroll
      for (int hh = 0; hh < KG; ++hh) {
        if (hh < gl) {
          const float4 qa = *reinterpret_cast<const float4*>(rot + hh * DH + piece * 8);
          const float4 qb = *reinterpret_cast<const float4*>(rot + hh * DH + piece * 8 + 4);
          acc[hh] += qa.x * kf[0] + qa.y * kf[1] + qa.z * kf[2] + qa.w * kf[3] +
                     qb.x * kf[4] + qb.y * kf[5] + qb.z * kf[6] + qb.w * kf[7];
        }
      }
    }
#pragma unroll
    for (int hh = 0; hh < KG; ++hh) {
      if (hh < gl) {
        float v = acc[hh];
#pragma unroll
        for (int off = 1; off < kTps; off *= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
        if (live && part == 0) sc[hh * cap + t] = okf[t] != 0.f ? v * p.scale : -INFINITY;
      }
    }
  }
  __syncthreads();
  split_softmax(p, rot, DH, sc, cap, nt, own, stat, gl);   // ends with __syncthreads; the keys' space is free
  // P.V: column pair `pair` of the values for every head, over slots group, group + kGroups, ...
  const int pair = threadIdx.x % kPairs, group = threadIdx.x / kPairs;
  float2 o[KG];
#pragma unroll
  for (int hh = 0; hh < KG; ++hh) o[hh] = make_float2(0.f, 0.f);
  for (int t = group; t < nt; t += kGroups) {
    const float2 v = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(vs + t * kRow + 2 * pair));
#pragma unroll
    for (int hh = 0; hh < KG; ++hh) {
      if (hh < gl) {
        const float pw = sc[hh * cap + t];
        o[hh].x += pw * v.x;
        o[hh].y += pw * v.y;
      }
    }
  }
#pragma unroll
  for (int hh = 0; hh < KG; ++hh) {
    if (hh < gl) *reinterpret_cast<float2*>(red + (group * gl + hh) * DH + 2 * pair) = o[hh];
  }
  __syncthreads();
  for (int e = threadIdx.x; e < gl * DH; e += kThreads) {
    const int hh = e / DH, d = e % DH;
    float out = 0.f;
#pragma unroll
    for (int q = 0; q < kGroups; ++q) out += red[(q * gl + hh) * DH + d];
    if (own) out += stat[2 * kMaxGroup + hh] * raw[(gl + 1) * DH + d];
    p.acc[((static_cast<size_t>(j) * p.attn_splits + c) * g + h0 + hh) * DH + d] = out;
  }
  if (static_cast<int>(threadIdx.x) < gl) {
    float* ml = p.ml + (static_cast<size_t>(j) * p.attn_splits + c) * 2 * g + h0;
    ml[threadIdx.x] = stat[threadIdx.x];
    ml[g + threadIdx.x] = stat[kMaxGroup + threadIdx.x];
  }
}

// The attend kernel for head dim dh and g query heads per KV head, or nullptr (cuda_ffi.layer_kernels_supported
// takes only head dims 32, 64, 128, 256 and g <= kMaxGroup).
using AttendKernel = void (*)(LayerParams, int);
template <int DH>
AttendKernel attend_kernel_g(int g) {
  if (g <= 2) return attend_kernel<DH, 2>;
  if (g <= 4) return attend_kernel<DH, 4>;
  if (g <= 8) return attend_kernel<DH, 8>;
  return attend_kernel<DH, 16>;
}
inline AttendKernel attend_kernel_for(int dh, int g) {
  if (g < 1 || g > kMaxGroup) return nullptr;
  switch (dh) {
    case 32: return attend_kernel_g<32>(g);
    case 64: return attend_kernel_g<64>(g);
    case 128: return attend_kernel_g<128>(g);
    case 256: return attend_kernel_g<256>(g);
    default: return nullptr;
  }
}

}  // namespace cudaperf_layer
