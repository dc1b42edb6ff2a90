"""static.analyse_source on hand-written kernels: one known-good and one known-bad kernel per feature."""
import pytest

from kernels_harness.features import parse, static

pytestmark = pytest.mark.skipif(parse.parser() is None, reason="tree-sitter CUDA is not installed")


def kernel(src: str, name: str | None = None) -> static.KernelStatic:
    sa = static.analyse_source(src)
    assert sa.ok, sa.note
    return sa.kernels[0] if name is None else next(k for k in sa.kernels if k.name == name)


def test_coalescing_classes_of_loads_and_stores():
    k = kernel("""
__global__ void k(int n, int cols, const float* x, const int* idx, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float a = x[i];                 // unit
  float b = x[i * 2];             // strided by a constant
  float c = x[(size_t)i * cols];  // strided by a parameter
  float d = x[idx[i]];            // gather
  float e = x[blockIdx.x];        // uniform
  y[i] = a + b + c + d + e;
}""")
    loads = [(a.array, a.pattern) for a in k.global_accesses(("load",))]
    assert loads == [("x", "unit"), ("x", "strided_const"), ("x", "strided_param"), ("x", "indirect"),
                     ("idx", "unit"), ("x", "uniform")]
    assert [(a.array, a.pattern) for a in k.global_accesses(("store",))] == [("y", "unit")]
    eff = {a.text: a.ideal_sectors / a.sectors for a in k.global_accesses(("load",))}
    assert eff["x[i]"] == 1.0 and eff["x[i * 2]"] == 0.5 and eff["x[(size_t)i * cols]"] == 0.125


def test_pointer_aliases_casts_and_loop_counters():
    k = kernel("""
__global__ void k(int rows, int cols, const float* __restrict__ A, float* out) {
  int r = blockIdx.x;
  const float* row = A + (size_t)r * cols;
  float s = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += row[c];
  const float4* v = reinterpret_cast<const float4*>(A);
  float4 q = v[threadIdx.x];
  float t = *(A + threadIdx.x * 3);
  out[r] = s + q.x + t;
}""")
    acc = {a.text: a for a in k.global_accesses()}
    assert acc["row[c]"].pattern == "unit" and acc["row[c]"].loop_depth == 1 and acc["row[c]"].readonly
    assert acc["v[threadIdx.x]"].vector and acc["v[threadIdx.x]"].elem_size == 16
    assert acc["*(A + threadIdx.x * 3)"].pattern == "strided_const"
    assert acc["out[r]"].pattern == "uniform"


def test_divergent_barriers_are_hazards():
    bad = kernel("""
__global__ void k(float* x) {
  __shared__ float s[256];
  s[threadIdx.x] = x[threadIdx.x];
  if (threadIdx.x < 128) {
    __syncthreads();
    x[threadIdx.x] = s[255 - threadIdx.x];
  }
}""")
    assert [b.divergent for b in bad.barriers] == [True]
    early = kernel("""
__global__ void k(int n, float* x) {
  __shared__ float s[256];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  s[threadIdx.x] = x[i];
  __syncthreads();
  x[i] = s[255 - threadIdx.x];
}""")
    assert early.barriers[0].divergent and "return" in early.barriers[0].reason
    good = kernel("""
__global__ void k(int n, float* x) {
  __shared__ float s[256];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  s[threadIdx.x] = i < n ? x[i] : 0.f;
  if (n > 4) __syncthreads();     // uniform condition: every thread agrees
  if (i < n) x[i] = s[255 - threadIdx.x];
}""")
    assert [b.divergent for b in good.barriers] == [False]


def test_redundant_barriers_loops_and_tree_reductions():
    k = kernel("""
__global__ void k(const float* x, float* out) {
  __shared__ float buf[256];
  buf[threadIdx.x] = x[blockIdx.x * 256 + threadIdx.x];
  __syncthreads();
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = buf[0];
}""")
    assert [(b.redundant, b.loop_depth) for b in k.barriers] == [(False, 0), (True, 0), (False, 1)]
    assert k.smem_tree_reduction and not k.warp_primitives
    no_smem = kernel("""
__global__ void k(float* x) { x[threadIdx.x] *= 2.f; __syncthreads(); }""")
    assert no_smem.barriers[0].redundant


def test_atomics_and_warp_primitives():
    k = kernel("""
__global__ void k(int n, const float* x, float* out, int* hist) {
  __shared__ int local[64];
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    atomicAdd(out, x[i]);
    atomicAdd(&local[(int)x[i] & 63], 1);
    atomicAdd(&hist[(int)x[i]], 1);
  }
  float v = x[threadIdx.x];
  v += __shfl_down_sync(0xffffffff, v, 16);
  __syncwarp();
}""")
    atom = [(a.space, a.array, a.loop_depth, a.index.uniform) for a in k.accesses if a.kind == "atomic"]
    assert atom == [("global", "out", 1, True), ("shared", "local", 1, False), ("global", "hist", 1, False)]
    assert k.grid_stride and k.warp_primitives == ["__shfl_down_sync"] and k.syncwarp == 1


def test_shared_arrays_padding_and_bank_conflicts():
    src = """
#define TILE 32
__global__ void k(const float* in, float* out) {
  __shared__ float tile[TILE][TILE%s];
  tile[threadIdx.y][threadIdx.x] = in[threadIdx.y * TILE + threadIdx.x];
  __syncthreads();
  out[threadIdx.y * TILE + threadIdx.x] = tile[threadIdx.x][threadIdx.y];
}
extern "C" int run(const float* in, float* out, cudaStream_t s) {
  dim3 block(TILE, 8);
  k<<<1, block, 0, s>>>(in, out);
  return 0;
}"""
    plain, padded = kernel(src % ""), kernel(src % " + 1")
    assert plain.shared[0].dims == [32, 32] and not plain.shared[0].padded
    assert padded.shared[0].dims == [32, 33] and padded.shared[0].padded
    assert plain.block == (32, 8, 1) and plain.block_known
    # the column read tile[threadIdx.x][...] hits one bank 32 times without padding, once with it
    assert [a.bank_degree for a in plain.shared_accesses()] == [1.0, 32.0]
    assert [a.bank_degree for a in padded.shared_accesses()] == [1.0, 1.0]
    assert plain.shared[0].bytes == 4096


def test_memory_hierarchy_markers():
    k = kernel("""
template <int B>
__global__ void __launch_bounds__(256, 2) k(int n, const float* __restrict__ x, float* y) {
  extern __shared__ float dyn[];
  int i = blockIdx.x * B + threadIdx.x;
#pragma unroll 4
  for (int j = 0; j < 4; j++) dyn[threadIdx.x * 4 + j] = __ldg(&x[i * 4 + j]);
  y[i] = dyn[threadIdx.x];
}""")
    assert k.name == "k" and k.launch_bounds == (256, 2) and k.unroll_pragmas == 1
    assert k.shared[0].dynamic and k.shared[0].bytes is None
    ldg = k.global_accesses(("load",))[0]
    assert ldg.readonly and ldg.fills_shared and ldg.pattern == "strided_const"
    assert k.shared_accesses()[0].bank_degree == 4.0   # stride 4 words: 4-way conflict


def test_launches_in_host_code():
    sa = static.analyse_source("""
#define BS 128
__global__ void a(float* x) { x[threadIdx.x] = 0; }
__global__ void b(float* x) { x[threadIdx.x] = 1; }
extern "C" int run(int n, float* x, cudaStream_t s) {
  int threads = 256;
  dim3 grid2(4, 2);
  a<<<(n + BS - 1) / BS, BS, 0, s>>>(x);
  b<<<grid2, threads, 64 * sizeof(float), s>>>(x);
  a<<<dim3(8, 1, 1), dim3(16, 16)>>>(x);
  return 0;
}""")
    got = [(la.kernel, la.grid, la.block, la.smem) for la in sa.launches]
    assert got == [("a", None, [128, 1, 1], 0), ("b", [4, 2, 1], [256, 1, 1], 256), ("a", [8, 1, 1], [16, 16, 1], 0)]


def test_no_kernel_and_unparsable_sources_are_notes():
    assert static.analyse_source("int main() { return 0; }").note.startswith("no __global__ kernel")
    sa = static.analyse_source("__global__ void k(float* x) { x[threadIdx.x] = ; }")
    assert len(sa.kernels) == 1  # a syntax error does not lose the kernel


def test_launches_evaluated_with_the_entry_arguments():
    src = """
#define T 16
__global__ void k(int n, float* x) { x[threadIdx.x] = 0; }
extern "C" int run(int n, int m, float* x, cudaStream_t s) {
  dim3 block(T, T);
  dim3 g2 = dim3((n + 255) / 256, 2);
  int blocks = n < 100 ? 1 : (n + 255) / 256;
  int capped = min(blocks, 64);
  k<<<dim3(blocks), block, 0, s>>>(n, x);
  k<<<g2, T * T, m * sizeof(float), s>>>(n, x);
  k<<<capped, 128, 0, s>>>(n, x);
  return 0;
}"""
    sa = static.analyse_source(src, entry="run", args=[100000, 8, None])
    assert [(la.grid, la.block, la.smem) for la in sa.launches] == [
        ([391, 1, 1], [16, 16, 1], 0), ([391, 2, 1], [256, 1, 1], 32), ([64, 1, 1], [128, 1, 1], 0)]
    # without the arguments only what is constant is known
    assert [la.grid for la in static.analyse_source(src).launches] == [None, None, None]
