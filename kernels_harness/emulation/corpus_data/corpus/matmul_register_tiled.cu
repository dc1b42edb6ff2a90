#include <cuda_runtime.h>
// Each thread computes a 4x1 column strip of C from shared tiles (register tiling, dynamic shared memory).
#define TS 32
#define RM 4
__global__ void __launch_bounds__(256) mm_rt_kernel(const float* A, const float* B, float* C, int M, int N, int K) {
  extern __shared__ float smem[];
  float* As = smem;              // TS x TS
  float* Bs = smem + TS * TS;    // TS x TS
  int tx = threadIdx.x, ty = threadIdx.y;  // block (32, 8): each thread owns rows ty*4 .. ty*4+3
  int col = blockIdx.x * TS + tx;
  int row0 = blockIdx.y * TS + ty * RM;
  float acc[RM] = {0.f, 0.f, 0.f, 0.f};
  for (int t = 0; t < K; t += TS) {
    for (int r = ty; r < TS; r += blockDim.y) {
      int ar = blockIdx.y * TS + r, ac = t + tx;
      As[r * TS + tx] = (ar < M && ac < K) ? A[ar * K + ac] : 0.f;
      int br = t + r;
      Bs[r * TS + tx] = (br < K && col < N) ? B[br * N + col] : 0.f;
    }
    __syncthreads();
    for (int k = 0; k < TS; ++k) {
      float b = Bs[k * TS + tx];
#pragma unroll
      for (int i = 0; i < RM; ++i) acc[i] = fmaf(As[(ty * RM + i) * TS + k], b, acc[i]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < RM; ++i)
    if (row0 + i < M && col < N) C[(row0 + i) * N + col] = acc[i];
}
extern "C" int matmul_register_tiled(const float* A, const float* B, float* C, int M, int N, int K, cudaStream_t stream) {
  dim3 block(TS, TS / RM);
  dim3 grid((N + TS - 1) / TS, (M + TS - 1) / TS);
  size_t smem = 2 * TS * TS * sizeof(float);
  mm_rt_kernel<<<grid, block, smem, stream>>>(A, B, C, M, N, K);
  return (int)cudaGetLastError();
}
