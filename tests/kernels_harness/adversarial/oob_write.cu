// writes out of bounds: one element past the end of y
#include <cuda_runtime.h>
__global__ void saxpy_k(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
  if (i == n) y[i] = 0.0f;
}
extern "C" int saxpy(int n, float a, const float* x, float* y, cudaStream_t stream) {
  saxpy_k<<<(n + 256) / 256, 256, 0, stream>>>(n, a, x, y);
  return (int)cudaGetLastError();
}
