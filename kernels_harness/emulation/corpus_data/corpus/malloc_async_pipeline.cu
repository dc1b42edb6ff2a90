#include <cuda_runtime.h>
// A launcher with stream-ordered temporaries: cudaMallocAsync, cudaMemcpyAsync, cudaFreeAsync, events.
__global__ void add_one(float* a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] += 1.f; }
__global__ void mul_into(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] * b[i];
}
extern "C" int malloc_async_pipeline(const float* x, float* y, int n, cudaStream_t stream) {
  float* tmp = nullptr;
  cudaError_t e = cudaMallocAsync(&tmp, n * sizeof(float), stream);
  if (e != cudaSuccess) return (int)e;
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  cudaEventRecord(start, stream);
  cudaMemcpyAsync(tmp, x, n * sizeof(float), cudaMemcpyDeviceToDevice, stream);
  add_one<<<(n + 127) / 128, 128, 0, stream>>>(tmp, n);
  mul_into<<<(n + 127) / 128, 128, 0, stream>>>(tmp, x, y, n);
  cudaEventRecord(stop, stream);
  cudaEventSynchronize(stop);
  float ms = 0.f;
  cudaEventElapsedTime(&ms, start, stop);
  cudaFreeAsync(tmp, stream);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaStreamSynchronize(stream);
  return (int)cudaGetLastError();
}
