#include <cuda_runtime.h>
// Element-wise a + b with a grid-stride loop.
__global__ void vector_add_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) c[i] = a[i] + b[i];
}
extern "C" int vector_add(const float* a, const float* b, float* c, int n, cudaStream_t stream) {
  vector_add_kernel<<<8, 128, 0, stream>>>(a, b, c, n);
  return (int)cudaGetLastError();
}
