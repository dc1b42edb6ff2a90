// NaN output: element 7 becomes 0/0
#include <cuda_runtime.h>
__global__ void saxpy_k(int n, float a, const float* x, float* y, float zero) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = (i == 7) ? zero / zero : a * x[i] + y[i];
}
extern "C" int saxpy(int n, float a, const float* x, float* y, cudaStream_t stream) {
  saxpy_k<<<(n + 255) / 256, 256, 0, stream>>>(n, a, x, y, 0.0f);
  return (int)cudaGetLastError();
}
