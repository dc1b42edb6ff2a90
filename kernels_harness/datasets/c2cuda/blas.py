"""CUDA building blocks shared by the linear-algebra families: GEMM and GEMV kernels in three
strategies each, emitted as source text for one element type and transpose combination.

GEMM kernels compute C[i,j] = alpha * sum_k opA(i,k) opB(k,j) + (accumulate ? beta * C[i,j] : 0)
for i < M, j < N with runtime `mask`: 0 all entries, 1 only the lower triangle (j <= i) is written,
2 only k > i contributes (strictly-lower A^T, PolyBench trmm). Signature of every GEMM kernel:
(int M, int N, int K, T alpha, T beta, int accumulate, int mask, const T* A, int lda, const T* B,
 int ldb, T* C, int ldc). GEMV kernels compute y[i] = alpha * sum_j opA(i,j) x[j] + (accumulate ?
beta * y[i] : 0) with signature (int rows, int cols, T alpha, T beta, int accumulate, const T* A,
int lda, const T* x, T* y).
"""
from __future__ import annotations

GEMM_STRATEGIES = {"naive": ["naive"], "smem_tiled": ["smem_tiled", "coalesced"],
                   "register_blocked": ["register_blocked", "smem_tiled", "unrolled"]}
GEMV_STRATEGIES = {"naive": ["naive"], "warp": ["warp_shuffle", "coalesced"], "smem": ["smem_tiled"]}


def _a(ta: bool) -> str:
    return "A[(long long)(k) * lda + (i)]" if ta else "A[(long long)(i) * lda + (k)]"


def _b(tb: bool) -> str:
    return "B[(long long)(j) * ldb + (k)]" if tb else "B[(long long)(k) * ldb + (j)]"


def _loaders(T: str, ta: bool, tb: bool, suffix: str) -> str:
    return f"""
__device__ __forceinline__ {T} load_a_{suffix}(const {T}* A, int lda, int M, int K, int mask, int i, int k) {{
  if (i >= M || k >= K || (mask == 2 && k <= i)) return ({T})0;
  return {_a(ta)};
}}
__device__ __forceinline__ {T} load_b_{suffix}(const {T}* B, int ldb, int K, int N, int k, int j) {{
  if (k >= K || j >= N) return ({T})0;
  return {_b(tb)};
}}
__device__ __forceinline__ void store_c_{suffix}({T}* C, int ldc, int M, int N, {T} alpha, {T} beta,
                                                 int accumulate, int mask, int i, int j, {T} s) {{
  if (i >= M || j >= N || (mask == 1 && j > i)) return;
  {T}* c = &C[(long long)i * ldc + j];
  *c = alpha * s + (accumulate ? beta * *c : ({T})0);
}}"""


GEMM_PARAMS = ("int M, int N, int K, {T} alpha, {T} beta, int accumulate, int mask, const {T}* A, int lda, "
               "const {T}* B, int ldb, {T}* C, int ldc")


def gemm_kernel(strategy: str, T: str, ta: bool, tb: bool, suffix: str) -> str:
    """Source of `gemm_<suffix>` (kernel) and `launch_gemm_<suffix>(..., stream)` (host)."""
    params = GEMM_PARAMS.format(T=T)
    args = "M, N, K, alpha, beta, accumulate, mask, A, lda, B, ldb, C, ldc"
    la = f"load_a_{suffix}(A, lda, M, K, mask, "
    lb = f"load_b_{suffix}(B, ldb, K, N, "
    st = f"store_c_{suffix}(C, ldc, M, N, alpha, beta, accumulate, mask, "
    if strategy == "naive":
        body = f"""
__global__ void gemm_{suffix}({params}) {{
  int j = blockIdx.x * 16 + threadIdx.x, i = blockIdx.y * 16 + threadIdx.y;
  if (i >= M || j >= N) return;
  {T} s = 0;
  for (int k = (mask == 2 ? i + 1 : 0); k < K; ++k) s += {la}i, k) * {lb}k, j);
  {st}i, j, s);
}}
static void launch_gemm_{suffix}({params}, cudaStream_t stream) {{
  if (M > 0 && N > 0) gemm_{suffix}<<<dim3((N + 15) / 16, (M + 15) / 16), dim3(16, 16), 0, stream>>>({args});
}}"""
    elif strategy == "smem_tiled":
        body = f"""
__global__ void gemm_{suffix}({params}) {{
  __shared__ {T} As[16][17];
  __shared__ {T} Bs[16][17];
  int tx = threadIdx.x, ty = threadIdx.y;
  int j = blockIdx.x * 16 + tx, i = blockIdx.y * 16 + ty;
  {T} s = 0;
  for (int k0 = 0; k0 < K; k0 += 16) {{
    As[ty][tx] = {la}i, k0 + tx);
    Bs[ty][tx] = {lb}k0 + ty, j);
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < 16; ++kk) s += As[ty][kk] * Bs[kk][tx];
    __syncthreads();
  }}
  {st}i, j, s);
}}
static void launch_gemm_{suffix}({params}, cudaStream_t stream) {{
  if (M > 0 && N > 0) gemm_{suffix}<<<dim3((N + 15) / 16, (M + 15) / 16), dim3(16, 16), 0, stream>>>({args});
}}"""
    elif strategy == "register_blocked":
        body = f"""
__global__ void gemm_{suffix}({params}) {{
  __shared__ {T} As[16][65];
  __shared__ {T} Bs[16][65];
  int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 16 + tx;
  int i0 = blockIdx.y * 64, j0 = blockIdx.x * 64;
  {T} acc[4][4];
#pragma unroll
  for (int r = 0; r < 4; ++r)
#pragma unroll
    for (int c = 0; c < 4; ++c) acc[r][c] = 0;
  for (int k0 = 0; k0 < K; k0 += 16) {{
    for (int e = tid; e < 64 * 16; e += 256) {{
      int ii = e / 16, ka = e % 16;
      As[ka][ii] = {la}i0 + ii, k0 + ka);
      int kb = e / 64, jj = e % 64;
      Bs[kb][jj] = {lb}k0 + kb, j0 + jj);
    }}
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < 16; ++kk) {{
      {T} a[4], b[4];
#pragma unroll
      for (int r = 0; r < 4; ++r) a[r] = As[kk][ty + 16 * r];
#pragma unroll
      for (int c = 0; c < 4; ++c) b[c] = Bs[kk][tx + 16 * c];
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int c = 0; c < 4; ++c) acc[r][c] += a[r] * b[c];
    }}
    __syncthreads();
  }}
#pragma unroll
  for (int r = 0; r < 4; ++r)
#pragma unroll
    for (int c = 0; c < 4; ++c) {st}i0 + ty + 16 * r, j0 + tx + 16 * c, acc[r][c]);
}}
static void launch_gemm_{suffix}({params}, cudaStream_t stream) {{
  if (M > 0 && N > 0) gemm_{suffix}<<<dim3((N + 63) / 64, (M + 63) / 64), dim3(16, 16), 0, stream>>>({args});
}}"""
    else:
        raise ValueError(strategy)
    return _loaders(T, ta, tb, suffix) + body


GEMV_PARAMS = "int rows, int cols, {T} alpha, {T} beta, int accumulate, const {T}* A, int lda, const {T}* x, {T}* y"


def gemv_kernel(strategy: str, T: str, trans: bool, suffix: str) -> str:
    """Source of `gemv_<suffix>` and `launch_gemv_<suffix>(..., stream)`; opA(i,j) = trans ? A[j,i] : A[i,j]."""
    params = GEMV_PARAMS.format(T=T)
    args = "rows, cols, alpha, beta, accumulate, A, lda, x, y"
    a_ij = "A[(long long)j * lda + i]" if trans else "A[(long long)i * lda + j]"
    store = f"y[i] = alpha * s + (accumulate ? beta * y[i] : ({T})0);"
    if strategy == "naive":
        return f"""
__global__ void gemv_{suffix}({params}) {{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= rows) return;
  {T} s = 0;
  for (int j = 0; j < cols; ++j) s += {a_ij} * x[j];
  {store}
}}
static void launch_gemv_{suffix}({params}, cudaStream_t stream) {{
  if (rows > 0) gemv_{suffix}<<<(rows + 127) / 128, 128, 0, stream>>>({args});
}}"""
    if strategy == "warp":
        return f"""
__global__ void gemv_{suffix}({params}) {{
  int i = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
  if (i >= rows) return;
  {T} s = 0;
  for (int j = lane; j < cols; j += 32) s += {a_ij} * x[j];
  for (int off = 16; off > 0; off /= 2) s += __shfl_down_sync(0xffffffffu, s, off);
  if (lane == 0) {{ {store} }}
}}
static void launch_gemv_{suffix}({params}, cudaStream_t stream) {{
  if (rows > 0) gemv_{suffix}<<<(int)(((long long)rows * 32 + 255) / 256), 256, 0, stream>>>({args});
}}"""
    if strategy == "smem":
        return f"""
__global__ void gemv_{suffix}({params}) {{
  __shared__ {T} xs[256];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  {T} s = 0;
  for (int j0 = 0; j0 < cols; j0 += 256) {{
    int jj = j0 + threadIdx.x;
    xs[threadIdx.x] = jj < cols ? x[jj] : ({T})0;
    __syncthreads();
    int len = cols - j0 < 256 ? cols - j0 : 256;
    if (i < rows)
      for (int t = 0; t < len; ++t) {{ int j = j0 + t; s += {a_ij} * xs[t]; }}
    __syncthreads();
  }}
  if (i < rows) {{ {store} }}
}}
static void launch_gemv_{suffix}({params}, cudaStream_t stream) {{
  if (rows > 0) gemv_{suffix}<<<(rows + 255) / 256, 256, 0, stream>>>({args});
}}"""
    raise ValueError(strategy)


def c_gemm(T: str, ta: bool, tb: bool, name: str = "gemm_ref") -> str:
    """A serial C GEMM with the same contract (for references that compose several products)."""
    return f"""static void {name}(int M, int N, int K, {T} alpha, {T} beta, int accumulate, int mask,
                     const {T}* A, int lda, const {T}* B, int ldb, {T}* C, int ldc) {{
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {{
      if (mask == 1 && j > i) continue;
      {T} s = 0;
      for (int k = (mask == 2 ? i + 1 : 0); k < K; ++k) s += {_a(ta)} * {_b(tb)};
      C[(long long)i * ldc + j] = alpha * s + (accumulate ? beta * C[(long long)i * ldc + j] : 0);
    }}
}}"""
