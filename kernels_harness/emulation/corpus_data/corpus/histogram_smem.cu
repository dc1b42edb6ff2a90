#include <cuda_runtime.h>
// Privatised histogram: shared-memory bins per block, merged with global atomics.
#define NB 64
__global__ void hist_smem_kernel(const unsigned char* data, int* bins, int n) {
  __shared__ int local[NB];
  for (int b = threadIdx.x; b < NB; b += blockDim.x) local[b] = 0;
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    atomicAdd(&local[data[i] % NB], 1);
  __syncthreads();
  for (int b = threadIdx.x; b < NB; b += blockDim.x)
    if (local[b]) atomicAdd(&bins[b], local[b]);
}
extern "C" int histogram_smem(const unsigned char* data, int* bins, int n, cudaStream_t stream) {
  cudaMemsetAsync(bins, 0, NB * sizeof(int), stream);
  hist_smem_kernel<<<6, 192, 0, stream>>>(data, bins, n);
  return (int)cudaGetLastError();
}
