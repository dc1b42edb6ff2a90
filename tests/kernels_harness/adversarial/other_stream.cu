// launches on another stream (its time would escape a per-stream timer)
#include <cuda_runtime.h>
__global__ void saxpy_k(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" int saxpy(int n, float a, const float* x, float* y, cudaStream_t stream) {
  static cudaStream_t side = nullptr;
  if (!side) cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
  saxpy_k<<<(n + 255) / 256, 256, 0, side>>>(n, a, x, y);
  return (int)cudaGetLastError();
}
