// Does programmatic dependent launch (PDL) pay between the decode step's kernels when they are launched by ONE
// host call (as one XLA FFI handler captured into a CUDA graph would launch them)? A standalone timing of the
// batch-1 decode chain of the Qwen2.5-1.5B shape with the kernels of cudaperf_jax/models/cuda/matvec_kernel.cuh:
// per layer qkv (norm prologue), an attention stand-in (a finish kernel over the qkv partials), o, finish, gate_up
// (norm prologue), down (swiglu prologue), finish; then the LM head. Weights of all layers are distinct buffers
// (2.6 GB, far beyond L2). Variants: PDL on/off x stream launches / captured graph, and the unroll of gate_up/o;
// mlp2k_* / mlp1k_*: only the MLPs of the 28 layers, as gate_up + down or as one mlp_kernel (CUDAPERF_CUDA_MLP),
// mlp1k_noadd without its fixed-point adds (wrong sums: prices the 203K atomics a layer), mlp1k_rot with the adds
// starting at a column that depends on the block (CUDAPERF_CUDA_MLP=rotate), mlp1k_lean as mlp_kernel_lean (=lean; in
// this MLP-only chain it shows only what the 48-register cap costs: the next kernel is another mlp_kernel),
// mlp1k_gm / mlp1k_gm_lean with gate_up group-major (CUDAPERF_CUDA_MLP=gm / gm_lean: every block reads one contiguous
// region; the chain's random weights are laid out alike either way); _u6 / _u6d6: six of phase 2's (and phase 3's)
// 16-byte loads in flight a thread instead of four; mlp1k_gm768: group-major, blocks of 768 threads held to 64
// registers (CUDAPERF_CUDA_MLP=gm768). Until 2026-12-04 also gm640 / gm512 (640 x 72 / 512 x 96 registers: 708 / 790
// us against gm768's 686) and mlp_kernel_tma (the weights through a ring of six 16 KiB shared-memory slots filled by
// cp.async.bulk, 768 x 64 registers: 865-904 us; 1024 x 48 with 8 slots 973-977; 4 x 32 KiB slots 1673; 16 KiB slots
// filled by copies of 4 / 1 KiB 1038 / 1703) - commit 2303663 has them.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -o /tmp/pdl_chain benchmarks/pdl_chain.cu && /tmp/pdl_chain [json_out|-] [name_part] [reps]
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "../cudaperf_jax/models/cuda/layer_kernel.cuh"
#include "../cudaperf_jax/models/cuda/launch.cuh"

using namespace cudaperf_matvec;

#define CK(x)                                                                                   \
  do {                                                                                          \
    cudaError_t e_ = (x);                                                                       \
    if (e_ != cudaSuccess) {                                                                    \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));   \
      std::exit(1);                                                                             \
    }                                                                                           \
  } while (0)

__global__ void fill(__nv_bfloat16* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 13;
    p[i] = __float2bfloat16(((h & 1023) / 1023.f - 0.5f) * 0.05f);
  }
}

struct Cfg {
  bool pdl;
  int u_small, u_gu, u_down;
  bool l2 = true;   // activations read with __ldcg; false: plain loads (after PDL's wait and its acquire fence)
  bool late = false;   // kPdlLate: a kernel lets the next one launch only once its own wait has returned
  int flags() const { return pdl ? kPdlOn | (late ? kPdlLate : 0) : 0; }
};

// Child-graph mode (how XLA's command buffers hold FFI custom calls: each call's launches captured into a nested
// graph): every launch is captured alone and appended to g_parent as a child-graph node after the previous one.
cudaGraph_t g_parent = nullptr;
cudaGraphNode_t g_last = nullptr;
bool g_child = false, g_child_layer = false;   // a child graph per launch / per layer
cudaStream_t g_stream;
void begin_capture() { CK(cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeGlobal)); }
void end_capture() {
  cudaGraph_t g;
  CK(cudaStreamEndCapture(g_stream, &g));
  cudaGraphNode_t node;
  CK(cudaGraphAddChildGraphNode(&node, g_parent, g_last ? &g_last : nullptr, g_last ? 1 : 0, g));
  CK(cudaGraphDestroy(g));
  g_last = node;
}
void begin_launch() {
  if (g_child) begin_capture();
}
void end_launch() {
  if (g_child) end_capture();
}

template <int TPR, int MODE>
void mv(cudaStream_t s, const Cfg& c, int u, const Prologue& pro, const __nv_bfloat16* w, int k, int n, int split,
        float* y, int ys) {
  const int ks = k / split;
  Epilogue epi = {};
  Launch lc(dim3(n / (8 * TPR), split, 1), dim3(kThreads, 1, 1), ks * 4, s, c.pdl);
  cudaLaunchConfig_t& cfg = lc.cfg;
  begin_launch();
  if (u == 8 && c.l2)
    CK(cudaLaunchKernelEx(&cfg, matvec_kernel<TPR, 8, MODE, true>, pro, epi, w, n, ks, y, ys, c.flags()));
  else if (u == 8)
    CK(cudaLaunchKernelEx(&cfg, matvec_kernel<TPR, 8, MODE, false>, pro, epi, w, n, ks, y, ys, c.flags()));
  else if (c.l2)
    CK(cudaLaunchKernelEx(&cfg, matvec_kernel<TPR, 4, MODE, true>, pro, epi, w, n, ks, y, ys, c.flags()));
  else
    CK(cudaLaunchKernelEx(&cfg, matvec_kernel<TPR, 4, MODE, false>, pro, epi, w, n, ks, y, ys, c.flags()));
  end_launch();
}

void fin(cudaStream_t s, const Cfg& c, const __nv_bfloat16* x, const float* parts, int np, int stride, int n,
         __nv_bfloat16* xo, float* ss) {
  Launch lc(dim3(n / kFinishChunk, 1, 1), dim3(kFinishChunk, 1, 1), 0, s, c.pdl);
  cudaLaunchConfig_t& cfg = lc.cfg;
  begin_launch();
  CK(cudaLaunchKernelEx(&cfg, c.l2 ? finish_kernel<true> : finish_kernel<false>, x, parts, np, stride,
                        (const __nv_bfloat16*)nullptr, xo, ss, c.flags()));
  end_launch();
}

int main(int argc, char** argv) {
  const int L = 28, D = 1536, NQKV = 2048, F = 8960, V = 151936;
  const int S_QKV = 12, S_O = 16, S_GU = 3, S_DN = 40;
  std::vector<__nv_bfloat16*> wq(L), wo(L), wgu(L), wdn(L);
  size_t bytes = 0;
  auto alloc_w = [&](size_t n, unsigned seed) {
    __nv_bfloat16* p;
    CK(cudaMalloc(&p, n * 2));
    fill<<<1024, 256>>>(p, n, seed);
    bytes += n * 2;
    return p;
  };
  for (int l = 0; l < L; ++l) {
    wq[l] = alloc_w(size_t(D) * NQKV, 4 * l);
    wo[l] = alloc_w(size_t(D) * D, 4 * l + 1);
    wgu[l] = alloc_w(size_t(D) * 2 * F, 4 * l + 2);
    wdn[l] = alloc_w(size_t(F) * D, 4 * l + 3);
  }
  __nv_bfloat16* whead = alloc_w(size_t(D) * V, 999);
  __nv_bfloat16 *x, *xmid, *xa, *scale;
  float *ss, *ssmid, *ssa, *qkvp, *op, *gup, *dnp, *logits;
  CK(cudaMalloc(&x, D * 2));
  CK(cudaMalloc(&xmid, D * 2));
  CK(cudaMalloc(&xa, D * 2));
  scale = alloc_w(D, 7);
  fill<<<8, 256>>>(x, D, 3);
  CK(cudaMalloc(&ss, 64 * 4));
  CK(cudaMalloc(&ssmid, 64 * 4));
  CK(cudaMalloc(&ssa, 64 * 4));
  CK(cudaMemset(ss, 0, 64 * 4));
  CK(cudaMalloc(&qkvp, size_t(S_QKV) * NQKV * 4));
  CK(cudaMalloc(&op, size_t(S_O) * D * 4));
  CK(cudaMalloc(&gup, size_t(S_GU) * 2 * F * 4));
  CK(cudaMalloc(&dnp, size_t(S_DN) * D * 4));
  CK(cudaMalloc(&logits, size_t(V) * 4));
  CK(cudaMemset(qkvp, 0, size_t(S_QKV) * NQKV * 4));
  CK(cudaDeviceSynchronize());

  // the real attention (cudaperf_layer::attend_kernel) over a 256-slot cache at slot 192, 4 splits per KV head
  const int H = 12, HKV = 2, DH = 128, SL = 256, SPL = 4, G = H / HKV;
  std::vector<cudaperf_layer::LayerParams> lp(L);
  float *cosb, *sinb, *acc, *ml;
  int *mask, *cidx;
  CK(cudaMalloc(&cosb, DH * 4));
  CK(cudaMalloc(&sinb, DH * 4));
  CK(cudaMemset(cosb, 0, DH * 4));
  CK(cudaMemset(sinb, 0, DH * 4));
  CK(cudaMalloc(&acc, HKV * SPL * G * DH * 4));
  CK(cudaMalloc(&ml, HKV * SPL * 2 * G * 4));
  CK(cudaMalloc(&mask, SL * 4));
  CK(cudaMalloc(&cidx, 4));
  {
    std::vector<int> ones(SL, 1);
    CK(cudaMemcpy(mask, ones.data(), SL * 4, cudaMemcpyHostToDevice));
    int i192 = 192;
    CK(cudaMemcpy(cidx, &i192, 4, cudaMemcpyHostToDevice));
  }
  for (int l = 0; l < L; ++l) {
    auto& q = lp[l];
    q = {};
    q.d = D; q.h = H; q.hkv = HKV; q.dh = DH; q.f = F; q.s_len = SL; q.chunk = 128;
    q.eps_attn = q.eps_mlp = q.eps_qk = 1e-6f; q.scale = 1.f / sqrtf(float(DH));
    q.qkv_parts = qkvp; q.split[0] = S_QKV; q.cos = cosb; q.sin = sinb; q.kv_mask = mask; q.cache_index = cidx;
    q.k_cache = alloc_w(size_t(HKV) * SL * DH, 500 + l);
    q.v_cache = alloc_w(size_t(HKV) * SL * DH, 600 + l);
    q.attn_splits = SPL; q.span_max = (SL + SPL - 1) / SPL; q.acc = acc; q.ml = ml;
  }
  const size_t att_smem = cudaperf_layer::attend_smem_bytes(G, DH, lp[0].span_max);
  for (int hs : {1, 2, 3})
    CK(cudaFuncSetAttribute(cudaperf_layer::attend_kernel_for(DH, G / hs), cudaFuncAttributeMaxDynamicSharedMemorySize,
                            int(att_smem)));
  int head_groups = 1;   // attend_kernel blocks per (KV head, split), set per variant
  CK(cudaDeviceSynchronize());
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  g_stream = s;
  auto attend = [&](const Cfg& c, int l) {
    Launch lc(dim3(HKV * SPL * head_groups, 1, 1), dim3(kThreads, 1, 1), att_smem, s, c.pdl);
    cudaLaunchConfig_t& cfg = lc.cfg;
    begin_launch();
    lp[l].attn_hsplit = head_groups;
    CK(cudaLaunchKernelEx(&cfg, cudaperf_layer::attend_kernel_for(DH, G / head_groups), lp[l], c.flags()));
    end_launch();
  };
  // attn: 0 a finish kernel stands in for attention, 1 the real attention and o's merge prologue, 2 the real attention
  // alone (no matvecs, no finishes), 3 the real attention with o's plain prologue
  int attn_mode = 0;
  // the MLP alone (attn_mode 4: gate_up + down as two kernels, 5: one mlp_kernel, 6: mlp_kernel without its adds,
  // 7: mlp_kernel with staggered adds, 8: mlp_kernel_lean, 9/10: mlp_kernel / mlp_kernel_lean group-major,
  // 11/12: mlp_kernel group-major with six loads in flight in phase 2 / phases 2 and 3, 13: mlp_kernel with six in phase 2,
  // 14: mlp_kernel_capped of 768 threads, group-major)
  unsigned long long *racc, *mlp_out;
  CK(cudaMalloc(&racc, D * 8));
  CK(cudaMalloc(&mlp_out, D * 8));
  CK(cudaMemset(racc, 0, D * 8));
  CK(cudaMemset(mlp_out, 0, D * 8));
  int n_sm = 0;
  CK(cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, 0));
  const size_t mlp_smem = mlp_smem_floats<kMlpThreads>(D, F, n_sm) * 4;
  // the MLP kernels by `add` (mlp below); the last one runs 768-thread blocks
  using MlpKernel = void (*)(Prologue, const __nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*, int, int,
                             unsigned long long*, int);
  const MlpKernel mlp_kernels[] = {
      mlp_kernel<kMlpThreads, 0>, mlp_kernel<kMlpThreads, 1>, mlp_kernel<kMlpThreads, 2>,
      mlp_kernel_lean<kMlpThreads, 1>, mlp_kernel<kMlpThreads, 1, true>, mlp_kernel_lean<kMlpThreads, 1, true>,
      mlp_kernel<kMlpThreads, 1, true, 6>, mlp_kernel<kMlpThreads, 1, true, 6, 6>, mlp_kernel<kMlpThreads, 1, false, 6>,
      mlp_kernel_capped<768, 64, 6, 4>};
  constexpr int kMlp768 = sizeof(mlp_kernels) / sizeof(mlp_kernels[0]) - 1;
  const size_t smem768 = mlp_smem_floats<768>(D, F, n_sm) * 4;
  for (int i = 0; i <= kMlp768; ++i)
    CK(cudaFuncSetAttribute(mlp_kernels[i], cudaFuncAttributeMaxDynamicSharedMemorySize,
                            int(i == kMlp768 ? smem768 : mlp_smem)));
  auto mlp = [&](const Cfg& c, int l, int add) {   // add: mlp_kernel's kAdd, 3: mlp_kernel_lean, 4-9: attn_mode - 5
    Prologue pr = {};
    pr.x = x; pr.racc = racc; pr.xo = xmid; pr.k_total = D; pr.eps = 1e-6f; pr.vec = scale;
    const int nt = add == kMlp768 ? 768 : kMlpThreads;
    const size_t smem = add == kMlp768 ? smem768 : mlp_smem;
    Launch lc(dim3(n_sm, 1, 1), dim3(nt, 1, 1), smem, s, c.pdl);
    begin_launch();
    CK(cudaLaunchKernelEx(&lc.cfg, mlp_kernels[add], pr,
                          (const __nv_bfloat16*)wgu[l], (const __nv_bfloat16*)nullptr, (const __nv_bfloat16*)wdn[l], D,
                          F, mlp_out, c.flags()));
    end_launch();
  };
  auto step = [&](const Cfg& c, bool attn_standin, bool finishes, bool head) {
    for (int l = 0; l < L; ++l) {
      if (g_child_layer) begin_capture();
      Prologue pn = {};
      pn.x = x; pn.ss = ss; pn.n_chunks = D / kFinishChunk; pn.k_total = D; pn.eps = 1e-6f; pn.vec = scale;
      if (attn_mode == 2) {
        attend(c, l);
        if (g_child_layer) end_capture();
        continue;
      }
      if (attn_mode >= 5) {
        mlp(c, l, attn_mode == 5 ? 1 : attn_mode == 7 ? 2 : attn_mode == 8 ? 3 : attn_mode >= 9 ? attn_mode - 5 : 0);
        if (g_child_layer) end_capture();
        continue;
      }
      if (attn_mode != 4) {   // the attention half (attn_mode 4: the MLP alone)
        mv<8, kNorm>(s, c, c.u_small, pn, wq[l], D, NQKV, S_QKV, qkvp, NQKV);
        if (attn_mode) attend(c, l);
        else if (attn_standin) fin(s, c, x, qkvp, S_QKV, NQKV, D, xa, ssa);
        if (attn_mode == 1) {
          Prologue pa = {};
          pa.acc = acc; pa.ml = ml; pa.splits = SPL; pa.gp = G; pa.dh = DH; pa.group = G;
          mv<8, kAttn>(s, c, c.u_small, pa, wo[l], D, D, S_O, op, D);
        } else {
          Prologue pp = {};
          pp.xp = qkvp; pp.n_parts = S_QKV; pp.x_stride = NQKV;
          mv<8, kParts>(s, c, c.u_small, pp, wo[l], D, D, S_O, op, D);
        }
        if (finishes) fin(s, c, x, op, S_O, D, D, xmid, ssmid);
      }
      Prologue pg = {};
      pg.x = xmid; pg.ss = ssmid; pg.n_chunks = D / kFinishChunk; pg.k_total = D; pg.eps = 1e-6f; pg.vec = scale;
      mv<16, kNorm>(s, c, c.u_gu, pg, wgu[l], D, 2 * F, S_GU, gup, 2 * F);
      Prologue psw = {};
      psw.xp = gup; psw.n_parts = S_GU; psw.x_stride = 2 * F;
      mv<16, kSwiglu>(s, c, c.u_down, psw, wdn[l], F, D, S_DN, dnp, D);
      if (finishes) fin(s, c, xmid, dnp, S_DN, D, D, x, ss);
      if (g_child_layer) end_capture();
    }
    if (head) {
      if (g_child_layer) begin_capture();
      Prologue pn = {};
      pn.x = x; pn.ss = ss; pn.n_chunks = D / kFinishChunk; pn.k_total = D; pn.eps = 1e-6f; pn.vec = scale;
      mv<16, kNorm>(s, c, 8, pn, whead, D, V, 1, logits, V);
      if (g_child_layer) end_capture();
    }
  };
  struct Variant {
    const char* name;
    Cfg c;
    int graph;   // 0 stream launches, 1 one captured graph, 2 a child graph per launch (XLA's FFI nesting), 3 per layer
    bool attn, fin, head;
    int attn_mode = 0;
    int head_groups = 1;
  };
  // (the 2026-12-03 morning runs also timed each launch in its own child graph - XLA's FFI nesting - and plain stream
  // launches: benchmarks/results/pdl_chain_h200*.json)
  std::vector<Variant> vs = {
      {"7k_pdl_graph_plain", {true, 8, 4, 8, false}, 1, true, true, true},
      {"7k_pdl_graph_u8_plain", {true, 8, 8, 8, false}, 1, true, true, true},
      {"7k_pdl_graph_plain_late", {true, 8, 4, 8, false, true}, 1, true, true, true},
      {"7k_pdl_graph_u8_plain_late", {true, 8, 8, 8, false, true}, 1, true, true, true},
      {"7k_nopdl_graph_plain", {false, 8, 4, 8, false}, 1, true, true, true},
      {"7k_pdl_graph", {true, 8, 4, 8}, 1, true, true, true},
      {"7k_pdl_layerchild_plain", {true, 8, 4, 8, false}, 3, true, true, true},
      {"4k_nopdl_graph_plain", {false, 8, 4, 8, false}, 1, false, false, true},
      {"4k_pdl_graph_plain", {true, 8, 4, 8, false}, 1, false, false, true},
      {"4k_pdl_graph_plain_late", {true, 8, 4, 8, false, true}, 1, false, false, true},
      {"7k_realattn_nopdl_plain", {false, 8, 4, 8, false}, 1, true, true, true, 1},
      {"7k_realattn_pdl_plain", {true, 8, 4, 8, false}, 1, true, true, true, 1},
      {"7k_realattn_pdl_u8_plain_late", {true, 8, 8, 8, false, true}, 1, true, true, true, 1},
      {"7k_realattn_pdl_plain_late", {true, 8, 4, 8, false, true}, 1, true, true, true, 1},
      {"attn_only_nopdl_graph", {false, 8, 4, 8}, 1, true, true, false, 2},
      {"attn_only_pdl_graph", {true, 8, 4, 8}, 1, true, true, false, 2},
      {"attn_only_nopdl_graph_hg2", {false, 8, 4, 8}, 1, true, true, false, 2, 2},
      {"attn_only_nopdl_graph_hg3", {false, 8, 4, 8}, 1, true, true, false, 2, 3},
      {"7k_realattn_pdl_plain_hg2", {true, 8, 4, 8, false}, 1, true, true, true, 1, 2},
      {"7k_realattn_nopdl_plain_hg2", {false, 8, 4, 8, false}, 1, true, true, true, 1, 2},
      {"mlp2k_pdl_late", {true, 8, 4, 8, false, true}, 1, false, false, false, 4},
      {"mlp1k_pdl_late", {true, 8, 4, 8, false, true}, 1, false, false, false, 5},
      {"mlp1k_noadd_pdl_late", {true, 8, 4, 8, false, true}, 1, false, false, false, 6},
      {"mlp1k_rot_pdl_late", {true, 8, 4, 8, false, true}, 1, false, false, false, 7},
      {"mlp1k_lean_pdl_late", {true, 8, 4, 8, false, true}, 1, false, false, false, 8},
      {"mlp1k_gm_pdl_late", {true, 8, 4, 8, false, true}, 1, false, false, false, 9},
      {"mlp1k_gm_lean_pdl_late", {true, 8, 4, 8, false, true}, 1, false, false, false, 10},
      {"mlp1k_gm_u6_pdl_late", {true, 8, 4, 8, false, true}, 1, false, false, false, 11},
      {"mlp1k_gm_u6d6_pdl_late", {true, 8, 4, 8, false, true}, 1, false, false, false, 12},
      {"mlp1k_u6_pdl_late", {true, 8, 4, 8, false, true}, 1, false, false, false, 13},
      {"mlp1k_gm768_pdl_late", {true, 8, 4, 8, false, true}, 1, false, false, false, 14},
      {"mlp2k_nopdl", {false, 8, 4, 8, false}, 1, false, false, false, 4},
      {"mlp1k_nopdl", {false, 8, 4, 8, false}, 1, false, false, false, 5},
  };
  if (argc > 2) {   // only the variants whose names contain argv[2]
    std::vector<Variant> keep;
    for (auto& v : vs)
      if (std::string(v.name).find(argv[2]) != std::string::npos) keep.push_back(v);
    vs = keep;
  }
  const int reps = argc > 3 ? std::atoi(argv[3]) : 2;
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::string json = "[";
  std::printf("%-20s %10s %10s\n", "variant", "us/step", "TB/s");
  for (int rep = 0; rep < reps; ++rep) {
    for (auto& v : vs) {
      attn_mode = v.attn_mode;
      head_groups = v.head_groups;
      cudaGraphExec_t ge = nullptr;
      if (v.graph >= 2) {
        CK(cudaGraphCreate(&g_parent, 0));
        g_last = nullptr;
        (v.graph == 2 ? g_child : g_child_layer) = true;
        step(v.c, v.attn, v.fin, v.head);
        g_child = g_child_layer = false;
        CK(cudaGraphInstantiate(&ge, g_parent, 0));
        CK(cudaGraphDestroy(g_parent));
      } else if (v.graph) {
        cudaGraph_t g;
        CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
        step(v.c, v.attn, v.fin, v.head);
        CK(cudaStreamEndCapture(s, &g));
        CK(cudaGraphInstantiate(&ge, g, 0));
        CK(cudaGraphDestroy(g));
      }
      auto run = [&] {
        if (v.graph) CK(cudaGraphLaunch(ge, s));
        else step(v.c, v.attn, v.fin, v.head);
      };
      for (int i = 0; i < 3; ++i) run();
      CK(cudaStreamSynchronize(s));
      const int n = 30;
      CK(cudaEventRecord(e0, s));
      for (int i = 0; i < n; ++i) run();
      CK(cudaEventRecord(e1, s));
      CK(cudaEventSynchronize(e1));
      float ms;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      const double us = ms * 1000.0 / n;
      size_t b = bytes - (v.head ? 0 : size_t(D) * V * 2);
      if (v.attn_mode >= 4) b = size_t(L) * 3 * D * F * 2;   // the MLP weights only
      std::printf("%-20s %10.1f %10.3f\n", v.name, us, b / us / 1e6);
      char buf[256];
      std::snprintf(buf, sizeof buf, "%s{\"variant\": \"%s\", \"rep\": %d, \"us_per_step\": %.2f, \"tb_per_s\": %.4f}",
                    json.size() > 1 ? ", " : "", v.name, rep, us, b / us / 1e6);
      json += buf;
      if (ge) CK(cudaGraphExecDestroy(ge));
    }
  }
  json += "]\n";
  CK(cudaGetLastError());
  if (argc > 1 && std::string(argv[1]) != "-") {
    FILE* f = std::fopen(argv[1], "w");
    std::fputs(json.c_str(), f);
    std::fclose(f);
  }
  std::printf("weights %.3f GB\n", bytes / 1e9);
  return 0;
}
