#include <cuda_runtime.h>
__global__ void relu_kernel(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = fmaxf(x[i], 0.0f);
}
extern "C" int relu_inplace(float* x, int n, cudaStream_t stream) {
  relu_kernel<<<(n + 127) / 128, 128, 0, stream>>>(x, n);
  return (int)cudaGetLastError();
}
