// allocates 100 GB of device memory as a workspace
#include <cuda_runtime.h>
__global__ void saxpy_k(int n, float a, const float* x, float* y, float* work) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { work[i] = a * x[i]; y[i] = work[i] + y[i]; }
}
extern "C" int saxpy(int n, float a, const float* x, float* y, cudaStream_t stream) {
  float* work = nullptr;
  cudaError_t err = cudaMalloc(&work, 100ull << 30);
  if (err != cudaSuccess) return (int)err;
  saxpy_k<<<(n + 255) / 256, 256, 0, stream>>>(n, a, x, y, work);
  cudaStreamSynchronize(stream);
  cudaFree(work);
  return (int)cudaGetLastError();
}
