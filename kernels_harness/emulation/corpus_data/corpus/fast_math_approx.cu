#include <cuda_runtime.h>
// Fast approximate intrinsics (__expf, __logf, __sinf, __cosf, __powf) on small arguments.
__global__ void approx_kernel(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float v = x[i];
    y[i] = __expf(v) + __logf(v + 2.0f) + __sinf(v) + __cosf(v) + __powf(v + 2.0f, 0.5f);
  }
}
extern "C" int fast_math_approx(const float* x, float* y, int n, cudaStream_t stream) {
  approx_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x, y, n);
  return (int)cudaGetLastError();
}
