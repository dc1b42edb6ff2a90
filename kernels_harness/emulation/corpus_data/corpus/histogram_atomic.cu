#include <cuda_runtime.h>
__global__ void hist_kernel(const int* data, unsigned int* bins, int n, int nbins) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    int b = data[i];
    if (b >= 0 && b < nbins) atomicAdd(&bins[b], 1u);
  }
}
extern "C" int histogram_atomic(const int* data, unsigned int* bins, int n, int nbins, cudaStream_t stream) {
  cudaMemsetAsync(bins, 0, nbins * sizeof(unsigned int), stream);
  hist_kernel<<<12, 256, 0, stream>>>(data, bins, n, nbins);
  return (int)cudaGetLastError();
}
