#include <cuda_runtime.h>
// Row softmax, one warp per row, butterfly reductions; fast intrinsics __expf and __fdividef.
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, o));
  return v;
}
__device__ __forceinline__ float warp_add(float v) {
#pragma unroll
  for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
  return v;
}
__global__ void softmax_warp_kernel(const float* x, float* y, int rows, int cols) {
  int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= rows) return;
  const float* xr = x + (size_t)row * cols;
  float m = -INFINITY;
  for (int c = lane; c < cols; c += 32) m = fmaxf(m, xr[c]);
  m = warp_max(m);
  float s = 0.f;
  for (int c = lane; c < cols; c += 32) s += __expf(xr[c] - m);
  s = warp_add(s);
  for (int c = lane; c < cols; c += 32) y[(size_t)row * cols + c] = __fdividef(__expf(xr[c] - m), s);
}
extern "C" int softmax_warp(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  softmax_warp_kernel<<<(rows + 3) / 4, 128, 0, stream>>>(x, y, rows, cols);
  return (int)cudaGetLastError();
}
