#include <cuda_runtime.h>
// Dot product in double precision: block reduction in shared memory, double atomicAdd per block.
__global__ void dot_kernel(const double* a, const double* b, double* out, int n) {
  __shared__ double s[128];
  double v = 0.0;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) v += a[i] * b[i];
  s[threadIdx.x] = v;
  __syncthreads();
  for (int o = blockDim.x / 2; o > 0; o >>= 1) {
    if (threadIdx.x < o) s[threadIdx.x] += s[threadIdx.x + o];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, s[0]);
}
extern "C" int dot_double_atomic(const double* a, const double* b, double* out, int n, cudaStream_t stream) {
  cudaMemsetAsync(out, 0, sizeof(double), stream);
  dot_kernel<<<10, 128, 0, stream>>>(a, b, out, n);
  return (int)cudaGetLastError();
}
