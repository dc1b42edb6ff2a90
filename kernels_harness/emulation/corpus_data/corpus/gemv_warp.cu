#include <cuda_runtime.h>
// y = A x (A row-major rows x cols), one warp per row with float4 loads when cols % 4 == 0.
__global__ void gemv_kernel(const float* __restrict__ A, const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  int warps_per_block = blockDim.x / 32;
  int row = blockIdx.x * warps_per_block + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= rows) return;
  float acc = 0.f;
  const float4* a4 = reinterpret_cast<const float4*>(A + (size_t)row * cols);
  const float4* x4 = reinterpret_cast<const float4*>(x);
  for (int c = lane; c < cols / 4; c += 32) {
    float4 a = a4[c], b = x4[c];
    acc += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
  }
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
  if (lane == 0) y[row] = acc;
}
extern "C" int gemv_warp(const float* A, const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  gemv_kernel<<<(rows + 7) / 8, 256, 0, stream>>>(A, x, y, rows, cols);
  return (int)cudaGetLastError();
}
