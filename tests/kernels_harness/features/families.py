"""Hand-written kernel families for validating the structural features: several strategies per task.

Each task's implementations differ in exactly the structure the features measure (strided vs
coalesced, smem tiling with and without padding, atomics vs tree vs warp shuffle, vector loads), so
the features must separate them, and on the H200 their structural scores should order them like
their measured speed. `python tests/kernels_harness/features/families.py DIR` writes the JSON task
files (tests/kernels_harness/features/data/ holds a copy) for benchmarks/features_validation.py.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

SUM_PRELUDE = "#include <cuda_runtime.h>\n"


def _task(tid, entry, source, signature, configs, flops, min_bytes, impls, tol=None):
    return {"version": 1, "id": tid, "track": "c2cuda", "entry": entry, "source": source, "family": "features_validation",
            "signature": signature, "configs": configs, "tolerance": tol or {"atol": 1e-4, "rtol": 1e-4},
            "flops": flops, "min_bytes": min_bytes,
            "implementations": [{"name": n, "strategies": s, "baseline": i == 0, "source": src}
                                for i, (n, s, src) in enumerate(impls)]}


# ---- transpose ---------------------------------------------------------------------------------------
_T_ENTRY = '''extern "C" int transpose(int rows, int cols, const float* in, float* out, cudaStream_t stream) {
  dim3 block(32, 8);
  dim3 grid((cols + 31) / 32, (rows + 31) / 32);
  transpose_k<<<grid, block, 0, stream>>>(rows, cols, in, out);
  return (int)cudaGetLastError();
}
'''
_T_TILED = '''#define TILE 32
__global__ void transpose_k(int rows, int cols, const float* __restrict__ in, float* __restrict__ out) {
  __shared__ float tile[TILE][TILE%s];
  int c = blockIdx.x * TILE + threadIdx.x;
  int r0 = blockIdx.y * TILE;
  for (int j = threadIdx.y; j < TILE; j += blockDim.y) {
    int r = r0 + j;
    if (r < rows && c < cols) tile[j][threadIdx.x] = in[(size_t)r * cols + c];
  }
  __syncthreads();
  int ocol = r0 + threadIdx.x;
  for (int j = threadIdx.y; j < TILE; j += blockDim.y) {
    int oc = blockIdx.x * TILE + j;
    if (oc < cols && ocol < rows) out[(size_t)oc * rows + ocol] = tile[threadIdx.x][j];
  }
}
''' + _T_ENTRY
TRANSPOSE = _task(
    "feat_transpose", "transpose",
    "void transpose(int rows, int cols, const float* in, float* out) {\n  for (int r = 0; r < rows; r++)\n"
    "    for (int c = 0; c < cols; c++) out[c * rows + r] = in[r * cols + c];\n}\n",
    [{"name": "rows", "role": "scalar", "dtype": "int32", "value": "R"},
     {"name": "cols", "role": "scalar", "dtype": "int32", "value": "C"},
     {"name": "in", "role": "in", "dtype": "float32", "shape": ["R", "C"]},
     {"name": "out", "role": "out", "dtype": "float32", "shape": ["C", "R"]}],
    [{"R": 50, "C": 70}, {"R": 2048, "C": 4096}, {"R": 8192, "C": 8192}], "0", "8*R*C",
    [("read_strided", ["naive"], '''__global__ void transpose_k(int rows, int cols, const float* in, float* out) {
  // threadIdx.x walks rows: the read is strided by cols, the write is contiguous
  for (int j = threadIdx.y; j < 32; j += blockDim.y) {
    int r = blockIdx.y * 32 + threadIdx.x;
    int c = blockIdx.x * 32 + j;
    if (r < rows && c < cols) out[(size_t)c * rows + r] = in[(size_t)r * cols + c];
  }
}
''' + _T_ENTRY),
     ("write_strided", ["naive"], '''__global__ void transpose_k(int rows, int cols, const float* in, float* out) {
  for (int j = threadIdx.y; j < 32; j += blockDim.y) {
    int c = blockIdx.x * 32 + threadIdx.x;
    int r = blockIdx.y * 32 + j;
    if (r < rows && c < cols) out[(size_t)c * rows + r] = in[(size_t)r * cols + c];
  }
}
''' + _T_ENTRY),
     ("smem_tiled", ["coalesced", "smem_tiled"], _T_TILED % ""),
     ("smem_tiled_padded", ["coalesced", "smem_tiled", "padded"], _T_TILED % " + 1")])

# ---- matmul --------------------------------------------------------------------------------------------
_MM_SIG = [{"name": "M", "role": "scalar", "dtype": "int32", "value": "M"},
           {"name": "N", "role": "scalar", "dtype": "int32", "value": "N"},
           {"name": "K", "role": "scalar", "dtype": "int32", "value": "K"},
           {"name": "A", "role": "in", "dtype": "float32", "shape": ["M", "K"]},
           {"name": "B", "role": "in", "dtype": "float32", "shape": ["K", "N"]},
           {"name": "C", "role": "out", "dtype": "float32", "shape": ["M", "N"]}]
_MM_NAIVE = '''__global__ void mm_k(int M, int N, int K, const float* A, const float* B, float* C) {
  int %s = blockIdx.x * blockDim.x + threadIdx.x;
  int %s = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= M || col >= N) return;
  float acc = 0.f;
  for (int k = 0; k < K; k++) acc += A[(size_t)row * K + k] * B[(size_t)k * N + col];
  C[(size_t)row * N + col] = acc;
}
extern "C" int matmul(int M, int N, int K, const float* A, const float* B, float* C, cudaStream_t stream) {
  dim3 block(32, 8);
  dim3 grid((%s + 31) / 32, (%s + 7) / 8);
  mm_k<<<grid, block, 0, stream>>>(M, N, K, A, B, C);
  return (int)cudaGetLastError();
}
'''
MATMUL = _task(
    "feat_matmul", "matmul",
    "void matmul(int M, int N, int K, const float* A, const float* B, float* C) {\n"
    "  for (int i = 0; i < M; i++) for (int j = 0; j < N; j++) {\n    float s = 0;\n"
    "    for (int k = 0; k < K; k++) s += A[i * K + k] * B[k * N + j];\n    C[i * N + j] = s;\n  }\n}\n",
    _MM_SIG, [{"M": 33, "N": 40, "K": 50}, {"M": 1024, "N": 1024, "K": 1024}, {"M": 2048, "N": 2048, "K": 2048}],
    "2*M*N*K", "4*(M*K + K*N + M*N)",
    [("naive_row_major_threads", ["naive"], _MM_NAIVE % ("row", "col", "M", "N")),
     ("naive", ["naive", "coalesced"], _MM_NAIVE % ("col", "row", "N", "M")),
     ("smem_tiled", ["coalesced", "smem_tiled"], '''#define T 16
__global__ void mm_k(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B, float* C) {
  __shared__ float As[T][T];
  __shared__ float Bs[T][T];
  int row = blockIdx.y * T + threadIdx.y, col = blockIdx.x * T + threadIdx.x;
  float acc = 0.f;
  for (int t = 0; t < K; t += T) {
    As[threadIdx.y][threadIdx.x] = (row < M && t + threadIdx.x < K) ? A[(size_t)row * K + t + threadIdx.x] : 0.f;
    Bs[threadIdx.y][threadIdx.x] = (col < N && t + threadIdx.y < K) ? B[(size_t)(t + threadIdx.y) * N + col] : 0.f;
    __syncthreads();
    for (int k = 0; k < T; k++) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
    __syncthreads();
  }
  if (row < M && col < N) C[(size_t)row * N + col] = acc;
}
extern "C" int matmul(int M, int N, int K, const float* A, const float* B, float* C, cudaStream_t stream) {
  dim3 block(T, T);
  dim3 grid((N + T - 1) / T, (M + T - 1) / T);
  mm_k<<<grid, block, 0, stream>>>(M, N, K, A, B, C);
  return (int)cudaGetLastError();
}
'''),
     ("smem_tiled_regblock", ["coalesced", "smem_tiled", "unrolled", "padded"], '''#define T 32
#define R 4
__global__ void __launch_bounds__(256) mm_k(int M, int N, int K, const float* __restrict__ A,
                                            const float* __restrict__ B, float* C) {
  __shared__ float As[T][T + 1];
  __shared__ float Bs[T][T + 1];
  int col = blockIdx.x * T + threadIdx.x;
  int row0 = blockIdx.y * T;
  float acc[R] = {0.f, 0.f, 0.f, 0.f};
  for (int t = 0; t < K; t += T) {
#pragma unroll
    for (int i = 0; i < R; i++) {
      int r = threadIdx.y + i * 8;
      As[r][threadIdx.x] = (row0 + r < M && t + threadIdx.x < K) ? A[(size_t)(row0 + r) * K + t + threadIdx.x] : 0.f;
      Bs[r][threadIdx.x] = (t + r < K && col < N) ? B[(size_t)(t + r) * N + col] : 0.f;
    }
    __syncthreads();
#pragma unroll 8
    for (int k = 0; k < T; k++) {
      float b = Bs[k][threadIdx.x];
#pragma unroll
      for (int i = 0; i < R; i++) acc[i] += As[threadIdx.y + i * 8][k] * b;
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < R; i++) {
    int r = row0 + threadIdx.y + i * 8;
    if (r < M && col < N) C[(size_t)r * N + col] = acc[i];
  }
}
extern "C" int matmul(int M, int N, int K, const float* A, const float* B, float* C, cudaStream_t stream) {
  dim3 block(T, 8);
  dim3 grid((N + T - 1) / T, (M + T - 1) / T);
  mm_k<<<grid, block, 0, stream>>>(M, N, K, A, B, C);
  return (int)cudaGetLastError();
}
''')], tol={"atol": 1e-3, "rtol": 1e-3})

# ---- sum -------------------------------------------------------------------------------------------------
_SUM_ENTRY = '''extern "C" int sum(int n, const float* x, float* out, cudaStream_t stream) {
  cudaMemsetAsync(out, 0, sizeof(float), stream);
  int blocks = (n + 1023) / 1024;
  if (blocks > 1056) blocks = 1056;
  if (blocks < 1) blocks = 1;
  sum_k<<<blocks, 256, 0, stream>>>(n, x, out);
  return (int)cudaGetLastError();
}
'''
SUM = _task(
    "feat_sum", "sum", "void sum(int n, const float* x, float* out) {\n  float s = 0;\n"
    "  for (int i = 0; i < n; i++) s += x[i];\n  out[0] = s;\n}\n",
    [{"name": "n", "role": "scalar", "dtype": "int32", "value": "N"},
     {"name": "x", "role": "in", "dtype": "float32", "shape": ["N"]},
     {"name": "out", "role": "out", "dtype": "float32", "shape": [1]}],
    [{"N": 1000}, {"N": 1048576}, {"N": 33554432}], "N", "4*N + 4",
    [("atomic_each", ["naive", "grid_stride"], '''__global__ void sum_k(int n, const float* x, float* out) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) atomicAdd(out, x[i]);
}
''' + _SUM_ENTRY),
     ("smem_tree", ["coalesced", "grid_stride"], '''__global__ void sum_k(int n, const float* x, float* out) {
  __shared__ float buf[256];
  float s = 0.f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) s += x[i];
  buf[threadIdx.x] = s;
  __syncthreads();
  for (int k = blockDim.x / 2; k > 0; k >>= 1) {
    if (threadIdx.x < k) buf[threadIdx.x] += buf[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, buf[0]);
}
''' + _SUM_ENTRY),
     ("warp_shuffle", ["coalesced", "grid_stride", "warp_shuffle"], '''__global__ void sum_k(int n, const float* __restrict__ x, float* out) {
  __shared__ float warp_sums[8];
  float s = 0.f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) s += __ldg(&x[i]);
  for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = s;
  __syncthreads();
  if (threadIdx.x < 32) {
    s = threadIdx.x < 8 ? warp_sums[threadIdx.x] : 0.f;
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
    if (threadIdx.x == 0) atomicAdd(out, s);
  }
}
''' + _SUM_ENTRY),
     ("vec4_shuffle", ["coalesced", "grid_stride", "warp_shuffle", "vectorized"], '''__global__ void sum_k(int n, const float* __restrict__ x, float* out) {
  __shared__ float warp_sums[8];
  float s = 0.f;
  const float4* x4 = reinterpret_cast<const float4*>(x);
  int n4 = n / 4;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += blockDim.x * gridDim.x) {
    float4 v = x4[i];
    s += (v.x + v.y) + (v.z + v.w);
  }
  for (int i = n4 * 4 + blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) s += x[i];
  for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = s;
  __syncthreads();
  if (threadIdx.x < 32) {
    s = threadIdx.x < 8 ? warp_sums[threadIdx.x] : 0.f;
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
    if (threadIdx.x == 0) atomicAdd(out, s);
  }
}
''' + _SUM_ENTRY)], tol={"atol": 0.5, "rtol": 1e-3})

# ---- row scale -----------------------------------------------------------------------------------------
_RS_ENTRY = '''extern "C" int rowscale(int rows, int cols, const float* x, const float* s, float* out, cudaStream_t stream) {
  long long total = (long long)%s;
  int blocks = (int)((total + 255) / 256);
  rs_k<<<blocks, 256, 0, stream>>>(rows, cols, x, s, out);
  return (int)cudaGetLastError();
}
'''
ROWSCALE = _task(
    "feat_rowscale", "rowscale",
    "void rowscale(int rows, int cols, const float* x, const float* s, float* out) {\n"
    "  for (int r = 0; r < rows; r++) for (int c = 0; c < cols; c++) out[r * cols + c] = x[r * cols + c] * s[r];\n}\n",
    [{"name": "rows", "role": "scalar", "dtype": "int32", "value": "R"},
     {"name": "cols", "role": "scalar", "dtype": "int32", "value": "C"},
     {"name": "x", "role": "in", "dtype": "float32", "shape": ["R", "C"]},
     {"name": "s", "role": "in", "dtype": "float32", "shape": ["R"]},
     {"name": "out", "role": "out", "dtype": "float32", "shape": ["R", "C"]}],
    [{"R": 37, "C": 64}, {"R": 2048, "C": 2048}, {"R": 8192, "C": 4096}], "R*C", "8*R*C + 4*R",
    [("thread_per_row", ["naive"], '''__global__ void rs_k(int rows, int cols, const float* x, const float* s, float* out) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  for (int c = 0; c < cols; c++) out[(size_t)r * cols + c] = x[(size_t)r * cols + c] * s[r];
}
''' + _RS_ENTRY % "rows"),
     ("column_major_threads", ["naive"], '''__global__ void rs_k(int rows, int cols, const float* x, const float* s, float* out) {
  long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= (long long)rows * cols) return;
  int r = idx % rows;
  int c = idx / rows;
  out[(size_t)r * cols + c] = x[(size_t)r * cols + c] * s[r];
}
''' + _RS_ENTRY % "rows * cols"),
     ("coalesced", ["coalesced"], '''__global__ void rs_k(int rows, int cols, const float* x, const float* s, float* out) {
  long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= (long long)rows * cols) return;
  int r = idx / cols;
  out[idx] = x[idx] * s[r];
}
''' + _RS_ENTRY % "rows * cols"),
     ("vec4", ["coalesced", "vectorized"], '''__global__ void rs_k(int rows, int cols, const float* __restrict__ x, const float* __restrict__ s,
                     float* __restrict__ out) {
  long long i4 = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  int c4 = cols / 4;
  if (i4 >= (long long)rows * c4) return;
  int r = i4 / c4;
  float k = __ldg(&s[r]);
  float4 v = reinterpret_cast<const float4*>(x)[i4];
  v.x *= k; v.y *= k; v.z *= k; v.w *= k;
  reinterpret_cast<float4*>(out)[i4] = v;
}
''' + _RS_ENTRY % "rows * (cols / 4)")])

# ---- matvec --------------------------------------------------------------------------------------------
_MV_SIG = [{"name": "M", "role": "scalar", "dtype": "int32", "value": "M"},
           {"name": "K", "role": "scalar", "dtype": "int32", "value": "K"},
           {"name": "A", "role": "in", "dtype": "float32", "shape": ["M", "K"]},
           {"name": "x", "role": "in", "dtype": "float32", "shape": ["K"]},
           {"name": "y", "role": "out", "dtype": "float32", "shape": ["M"]}]
MATVEC = _task(
    "feat_matvec", "matvec",
    "void matvec(int M, int K, const float* A, const float* x, float* y) {\n"
    "  for (int i = 0; i < M; i++) { float s = 0; for (int k = 0; k < K; k++) s += A[i * K + k] * x[k]; y[i] = s; }\n}\n",
    _MV_SIG, [{"M": 50, "K": 64}, {"M": 4096, "K": 4096}, {"M": 16384, "K": 8192}], "2*M*K", "4*(M*K + K + M)",
    [("thread_per_row", ["naive"], '''__global__ void mv_k(int M, int K, const float* A, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= M) return;
  float s = 0.f;
  for (int k = 0; k < K; k++) s += A[(size_t)i * K + k] * x[k];
  y[i] = s;
}
extern "C" int matvec(int M, int K, const float* A, const float* x, float* y, cudaStream_t stream) {
  mv_k<<<(M + 255) / 256, 256, 0, stream>>>(M, K, A, x, y);
  return (int)cudaGetLastError();
}
'''),
     ("block_per_row_smem", ["coalesced"], '''__global__ void mv_k(int M, int K, const float* A, const float* x, float* y) {
  __shared__ float buf[256];
  int i = blockIdx.x;
  float s = 0.f;
  for (int k = threadIdx.x; k < K; k += blockDim.x) s += A[(size_t)i * K + k] * x[k];
  buf[threadIdx.x] = s;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) buf[threadIdx.x] += buf[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) y[i] = buf[0];
}
extern "C" int matvec(int M, int K, const float* A, const float* x, float* y, cudaStream_t stream) {
  mv_k<<<M, 256, 0, stream>>>(M, K, A, x, y);
  return (int)cudaGetLastError();
}
'''),
     ("warp_per_row", ["coalesced", "warp_shuffle"], '''__global__ void mv_k(int M, int K, const float* __restrict__ A, const float* __restrict__ x, float* y) {
  int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  int lane = threadIdx.x % 32;
  if (warp >= M) return;
  float s = 0.f;
  for (int k = lane; k < K; k += 32) s += A[(size_t)warp * K + k] * __ldg(&x[k]);
  for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
  if (lane == 0) y[warp] = s;
}
extern "C" int matvec(int M, int K, const float* A, const float* x, float* y, cudaStream_t stream) {
  mv_k<<<(M * 32 + 255) / 256, 256, 0, stream>>>(M, K, A, x, y);
  return (int)cudaGetLastError();
}
'''),
     ("warp_per_row_vec4", ["coalesced", "warp_shuffle", "vectorized"], '''__global__ void mv_k(int M, int K, const float* __restrict__ A, const float* __restrict__ x, float* y) {
  int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  int lane = threadIdx.x % 32;
  if (warp >= M) return;
  const float4* a4 = reinterpret_cast<const float4*>(A + (size_t)warp * K);
  const float4* x4 = reinterpret_cast<const float4*>(x);
  float s = 0.f;
  for (int k = lane; k < K / 4; k += 32) {
    float4 a = a4[k], b = __ldg(&x4[k]);
    s += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
  }
  for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
  if (lane == 0) y[warp] = s;
}
extern "C" int matvec(int M, int K, const float* A, const float* x, float* y, cudaStream_t stream) {
  mv_k<<<(M * 32 + 255) / 256, 256, 0, stream>>>(M, K, A, x, y);
  return (int)cudaGetLastError();
}
''')], tol={"atol": 1e-3, "rtol": 1e-3})

TASKS = [TRANSPOSE, MATMUL, SUM, ROWSCALE, MATVEC]


def write_all(out_dir) -> list[Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for t in TASKS:
        p = out / f"{t['id']}.json"
        p.write_text(json.dumps(t, indent=1) + "\n")
        paths.append(p)
    return paths


if __name__ == "__main__":
    for p in write_all(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).with_name("data")):
        print(p)
