#include <cuda_runtime.h>
// C[M,N] = A[M,K] @ B[K,N], one thread per output, 2D blocks.
__global__ void matmul_naive_kernel(const float* A, const float* B, float* C, int M, int N, int K) {
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < M && col < N) {
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = acc;
  }
}
extern "C" int matmul_naive(const float* A, const float* B, float* C, int M, int N, int K, cudaStream_t stream) {
  dim3 block(16, 8);
  dim3 grid((N + block.x - 1) / block.x, (M + block.y - 1) / block.y);
  matmul_naive_kernel<<<grid, block, 0, stream>>>(A, B, C, M, N, K);
  return (int)cudaGetLastError();
}
