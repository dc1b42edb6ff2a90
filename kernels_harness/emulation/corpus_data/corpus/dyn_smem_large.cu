#include <cuda_runtime.h>
// 64 KiB of dynamic shared memory (above the default 48 KiB: needs cudaFuncSetAttribute).
#define ELEMS 16384
__global__ void big_smem_kernel(const float* x, float* y, int n) {
  extern __shared__ float s[];
  for (int k = threadIdx.x; k < ELEMS; k += blockDim.x) s[k] = k < n ? x[k] * 2.0f : 0.f;
  __syncthreads();
  for (int k = threadIdx.x; k < n && k < ELEMS; k += blockDim.x) y[k] = s[ELEMS - 1 - k] + s[k];
}
extern "C" int dyn_smem_large(const float* x, float* y, int n, cudaStream_t stream) {
  size_t bytes = ELEMS * sizeof(float);
  cudaError_t e = cudaFuncSetAttribute(big_smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
  if (e != cudaSuccess) return (int)e;
  big_smem_kernel<<<1, 256, bytes, stream>>>(x, y, n);
  return (int)cudaGetLastError();
}
