#include <cuda_runtime.h>
// A mix of CUDA math library calls and fast intrinsics on inputs in (0.1, 2).
__global__ void math_kernel(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = x[i];
  float r = expf(v) * 0.1f + logf(v) + sqrtf(v) + rsqrtf(v) + sinf(v) * cosf(v) + tanhf(v) + erff(v)
          + powf(v, 1.5f) + fmaf(v, 2.0f, 1.0f) + __fmaf_rn(v, v, -1.0f) + __fdividef(1.0f, v)
          + __saturatef(v - 1.0f) + log1pf(v) + exp2f(v) + fabsf(-v) + floorf(v * 3.f) + ceilf(v) + truncf(v * 5.f);
  y[i] = r;
}
extern "C" int math_intrinsics(const float* x, float* y, int n, cudaStream_t stream) {
  math_kernel<<<(n + 127) / 128, 128, 0, stream>>>(x, y, n);
  return (int)cudaGetLastError();
}
