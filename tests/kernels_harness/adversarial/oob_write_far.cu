// writes out of bounds far past the end of y (a wrong bound: 2n threads write), without faulting
#include <cuda_runtime.h>
__global__ void saxpy_k(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
  else if (i < n + n / 2 + 7) y[i] = 1.0f;
}
extern "C" int saxpy(int n, float a, const float* x, float* y, cudaStream_t stream) {
  int total = 2 * n;
  saxpy_k<<<(total + 255) / 256, 256, 0, stream>>>(n, a, x, y);
  return (int)cudaGetLastError();
}
