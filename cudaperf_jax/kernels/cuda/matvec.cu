// Batch-1 matrix-vector product for decode, as an XLA FFI custom call (cudaperf_jax/kernels/cuda_ffi.py).
//
//   y[s, n] = sum_{k in slice s} round_bf16(sum_p xp[p, k]) * w[k, n]      (float32 split-K partials)
//
// xp [P, X] float32 holds P partial sums of the input vector (the producer's split-K partials; P = 1 for a
// plain vector); only its first K columns are read, so a producer's whole output buffer can be passed without
// a slicing copy. w [K, N] bfloat16, row-major as the decoder stores its kernels. y [S, >= N] float32 (columns
// past N are left alone: the attention kernel reads a padded buffer).
//
// Two more prologues, as fused.py's Pallas matvec has them (same roundings):
//   norm    x bf16 [K], ss float32 (its chunks' sums of squares), scale bf16 [K]: the input is RMSNorm(x)
//   swiglu  parts float32 [P, 2K] (gate/up split-K partials), bias bf16 [2K]: silu(gate) * up
//   attn    acc float32 [Hkv, S, Gp, Dh], ml float32 [Hkv, S, 2, Gp] (fused.attend's unnormalised
//           splits), group = heads per KV head: the merged attention output of head k / Dh
//
// A block of 256 threads owns 8 * TPR output columns and one K slice: TPR threads span a row with one 16-byte
// load (8 bf16) each, the 256 / TPR row groups walk the slice's rows U at a time, so each thread keeps U
// independent 16-byte loads in flight. The input slice is summed and rounded once into shared memory; the
// row groups' sums meet once, in shared memory, at the end.
//
// With pdl != 0 the kernel is launched with programmatic stream serialization (Hopper): it lets the next
// kernel launch as soon as its own blocks run (griddepcontrol.launch_dependents), issues its first U weight
// rows, and only then waits for the previous kernel's results (griddepcontrol.wait) before it reads xp. The
// weights must therefore not be written by the kernel just before it in the stream (the caller's contract:
// weights are inputs of the jitted program, not produced inside it).
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "xla/ffi/api/ffi.h"

#include "matvec_kernel.cuh"
#include "topk_kernel.cuh"
#include "layer_kernel.cuh"
#include "launch.cuh"

namespace ffi = xla::ffi;

// The handlers only launch kernels on the given stream, so XLA may capture them into its command buffers (CUDA
// graphs) with the kernels around them.
#define MATVEC_TRAITS {ffi::Traits::kCmdBufferCompatible}

namespace {

using cudaperf_matvec::kThreads;
using cudaperf_matvec::matvec_kernel;
using cudaperf_matvec::Prologue;
using cudaperf_matvec::Epilogue;
using cudaperf_matvec::kParts;
using cudaperf_matvec::kNorm;
using cudaperf_matvec::kSwiglu;
using cudaperf_matvec::kAttn;


// pdl: 0, or the kernels' PDL flags (kPdlOn, kPdlLate)
template <int TPR, int U, int MODE, bool kL2 = false>
cudaError_t launch(cudaStream_t stream, const Prologue& pro, const Epilogue& epi, const __nv_bfloat16* w, int k, int n,
                   int split, float* y, int y_stride, int pdl) {
  const int ks = k / split;   // kResNorm: the whole rebuilt residual [k] after the slice
  const size_t smem = static_cast<size_t>(MODE == cudaperf_matvec::kResNorm ? ks + k : ks) * sizeof(float);
  auto kernel = matvec_kernel<TPR, U, MODE, kL2>;
  if (smem > 40 * 1024) {
    cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    if (e != cudaSuccess) return e;
  }
  Launch l(dim3(n / (8 * TPR), split, 1), dim3(kThreads, 1, 1), smem, stream,
           pdl != 0 && (pdl & cudaperf_matvec::kPdlNoAttr) == 0);
  return cudaLaunchKernelEx(&l.cfg, kernel, pro, epi, w, n, ks, y, y_stride, pdl & ~cudaperf_matvec::kPdlNoAttr);
}

template <int TPR, int MODE, bool kL2 = false>
cudaError_t launch_unrolled(int unroll, cudaStream_t stream, const Prologue& pro, const Epilogue& epi,
                            const __nv_bfloat16* w, int k, int n, int split, float* y, int y_stride, int pdl) {
  if (unroll == 8) return launch<TPR, 8, MODE, kL2>(stream, pro, epi, w, k, n, split, y, y_stride, pdl);
  return launch<TPR, 4, MODE, kL2>(stream, pro, epi, w, k, n, split, y, y_stride, pdl);
}

struct Options {
  int64_t split_k, pdl, unroll, cols;
};

template <int MODE>
ffi::Error dispatch(cudaStream_t stream, const Prologue& pro, ffi::Buffer<ffi::BF16>& w,
                    ffi::Result<ffi::Buffer<ffi::F32>>& y, const Options& opt) {
  auto wd = w.dimensions(), yd = y->dimensions();
  if (wd.size() != 2 || yd.size() != 2) return ffi::Error::InvalidArgument("cudaperf_matvec: w and y must be 2-D");
  const int64_t k = wd[0], n = wd[1], split_k = opt.split_k;
  if (split_k < 1 || k % split_k || yd[0] != split_k || yd[1] < n)
    return ffi::Error::InvalidArgument("cudaperf_matvec: split_k must divide K and y must be [split_k, >= N]");
  if ((k / split_k) * 4 > 200 * 1024)
    return ffi::Error::InvalidArgument("cudaperf_matvec: K / split_k is too long for the shared input slice");
  const int64_t cols = opt.cols;
  if ((cols != 64 && cols != 128 && cols != 256) || n % cols)
    return ffi::Error::InvalidArgument("cudaperf_matvec: cols (columns per block) must be 64, 128 or 256 and divide N");
  const Epilogue epi = {};   // kEpiPartials
  const auto* wptr = reinterpret_cast<const __nv_bfloat16*>(w.typed_data());
  float* yptr = y->typed_data();
  const int ys = static_cast<int>(yd[1]);
  const int u = static_cast<int>(opt.unroll);
  const int pdl = opt.pdl != 0 ? cudaperf_matvec::kPdlOn : 0;
  cudaError_t e;
  if (cols == 256) {
    e = launch_unrolled<32, MODE>(u, stream, pro, epi, wptr, k, n, split_k, yptr, ys, pdl);
  } else if (cols == 128) {
    e = launch_unrolled<16, MODE>(u, stream, pro, epi, wptr, k, n, split_k, yptr, ys, pdl);
  } else {
    e = launch_unrolled<8, MODE>(u, stream, pro, epi, wptr, k, n, split_k, yptr, ys, pdl);
  }
  if (e != cudaSuccess) return ffi::Error::Internal(std::string("cudaperf_matvec: ") + cudaGetErrorString(e));
  return ffi::Error::Success();
}

// with_lse: also the rows' logsumexp in lse [B] (ms [B, 2 ceil(V / 64)] its per-chunk pieces); else both untouched.
ffi::Error TopkImpl(cudaStream_t stream, ffi::Buffer<ffi::F32> x, ffi::Result<ffi::Buffer<ffi::F32>> vals,
                    ffi::Result<ffi::Buffer<ffi::S32>> idx, ffi::Result<ffi::Buffer<ffi::U32>> maxima,
                    ffi::Result<ffi::Buffer<ffi::F32>> ms, ffi::Result<ffi::Buffer<ffi::F32>> lse, int64_t k,
                    int64_t with_lse) {
  using namespace cudaperf_topk;
  auto xd = x.dimensions();
  if (xd.size() != 2 || k < 1 || k > kMaxK) return ffi::Error::InvalidArgument("cudaperf_topk: x must be [B, V], 1 <= k <= 64");
  const int64_t b = xd[0], v = xd[1], n_chunks = (v + kChunk - 1) / kChunk;
  if (v < k || n_chunks > kMaxChunks || vals->element_count() != static_cast<size_t>(b * k)
      || idx->element_count() != static_cast<size_t>(b * k) || maxima->element_count() != static_cast<size_t>(b * n_chunks))
    return ffi::Error::InvalidArgument("cudaperf_topk: needs k <= V <= 262144 and outputs [B, k], [B, k], [B, ceil(V / 64)]");
  if (with_lse && (ms->element_count() != static_cast<size_t>(2 * b * n_chunks) || lse->element_count() != static_cast<size_t>(b)))
    return ffi::Error::InvalidArgument("cudaperf_topk: with_lse needs outputs [B, 2 ceil(V / 64)] and [B]");
  float2* msp = with_lse ? reinterpret_cast<float2*>(ms->typed_data()) : nullptr;
  float* lsep = with_lse ? lse->typed_data() : nullptr;
  constexpr int kWarps = kMaximaThreads / 32;
  topk_maxima<<<dim3(static_cast<unsigned>((n_chunks + kWarps - 1) / kWarps), static_cast<unsigned>(b)), kMaximaThreads, 0,
                stream>>>(x.typed_data(), static_cast<int>(v), static_cast<int>(n_chunks), maxima->typed_data(), msp);
  topk_select<<<static_cast<unsigned>(b), kSelectThreads, 0, stream>>>(
      x.typed_data(), static_cast<int>(v), static_cast<int>(n_chunks), maxima->typed_data(), static_cast<int>(k),
      vals->typed_data(), idx->typed_data(), msp, lsep);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return ffi::Error::Internal(std::string("cudaperf_topk: ") + cudaGetErrorString(e));
  return ffi::Error::Success();
}

#define MATVEC_OUTPUTS \
  ffi::Result<ffi::Buffer<ffi::F32>> y, int64_t split_k, int64_t pdl, int64_t unroll, int64_t cols
#define MATVEC_DISPATCH(MODE) return dispatch<MODE>(stream, pro, w, y, Options{split_k, pdl, unroll, cols})

ffi::Error PartsImpl(cudaStream_t stream, ffi::Buffer<ffi::F32> xp, ffi::Buffer<ffi::BF16> w, MATVEC_OUTPUTS) {
  auto xd = xp.dimensions();
  if (xd.size() != 2 || w.dimensions().size() != 2 || xd[1] < w.dimensions()[0])
    return ffi::Error::InvalidArgument("cudaperf_matvec: xp must be [P, >= K]");
  Prologue pro = {};
  pro.xp = xp.typed_data();
  pro.n_parts = static_cast<int>(xd[0]);
  pro.x_stride = static_cast<int>(xd[1]);
  MATVEC_DISPATCH(kParts);
}

ffi::Error NormImpl(cudaStream_t stream, ffi::Buffer<ffi::BF16> x, ffi::Buffer<ffi::F32> ss_in,
                    ffi::Buffer<ffi::BF16> scale, ffi::Buffer<ffi::BF16> w, MATVEC_OUTPUTS, int64_t n_chunks, float eps) {
  const int64_t k = w.dimensions().size() == 2 ? w.dimensions()[0] : -1;
  if (x.element_count() != k || scale.element_count() != k || n_chunks < 1
      || static_cast<int64_t>(ss_in.element_count()) < n_chunks)
    return ffi::Error::InvalidArgument("cudaperf_matvec_norm: x and scale must have K entries and ss >= n_chunks");
  Prologue pro = {};
  pro.x = reinterpret_cast<const __nv_bfloat16*>(x.typed_data());
  pro.ss = ss_in.typed_data();
  pro.n_chunks = static_cast<int>(n_chunks);
  pro.k_total = static_cast<int>(k);
  pro.eps = eps;
  pro.vec = reinterpret_cast<const __nv_bfloat16*>(scale.typed_data());
  MATVEC_DISPATCH(kNorm);
}

ffi::Error SwigluImpl(cudaStream_t stream, ffi::Buffer<ffi::F32> parts, ffi::Buffer<ffi::BF16> bias,
                      ffi::Buffer<ffi::BF16> w, MATVEC_OUTPUTS, int64_t has_bias) {
  auto pd = parts.dimensions();
  const int64_t k = w.dimensions().size() == 2 ? w.dimensions()[0] : -1;
  if (pd.size() != 2 || pd[1] != 2 * k || (has_bias && static_cast<int64_t>(bias.element_count()) != 2 * k))
    return ffi::Error::InvalidArgument("cudaperf_matvec_swiglu: parts must be [P, 2K] and bias [2K]");
  Prologue pro = {};
  pro.xp = parts.typed_data();
  pro.n_parts = static_cast<int>(pd[0]);
  pro.x_stride = static_cast<int>(pd[1]);
  pro.vec = has_bias ? reinterpret_cast<const __nv_bfloat16*>(bias.typed_data()) : nullptr;
  MATVEC_DISPATCH(kSwiglu);
}

ffi::Error AttnImpl(cudaStream_t stream, ffi::Buffer<ffi::F32> acc, ffi::Buffer<ffi::F32> ml, ffi::Buffer<ffi::BF16> w,
                    MATVEC_OUTPUTS, int64_t group) {
  auto ad = acc.dimensions(), md = ml.dimensions();
  const int64_t k = w.dimensions().size() == 2 ? w.dimensions()[0] : -1;
  if (ad.size() != 4 || md.size() != 4 || md[0] != ad[0] || md[1] != ad[1] || md[2] != 2 || md[3] != ad[2]
      || group < 1 || group > ad[2] || ad[0] * group * ad[3] != k)
    return ffi::Error::InvalidArgument(
        "cudaperf_matvec_attn: acc must be [Hkv, S, Gp, Dh], ml [Hkv, S, 2, Gp], and Hkv * group * Dh == K");
  Prologue pro = {};
  pro.acc = acc.typed_data();
  pro.ml = ml.typed_data();
  pro.splits = static_cast<int>(ad[1]);
  pro.gp = static_cast<int>(ad[2]);
  pro.dh = static_cast<int>(ad[3]);
  pro.group = static_cast<int>(group);
  MATVEC_DISPATCH(kAttn);
}


// The device's SM count (cached per device).
cudaError_t sm_count(int* n) {
  static std::mutex mu;
  static std::map<int, int> known;
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return e;
  std::lock_guard<std::mutex> lock(mu);
  auto it = known.find(dev);
  if (it == known.end()) {
    int sms = 0;
    e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (e != cudaSuccess) return e;
    it = known.emplace(dev, sms).first;
  }
  *n = it->second;
  return cudaSuccess;
}

// Plain activation loads: PDL's wait is followed by an acquire fence (L1 invalidated; matvec_kernel.cuh).
template <int MODE>
cudaError_t launch_cols(int cols, int unroll, cudaStream_t stream, const Prologue& pro, const __nv_bfloat16* w, int k,
                        int n, int split, float* y, int pdl, const Epilogue& epi = {}) {
  if (cols == 256) return launch_unrolled<32, MODE>(unroll, stream, pro, epi, w, k, n, split, y, n, pdl);
  if (cols == 128) return launch_unrolled<16, MODE>(unroll, stream, pro, epi, w, k, n, split, y, n, pdl);
  return launch_unrolled<8, MODE>(unroll, stream, pro, epi, w, k, n, split, y, n, pdl);
}

// The layer as seven standalone kernels from one handler call (launch 2): qkv, attend_kernel, o, finish, gate_up, down,
// finish, each with its own grid and tiling (ints[2..9] split/cols, ints[19..22] unroll) and, with pdl, chained by
// programmatic dependent launch: inside the CUDA graph XLA captures this call into, the launches keep their
// programmatic edges, so each matvec streams its first weight rows while the kernel before it drains. (Separate FFI
// calls become separate child graphs, between which PDL does nothing.) Needs chunk == kFinishChunk.
// fold (the step launch): kFoldOn - no finish kernels: o and down add fixed-point sums, the
// next norm prologues rebuild the residual (layer_kernel.cuh's resnorm_prologue; prev_b_down: the down bias of the
// layer before), except the qkv of the call's first layer (first_of_call), which reads x and ss as usual; kFoldLast -
// the last layer (one finish kernel from x_mid and down's sums gives x_out and ss_out).
// kFoldMlp (with kFoldOn): gate_up and down as one kernel (matvec_kernel.cuh), a block per SM; o clears down's sums
// then. With kFoldMlpGM | kFoldMlp768 (w_gu group-major, cuda_step.mlp_gm_layout: each block's gate and up columns one
// contiguous region) mlp_kernel_capped, blocks of 768 threads held to 64 registers; where a block's features do not
// fit 768 threads, the 1024-thread group-major mlp_kernel (six 16-byte loads in flight a thread), with kFoldMlpWide
// (set by layer_kernels) when a block has more 8-feature groups than warps. With kFoldMlpLean (w_gu row-major, not
// prepared): mlp_kernel_lean (48 registers, room for a block of the next qkv beside it).
constexpr int kFoldOn = 1, kFoldLast = 2, kFoldMlp = 4, kFoldMlpLean = 16, kFoldMlpGM = 32,
              kFoldMlp768 = 64, kFoldMlpWide = 128;
int mlp_threads(int fold_flags) {
  return (fold_flags & kFoldMlp768) != 0 ? 768 : cudaperf_matvec::kMlpThreads;
}
size_t mlp_smem_bytes(int d, int f, int blocks, int fold_flags) {
  using cudaperf_matvec::mlp_smem_floats;
  return 4 * ((fold_flags & kFoldMlp768) != 0 ? mlp_smem_floats<768>(d, f, blocks)
                                               : mlp_smem_floats<cudaperf_matvec::kMlpThreads>(d, f, blocks));
}

// The layer's MLP as one mlp_kernel launch: blocks (<= F / 8) of kMlpThreads threads, adding down's column sums to
// the fixed-point accumulator in down_parts.
cudaError_t launch_mlp(cudaStream_t stream, const cudaperf_layer::LayerParams& p, int blocks, int pdl, int fold_flags) {
  using cudaperf_matvec::kMlpThreads;
  Prologue pro = cudaperf_layer::resnorm_prologue(p, true, nullptr);
  pro.zero = nullptr;   // the kernel adds to those sums itself (o cleared them)
  pro.n_zero = 0;
  const size_t smem = mlp_smem_bytes(p.d, p.f, blocks, fold_flags);
  auto kernel = (fold_flags & kFoldMlpWide) != 0 ? cudaperf_matvec::mlp_kernel<kMlpThreads, 1, true, 4, 4, true>
                : (fold_flags & kFoldMlp768) != 0 ? cudaperf_matvec::mlp_kernel_capped<768, 64, 6, 4>
                : (fold_flags & kFoldMlpGM) != 0 ? cudaperf_matvec::mlp_kernel<kMlpThreads, 1, true, 6>
                                                 : cudaperf_matvec::mlp_kernel_lean<kMlpThreads, 1>;
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (e != cudaSuccess) return e;
  Launch l(dim3(static_cast<unsigned>(blocks), 1, 1), dim3(static_cast<unsigned>(mlp_threads(fold_flags)), 1, 1), smem,
           stream, pdl != 0);
  return cudaLaunchKernelEx(&l.cfg, kernel, pro, p.w_gu, p.b_gu, p.w_down, p.d, p.f,
                            cudaperf_layer::fold_sums(p.down_parts), pdl);
}

// pdl_flags: the kernels' PDL flags (kPdlOn | kPdlLate, or 0).
ffi::Error layer_kernels(cudaStream_t stream, const cudaperf_layer::LayerParams& p, ffi::Span<const int64_t> ints,
                         int pdl_flags, int fold_flags = 0, const __nv_bfloat16* prev_b_down = nullptr,
                         bool first_of_call = true) {
  using namespace cudaperf_layer;
  const int pdl = pdl_flags & (cudaperf_matvec::kPdlOn | cudaperf_matvec::kPdlLate);   // all kernels but attend
  const int qkv_pdl = pdl;
  using cudaperf_matvec::kResNorm;
  const bool fold = (fold_flags & kFoldOn) != 0, rebuild = fold && !first_of_call;
  if (fold && (p.split[1] < 2 || p.split[3] < 2))
    return ffi::Error::InvalidArgument("cudaperf_layer: folding the finish kernels needs o and down split-K >= 2");
  const bool mlp = fold && (fold_flags & kFoldMlp) != 0;
  int mlp_blocks = 0;
  if (mlp) {
    cudaError_t e = sm_count(&mlp_blocks);
    if (e != cudaSuccess) return ffi::Error::Internal(std::string("cudaperf_layer: ") + cudaGetErrorString(e));
    if (mlp_blocks > p.f / 8) mlp_blocks = p.f / 8;
    const int nf_max = cudaperf_matvec::mlp_max_features(p.f, mlp_blocks);
    if ((fold_flags & kFoldMlp768) != 0 && (p.d / 8 > 768 || nf_max > 768 || nf_max / 8 > 768 / 32))
      fold_flags &= ~kFoldMlp768;      // too wide for the capped block: the 1024-thread group-major kernel
    if ((fold_flags & kFoldMlpGM) != 0 && nf_max / 8 > mlp_threads(fold_flags) / 32)
      fold_flags |= kFoldMlpWide;      // more groups a block than warps
    const int nt = mlp_threads(fold_flags);
    if (p.d % 8 || p.f % 8 || p.d / 8 > nt || nf_max > nt
        || mlp_smem_bytes(p.d, p.f, mlp_blocks, fold_flags) > 227 * 1024)
      return ffi::Error::InvalidArgument(
          "cudaperf_layer: the one-kernel MLP needs D a multiple of 8 up to 8192 and F a multiple of 8 up to 1024 x the "
          "SM count");
  }
  constexpr int kChunk = cudaperf_matvec::kFinishChunk;
  if (p.chunk != kChunk || p.d % kChunk)
    return ffi::Error::InvalidArgument("cudaperf_layer: the kernels launch needs chunk == 128 dividing D");
  const int g = p.h / p.hkv, n_qkv = (p.h + 2 * p.hkv) * p.dh;
  for (int i = 0; i < 4; ++i)
    if (ints[19 + i] != 4 && ints[19 + i] != 8)
      return ffi::Error::InvalidArgument("cudaperf_layer: unroll must be 4 or 8");
  const size_t att_smem = attend_smem_bytes(g, p.dh, p.span_max);
  if (att_smem > 200 * 1024) return ffi::Error::InvalidArgument("cudaperf_layer: the attention split is too long");
  const AttendKernel attend = attend_kernel_for(p.dh, g / p.attn_hsplit);
  if (attend == nullptr) return ffi::Error::InvalidArgument("cudaperf_layer: head dim must be 32, 64, 128 or 256");
  Prologue qkv_pro = rebuild ? resnorm_prologue(p, false, prev_b_down) : norm_prologue(p, false), o_pro = attn_prologue(p);
  if (fold && !rebuild) {   // the first layer's qkv still clears o's sums
    qkv_pro.zero = fold_sums(p.o_parts);
    qkv_pro.n_zero = p.d;
  }
  // kPfQkvFixed: qkv's sums as fixed point after the call's first layer (its accumulators cleared by the o kernel
  // before: the first layer's qkv writes partials, as the scratch holds no zeros at the call's start)
  const bool qkv_fixed = fold && (p.pf_flags & kPfQkvFixed) != 0 && p.split[0] >= 2;
  Epilogue qkv_epi = {}, o_epi = {}, down_epi = {};
  LayerParams pa = p;   // the attention's parameters
  pa.qkv_fixed = qkv_fixed && !first_of_call;
  if (pa.qkv_fixed) {
    qkv_epi.mode = cudaperf_matvec::kEpiFixed;
    qkv_epi.fixed = fold_sums(p.qkv_parts);
  }
  if (qkv_fixed) {   // o clears them for the next layer's qkv (the attention has read them by then)
    o_pro.zero2 = fold_sums(p.qkv_parts);
    o_pro.n_zero2 = n_qkv;
  }
  if (fold) {
    o_epi.mode = down_epi.mode = cudaperf_matvec::kEpiFixed;
    o_epi.fixed = fold_sums(p.o_parts);
    down_epi.fixed = fold_sums(p.down_parts);
  }
  if (mlp) {   // the one-kernel MLP adds to down's sums from its start: o clears them (qkv has read them by then)
    o_pro.zero = fold_sums(p.down_parts);
    o_pro.n_zero = p.d;
  }
  cudaError_t e = rebuild ? launch_cols<kResNorm>(p.cols[0], static_cast<int>(ints[19]), stream, qkv_pro, p.w_qkv, p.d,
                                                  n_qkv, p.split[0], p.qkv_parts, qkv_pdl, qkv_epi)
                          : launch_cols<kNorm>(p.cols[0], static_cast<int>(ints[19]), stream, qkv_pro, p.w_qkv, p.d,
                                               n_qkv, p.split[0], p.qkv_parts, qkv_pdl, qkv_epi);
  if (e == cudaSuccess && att_smem > 48 * 1024)
    e = cudaFuncSetAttribute(attend, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(att_smem));
  if (e == cudaSuccess) {
    Launch l(dim3(static_cast<unsigned>(p.hkv * p.attn_splits * p.attn_hsplit), 1, 1), dim3(kThreads, 1, 1), att_smem,
             stream, pdl != 0);
    e = cudaLaunchKernelEx(&l.cfg, attend, pa, pdl);
  }
  if (e == cudaSuccess)
    e = launch_cols<kAttn>(p.cols[1], static_cast<int>(ints[20]), stream, o_pro, p.w_o, p.h * p.dh, p.d, p.split[1],
                           p.o_parts, pdl, o_epi);
  auto fin = [&](const __nv_bfloat16* x, const float* parts, int n_parts, const __nv_bfloat16* bias, __nv_bfloat16* xo,
                 float* ss) {   // with fold, parts are the fixed-point sums
    Launch l(dim3(static_cast<unsigned>(p.d / kChunk), 1, 1), dim3(kChunk, 1, 1), 0, stream, pdl != 0);
    auto kernel = fold ? cudaperf_matvec::finish_kernel<false, true> : cudaperf_matvec::finish_kernel<false>;
    return cudaLaunchKernelEx(&l.cfg, kernel, x, parts, n_parts, p.d, bias, xo, ss, pdl);
  };
  if (e == cudaSuccess && !fold) e = fin(p.x, p.o_parts, p.split[1], p.b_o, p.x_mid, p.ss_mid);
  if (e == cudaSuccess && mlp) e = launch_mlp(stream, p, mlp_blocks, pdl, fold_flags);
  if (e == cudaSuccess && !mlp)
    e = fold ? launch_cols<kResNorm>(p.cols[2], static_cast<int>(ints[21]), stream, resnorm_prologue(p, true, nullptr),
                                     p.w_gu, p.d, 2 * p.f, p.split[2], p.gu_parts, pdl)
             : launch_cols<kNorm>(p.cols[2], static_cast<int>(ints[21]), stream, norm_prologue(p, true), p.w_gu, p.d,
                                  2 * p.f, p.split[2], p.gu_parts, pdl);
  if (e == cudaSuccess && !mlp)
    e = launch_cols<kSwiglu>(p.cols[3], static_cast<int>(ints[22]), stream, swiglu_prologue(p), p.w_down, p.f, p.d,
                             p.split[3], p.down_parts, pdl, down_epi);
  if (e == cudaSuccess && (!fold || (fold_flags & kFoldLast) != 0))
    e = fin(p.x_mid, p.down_parts, p.split[3], p.b_down, p.x_out, p.ss_out);
  if (e != cudaSuccess) return ffi::Error::Internal(std::string("cudaperf_layer: ") + cudaGetErrorString(e));
  return ffi::Error::Success();
}

// A layer of the step launch (layer_kernels). ints: heads, attn_splits, split x4 (qkv, o, gate_up, down), cols x4,
// chunk, has_b_qkv, has_qk_norm, has_b_o, has_b_gu, has_b_down, pdl, launch (2: the standalone kernels),
// blocks_per_sm, unroll x4, attention head groups (attend_kernel blocks per KV head and split), then four prefetch
// words of which cuda_step.py sets only the flags word's kPfQkvFixed. floats: eps_attn, eps_mlp, eps_qk, scale.
// The layer scratch results the step handler returns (after x_out and ss_out): as parameters, and as FFI binding
// steps.
#define LAYER_SCRATCH_PARAMS                                                                                   \
  ffi::Result<ffi::Buffer<ffi::F32>> qkv_parts, ffi::Result<ffi::Buffer<ffi::F32>> acc,                        \
      ffi::Result<ffi::Buffer<ffi::F32>> ml, ffi::Result<ffi::Buffer<ffi::F32>> o_parts,                       \
      ffi::Result<ffi::Buffer<ffi::BF16>> x_mid, ffi::Result<ffi::Buffer<ffi::F32>> ss_mid,                    \
      ffi::Result<ffi::Buffer<ffi::F32>> gu_parts, ffi::Result<ffi::Buffer<ffi::F32>> down_parts
#define LAYER_SCRATCH_RETS(BINDING)                                                                            \
  BINDING.Ret<ffi::Buffer<ffi::F32>>()       /* qkv_parts */                                                   \
      .Ret<ffi::Buffer<ffi::F32>>()          /* acc */                                                         \
      .Ret<ffi::Buffer<ffi::F32>>()          /* ml */                                                          \
      .Ret<ffi::Buffer<ffi::F32>>()          /* o_parts */                                                     \
      .Ret<ffi::Buffer<ffi::BF16>>()         /* x_mid */                                                       \
      .Ret<ffi::Buffer<ffi::F32>>()          /* ss_mid */                                                      \
      .Ret<ffi::Buffer<ffi::F32>>()          /* gu_parts */                                                    \
      .Ret<ffi::Buffer<ffi::F32>>()          /* down_parts */

// The layer handler's int attributes (listed above LAYER_PARAMS); the step handler's are these, the layer count and fold.
constexpr size_t kLayerInts = 28;

// The layer handler's buffers and attributes (CudaperfLayer's binding order), and their names as arguments.
#define LAYER_PARAMS                                                                                           \
  ffi::Buffer<ffi::BF16> x, ffi::Buffer<ffi::F32> ss, ffi::Buffer<ffi::BF16> attn_scale,                       \
      ffi::Buffer<ffi::BF16> mlp_scale, ffi::Buffer<ffi::BF16> w_qkv, ffi::Buffer<ffi::BF16> b_qkv,            \
      ffi::Buffer<ffi::BF16> q_norm, ffi::Buffer<ffi::BF16> k_norm, ffi::Buffer<ffi::F32> cos,                 \
      ffi::Buffer<ffi::F32> sin, ffi::Buffer<ffi::S32> kv_mask, ffi::Buffer<ffi::S32> cache_index,             \
      ffi::Buffer<ffi::BF16> k_cache, ffi::Buffer<ffi::BF16> v_cache, ffi::Buffer<ffi::BF16> w_o,              \
      ffi::Buffer<ffi::BF16> b_o, ffi::Buffer<ffi::BF16> w_gu, ffi::Buffer<ffi::BF16> b_gu,                    \
      ffi::Buffer<ffi::BF16> w_down, ffi::Buffer<ffi::BF16> b_down, ffi::Result<ffi::Buffer<ffi::BF16>> x_out, \
      ffi::Result<ffi::Buffer<ffi::F32>> ss_out, ffi::Result<ffi::Buffer<ffi::BF16>> k_out,                    \
      ffi::Result<ffi::Buffer<ffi::BF16>> v_out, LAYER_SCRATCH_PARAMS, ffi::Span<const int64_t> ints,            \
      ffi::Span<const float> floats
#define LAYER_ARGS                                                                                               \
  x, ss, attn_scale, mlp_scale, w_qkv, b_qkv, q_norm, k_norm, cos, sin, kv_mask, cache_index, k_cache, v_cache, w_o, \
      b_o, w_gu, b_gu, w_down, b_down, x_out, ss_out, k_out, v_out, qkv_parts, acc, ml, o_parts, x_mid, ss_mid,    \
      gu_parts, down_parts, ints, floats

ffi::Error layer_params(cudaperf_layer::LayerParams& p, LAYER_PARAMS) {
  using namespace cudaperf_layer;
  auto bad = [](const char* what) { return ffi::Error::InvalidArgument(std::string("cudaperf_layer: ") + what); };
  if (ints.size() != kLayerInts || floats.size() != 4) return bad("needs 28 int and 4 float attributes");
  auto kd = k_cache.dimensions(), qd = w_qkv.dimensions(), od = w_o.dimensions(), gd = w_gu.dimensions(),
       dd = w_down.dimensions();
  if (kd.size() != 4 || kd[0] != 1 || qd.size() != 2 || od.size() != 2 || (gd.size() != 2 && gd.size() != 3)
      || dd.size() != 2)
    return bad("caches must be [1, Hkv, S, Dh] and weights 2-D (gate_up 3-D group-major in the step launch)");
  p = {};
  p.d = static_cast<int>(x.element_count());
  p.h = static_cast<int>(ints[0]);
  p.hkv = static_cast<int>(kd[1]);
  p.s_len = static_cast<int>(kd[2]);
  p.dh = static_cast<int>(kd[3]);
  p.f = static_cast<int>(dd[0]);
  p.attn_splits = static_cast<int>(ints[1]);
  for (int i = 0; i < 4; ++i) {
    p.split[i] = static_cast<int>(ints[2 + i]);
    p.cols[i] = static_cast<int>(ints[6 + i]);
  }
  p.chunk = static_cast<int>(ints[10]);
  const int g = p.hkv > 0 ? p.h / p.hkv : 0, n_qkv = (p.h + 2 * p.hkv) * p.dh;
  if (p.hkv < 1 || p.h % p.hkv || g > kMaxGroup || p.dh < 32 || p.dh > kMaxHeadDim || (p.dh & (p.dh - 1)))
    return bad("needs heads a multiple of the KV heads (<= 16 per KV head) and a power-of-two head dim in [32, 256]");
  const bool gu_ok = gd.size() == 2 ? gd[0] == p.d && gd[1] == 2 * p.f
                                    : 8 * gd[0] == p.f && gd[1] == p.d && gd[2] == 16;   // group-major
  if (qd[0] != p.d || qd[1] != n_qkv || od[0] != p.h * p.dh || od[1] != p.d || !gu_ok || dd[1] != p.d)
    return bad("weights must be qkv [D, (H + 2 Hkv) Dh], o [H Dh, D], gate_up [D, 2F] (or [F / 8, D, 16]), "
               "down [F, D]");
  const int ks[4] = {p.d, p.h * p.dh, p.d, p.f}, ns[4] = {n_qkv, p.d, 2 * p.f, p.d};
  for (int i = 0; i < 4; ++i)
    if (p.split[i] < 1 || ks[i] % p.split[i] || (p.cols[i] != 64 && p.cols[i] != 128 && (p.cols[i] != 256 || ints[17] != 2))
        || ns[i] % p.cols[i] || (ks[i] / p.split[i]) * 4 > 200 * 1024)
      return bad("each split must divide its K (slices <= 51200 rows) and each cols (64 or 128; 256 in the kernels launch) its N");
  if (p.chunk < 1 || p.chunk > kThreads || p.d % p.chunk || p.attn_splits < 1)
    return bad("chunk must divide D and be <= 256, attn_splits >= 1");
  p.attn_hsplit = static_cast<int>(ints[23]);
  p.pf_flags = static_cast<int>(ints[25]);   // ints 24, 26, 27: unused (the L2 prefetch settings once)
  if (p.attn_hsplit < 1 || g % p.attn_hsplit) return bad("the attention's head groups must divide the heads per KV head");
  p.span_max = (p.s_len + p.attn_splits - 1) / p.attn_splits;
  p.eps_attn = floats[0];
  p.eps_mlp = floats[1];
  p.eps_qk = floats[2];
  p.scale = floats[3];
  auto bf = [](ffi::Buffer<ffi::BF16>& b) { return reinterpret_cast<const __nv_bfloat16*>(b.typed_data()); };
  auto bfo = [](ffi::Result<ffi::Buffer<ffi::BF16>>& b) { return reinterpret_cast<__nv_bfloat16*>(b->typed_data()); };
  p.x = bf(x);
  p.ss = ss.typed_data();
  p.attn_scale = bf(attn_scale);
  p.mlp_scale = bf(mlp_scale);
  p.w_qkv = bf(w_qkv);
  p.b_qkv = ints[11] ? bf(b_qkv) : nullptr;
  p.q_norm = ints[12] ? bf(q_norm) : nullptr;
  p.k_norm = ints[12] ? bf(k_norm) : nullptr;
  p.cos = cos.typed_data();
  p.sin = sin.typed_data();
  p.kv_mask = kv_mask.typed_data();
  p.cache_index = cache_index.typed_data();
  p.k_cache = bfo(k_out);
  p.v_cache = bfo(v_out);
  p.w_o = bf(w_o);
  p.b_o = ints[13] ? bf(b_o) : nullptr;
  p.w_gu = bf(w_gu);
  p.b_gu = ints[14] ? bf(b_gu) : nullptr;
  p.w_down = bf(w_down);
  p.b_down = ints[15] ? bf(b_down) : nullptr;
  p.qkv_parts = qkv_parts->typed_data();
  p.acc = acc->typed_data();
  p.ml = ml->typed_data();
  p.o_parts = o_parts->typed_data();
  p.x_mid = bfo(x_mid);
  p.ss_mid = ss_mid->typed_data();
  p.gu_parts = gu_parts->typed_data();
  p.down_parts = down_parts->typed_data();
  p.x_out = bfo(x_out);
  p.ss_out = ss_out->typed_data();
  if (k_out->typed_data() != k_cache.typed_data() || v_out->typed_data() != v_cache.typed_data())
    return bad("the caches must be aliased to their outputs (input_output_aliases)");
  if (qkv_parts->element_count() < static_cast<size_t>(p.split[0]) * n_qkv
      || acc->element_count() < static_cast<size_t>(p.hkv) * p.attn_splits * g * p.dh
      || ml->element_count() < static_cast<size_t>(p.hkv) * p.attn_splits * 2 * g
      || o_parts->element_count() < static_cast<size_t>(p.split[1]) * p.d
      || gu_parts->element_count() < static_cast<size_t>(p.split[2]) * 2 * p.f
      || down_parts->element_count() < static_cast<size_t>(p.split[3]) * p.d
      || x_out->element_count() != static_cast<size_t>(p.d) || x_mid->element_count() != static_cast<size_t>(p.d)
      || ss_out->element_count() != static_cast<size_t>(p.d / p.chunk)
      || ss_mid->element_count() != static_cast<size_t>(p.d / p.chunk) || ss.element_count() < static_cast<size_t>(p.d / p.chunk))
    return bad("a scratch or output buffer is too small");
  return ffi::Error::Success();
}

// Every decoder layer of the step from ONE FFI call: each layer as layer_kernels launches it (seven kernels), so PDL
// chains the whole step, layer boundaries included. Args: x, ss, cos, sin, kv_mask, cache_index, then per layer 14
// bf16 buffers (attn_scale, mlp_scale, w_qkv, b_qkv, q_norm, k_norm, k_cache, v_cache, w_o, b_o, w_gu, b_gu, w_down,
// b_down). Results: x_out, ss_out and the layer handler's scratch (shared by the layers: each kernel writes them only
// after PDL's wait, when every kernel before it has finished), then per layer the k and v caches (aliased). ints: the
// layer handler's 28, then the layer count, then fold (0, or 1: the finish kernels folded into their consumers), then
// mlp (with fold only: 3 each layer's gate_up and down as one mlp_kernel_lean on a row-major w_gu, 6 as
// mlp_kernel_capped of 768 threads on a group-major w_gu - cuda_step.py; 0: two kernels).
ffi::Error StepImpl(cudaStream_t stream, ffi::Buffer<ffi::BF16> x, ffi::Buffer<ffi::F32> ss, ffi::Buffer<ffi::F32> cos,
                    ffi::Buffer<ffi::F32> sin, ffi::Buffer<ffi::S32> kv_mask, ffi::Buffer<ffi::S32> cache_index,
                    ffi::RemainingArgs layers, ffi::Result<ffi::Buffer<ffi::BF16>> x_out,
                    ffi::Result<ffi::Buffer<ffi::F32>> ss_out, LAYER_SCRATCH_PARAMS, ffi::RemainingRets caches,
                    ffi::Span<const int64_t> ints, ffi::Span<const float> floats) {
  constexpr int kPerLayer = 14;
  if (ints.size() != kLayerInts + 3 || ints[kLayerInts] < 1)
    return ffi::Error::InvalidArgument("cudaperf_step: needs 31 int attributes");
  const int64_t n_layers = ints[kLayerInts];
  const bool fold = ints[kLayerInts + 1] != 0, mlp = fold && ints[kLayerInts + 2] != 0;
  // the fold flags of the mlp codes (cuda_step.py): 0 two kernels, 3 row-major lean, 6 group-major capped
  const int64_t mlp_code = ints[kLayerInts + 2];
  if (mlp_code != 0 && mlp_code != 3 && mlp_code != 6)
    return ffi::Error::InvalidArgument("cudaperf_step: the mlp code must be 0, 3 or 6");
  const int mlp_flags = !mlp ? 0 : mlp_code == 3 ? kFoldMlp | kFoldMlpLean : kFoldMlp | kFoldMlpGM | kFoldMlp768;
  const __nv_bfloat16* prev_b_down = nullptr;
  if (layers.size() != static_cast<size_t>(n_layers * kPerLayer) || caches.size() != static_cast<size_t>(2 * n_layers))
    return ffi::Error::InvalidArgument("cudaperf_step: needs 14 buffers and 2 cache results per layer");
  const ffi::Span<const int64_t> layer_ints(ints.begin(), kLayerInts);
  for (int64_t l = 0; l < n_layers; ++l) {
    std::optional<ffi::Buffer<ffi::BF16>> b[kPerLayer];   // (buffers have no default constructor)
    for (int i = 0; i < kPerLayer; ++i) {
      auto got = layers.get<ffi::Buffer<ffi::BF16>>(static_cast<size_t>(l * kPerLayer + i));
      if (got.has_error()) return ffi::Error::InvalidArgument("cudaperf_step: every layer buffer must be bf16");
      b[i].emplace(got.value());
    }
    auto k_out = caches.get<ffi::Buffer<ffi::BF16>>(static_cast<size_t>(2 * l));
    auto v_out = caches.get<ffi::Buffer<ffi::BF16>>(static_cast<size_t>(2 * l + 1));
    if (k_out.has_error() || v_out.has_error()) return ffi::Error::InvalidArgument("cudaperf_step: caches must be bf16");
    cudaperf_layer::LayerParams p;
    ffi::Error err = layer_params(p, x, ss, *b[0], *b[1], *b[2], *b[3], *b[4], *b[5], cos, sin, kv_mask, cache_index,
                                  *b[6], *b[7], *b[8], *b[9], *b[10], *b[11], *b[12], *b[13], x_out, ss_out,
                                  k_out.value(), v_out.value(), qkv_parts, acc, ml, o_parts, x_mid, ss_mid, gu_parts,
                                  down_parts, layer_ints, floats);
    if (err.failure()) return err;
    if ((b[10]->dimensions().size() == 3) != ((mlp_flags & kFoldMlpGM) != 0))
      return ffi::Error::InvalidArgument(
          "cudaperf_step: gate_up is group-major [F / 8, D, 16] exactly with the group-major mlp codes (4-8)");
    if (l > 0) {   // the residual stream and its sums of squares from the layer before
      p.x = reinterpret_cast<const __nv_bfloat16*>(x_out->typed_data());
      p.ss = ss_out->typed_data();
    }
    const int fold_flags = fold ? kFoldOn | (l == n_layers - 1 ? kFoldLast : 0) | mlp_flags : 0;
    err = layer_kernels(stream, p, layer_ints, static_cast<int>(ints[16]), fold_flags, prev_b_down, l == 0);
    if (err.failure()) return err;
    prev_b_down = p.b_down;
  }
  return ffi::Error::Success();
}
}  // namespace

// Arguments: the prologue's, then w (bf16); result y (float32 partials); attributes split_k, pdl, unroll, cols, then
// the prologue's.
#define MATVEC_COMMON(BINDING)                                                                                 \
  BINDING.Arg<ffi::Buffer<ffi::BF16>>()   /* w */                                                              \
      .Ret<ffi::Buffer<ffi::F32>>()       /* y */                                                              \
      .Attr<int64_t>("split_k")                                                                                \
      .Attr<int64_t>("pdl")                                                                                    \
      .Attr<int64_t>("unroll")                                                                                 \
      .Attr<int64_t>("cols")

XLA_FFI_DEFINE_HANDLER_SYMBOL(CudaperfMatvecAttn, AttnImpl,
                              MATVEC_COMMON(ffi::Ffi::Bind()
                                                .Ctx<ffi::PlatformStream<cudaStream_t>>()
                                                .Arg<ffi::Buffer<ffi::F32>>()
                                                .Arg<ffi::Buffer<ffi::F32>>())
                                  .Attr<int64_t>("group"),
                              MATVEC_TRAITS);

XLA_FFI_DEFINE_HANDLER_SYMBOL(CudaperfMatvec, PartsImpl,
                              MATVEC_COMMON(ffi::Ffi::Bind()
                                                .Ctx<ffi::PlatformStream<cudaStream_t>>()
                                                .Arg<ffi::Buffer<ffi::F32>>()),
                              MATVEC_TRAITS);

XLA_FFI_DEFINE_HANDLER_SYMBOL(CudaperfMatvecNorm, NormImpl,
                              MATVEC_COMMON(ffi::Ffi::Bind()
                                                .Ctx<ffi::PlatformStream<cudaStream_t>>()
                                                .Arg<ffi::Buffer<ffi::BF16>>()
                                                .Arg<ffi::Buffer<ffi::F32>>()
                                                .Arg<ffi::Buffer<ffi::BF16>>())
                                  .Attr<int64_t>("n_chunks")
                                  .Attr<float>("eps"),
                              MATVEC_TRAITS);

XLA_FFI_DEFINE_HANDLER_SYMBOL(CudaperfMatvecSwiglu, SwigluImpl,
                              MATVEC_COMMON(ffi::Ffi::Bind()
                                                .Ctx<ffi::PlatformStream<cudaStream_t>>()
                                                .Arg<ffi::Buffer<ffi::F32>>()
                                                .Arg<ffi::Buffer<ffi::BF16>>())
                                  .Attr<int64_t>("has_bias"),
                              MATVEC_TRAITS);

XLA_FFI_DEFINE_HANDLER_SYMBOL(CudaperfTopk, TopkImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<cudaStream_t>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()     // x
                                  .Ret<ffi::Buffer<ffi::F32>>()     // vals
                                  .Ret<ffi::Buffer<ffi::S32>>()     // idx
                                  .Ret<ffi::Buffer<ffi::U32>>()     // maxima
                                  .Ret<ffi::Buffer<ffi::F32>>()     // ms
                                  .Ret<ffi::Buffer<ffi::F32>>()     // lse
                                  .Attr<int64_t>("k")
                                  .Attr<int64_t>("with_lse"),
                              MATVEC_TRAITS);

XLA_FFI_DEFINE_HANDLER_SYMBOL(CudaperfStep, StepImpl,
                              LAYER_SCRATCH_RETS(ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<cudaStream_t>>()
                                  .Arg<ffi::Buffer<ffi::BF16>>()    // x
                                  .Arg<ffi::Buffer<ffi::F32>>()     // ss
                                  .Arg<ffi::Buffer<ffi::F32>>()     // cos
                                  .Arg<ffi::Buffer<ffi::F32>>()     // sin
                                  .Arg<ffi::Buffer<ffi::S32>>()     // kv_mask
                                  .Arg<ffi::Buffer<ffi::S32>>()     // cache_index
                                  .RemainingArgs()                  // 14 per layer
                                  .Ret<ffi::Buffer<ffi::BF16>>()    // x_out
                                  .Ret<ffi::Buffer<ffi::F32>>())    // ss_out
                                  .RemainingRets()                  // k, v cache per layer (aliased)
                                  .Attr<ffi::Span<const int64_t>>("ints")
                                  .Attr<ffi::Span<const float>>("floats"),
                              MATVEC_TRAITS);
