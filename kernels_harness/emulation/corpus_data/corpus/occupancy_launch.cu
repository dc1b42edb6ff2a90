#include <cuda_runtime.h>
// Chooses its launch from cudaOccupancyMaxPotentialBlockSize and the device properties; y = x^2.
__global__ void square_kernel(const float* x, float* y, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = x[i] * x[i];
}
extern "C" int occupancy_launch(const float* x, float* y, int n, cudaStream_t stream) {
  int min_grid = 0, block = 0, per_sm = 0, dev = 0;
  cudaOccupancyMaxPotentialBlockSize(&min_grid, &block, square_kernel, 0, 0);
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, square_kernel, block, 0);
  cudaDeviceProp prop;
  cudaGetDevice(&dev);
  cudaGetDeviceProperties(&prop, dev);
  if (prop.warpSize != 32 || block <= 0 || per_sm <= 0) return 999;
  int grid = (n + block - 1) / block;
  if (grid > prop.multiProcessorCount * per_sm) grid = prop.multiProcessorCount * per_sm;
  square_kernel<<<grid, block, 0, stream>>>(x, y, n);
  return (int)cudaGetLastError();
}
