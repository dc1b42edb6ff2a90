#include <cuda_runtime.h>
// Broadcast within 8-lane segments (__shfl_sync with width 8) and segment sums with __shfl_xor_sync width 8.
__global__ void seg_kernel(const float* x, float* first, float* segsum, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = i < n ? x[i] : 0.f;
  float f = __shfl_sync(0xffffffffu, v, 0, 8);
  float s = v;
  for (int o = 4; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o, 8);
  if (i < n) { first[i] = f; segsum[i] = s; }
}
extern "C" int shfl_width_segments(const float* x, float* first, float* segsum, int n, cudaStream_t stream) {
  seg_kernel<<<(n + 63) / 64, 64, 0, stream>>>(x, first, segsum, n);
  return (int)cudaGetLastError();
}
