// forks: leaves a child process behind (the parent then computes the right answer)
#include <cuda_runtime.h>
#include <unistd.h>
__global__ void saxpy_k(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" int saxpy(int n, float a, const float* x, float* y, cudaStream_t stream) {
  if (fork() == 0) { for (;;) pause(); }
  saxpy_k<<<(n + 255) / 256, 256, 0, stream>>>(n, a, x, y);
  return (int)cudaGetLastError();
}
