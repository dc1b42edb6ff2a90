// spins on the clock: burns a fixed number of cycles (e.g. to shape its timing)
#include <cuda_runtime.h>
__global__ void saxpy_k(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  long long t0 = clock64();
  while (clock64() - t0 < 1000) { }
  if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" int saxpy(int n, float a, const float* x, float* y, cudaStream_t stream) {
  saxpy_k<<<(n + 255) / 256, 256, 0, stream>>>(n, a, x, y);
  return (int)cudaGetLastError();
}
