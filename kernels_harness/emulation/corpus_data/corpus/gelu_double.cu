#include <cuda_runtime.h>
// Exact GELU in double precision with erf and a grid-stride loop.
__global__ void gelu_d_kernel(const double* x, double* y, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)blockDim.x * gridDim.x)
    y[i] = 0.5 * x[i] * (1.0 + erf(x[i] * 0.70710678118654752));
}
extern "C" int gelu_double(const double* x, double* y, long long n, cudaStream_t stream) {
  gelu_d_kernel<<<5, 64, 0, stream>>>(x, y, n);
  return (int)cudaGetLastError();
}
