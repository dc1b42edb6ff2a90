#include <cuda_runtime.h>
// Shared-memory tiled matmul (TILE x TILE tiles, sizes need not be multiples of TILE).
template <int TILE>
__global__ void matmul_tiled_kernel(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                                    int M, int N, int K) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE];
  int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
  float acc = 0.f;
  for (int t = 0; t < (K + TILE - 1) / TILE; ++t) {
    int ka = t * TILE + threadIdx.x, kb = t * TILE + threadIdx.y;
    As[threadIdx.y][threadIdx.x] = (row < M && ka < K) ? A[row * K + ka] : 0.f;
    Bs[threadIdx.y][threadIdx.x] = (kb < K && col < N) ? B[kb * N + col] : 0.f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TILE; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
    __syncthreads();
  }
  if (row < M && col < N) C[row * N + col] = acc;
}
extern "C" int matmul_tiled(const float* A, const float* B, float* C, int M, int N, int K, cudaStream_t stream) {
  constexpr int T = 16;
  dim3 grid((N + T - 1) / T, (M + T - 1) / T);
  matmul_tiled_kernel<T><<<grid, dim3(T, T), 0, stream>>>(A, B, C, M, N, K);
  return (int)cudaGetLastError();
}
