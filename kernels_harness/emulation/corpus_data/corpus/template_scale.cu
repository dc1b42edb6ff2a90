#include <cuda_runtime.h>
// One templated kernel instantiated for float and double, with a compile-time unroll factor.
template <typename T, int UNROLL>
__global__ void scale_add_kernel(const T* __restrict__ x, T* __restrict__ y, T alpha, int n) {
  int base = (blockIdx.x * blockDim.x + threadIdx.x) * UNROLL;
#pragma unroll
  for (int u = 0; u < UNROLL; ++u) {
    int i = base + u;
    if (i < n) y[i] = alpha * x[i] + y[i];
  }
}
template <typename T, int U>
static void launch_scale(const T* x, T* y, T alpha, int n, cudaStream_t s) {
  int threads = 64, per_block = threads * U;
  scale_add_kernel<T, U><<<(n + per_block - 1) / per_block, threads, 0, s>>>(x, y, alpha, n);
}
extern "C" int template_scale(const float* xf, float* yf, const double* xd, double* yd, int n, cudaStream_t stream) {
  launch_scale<float, 4>(xf, yf, 1.5f, n, stream);
  launch_scale<double, 2>(xd, yd, -0.25, n, stream);
  return (int)cudaGetLastError();
}
