#include <cuda_runtime.h>
// Sum reduction: per-block tree reduction in shared memory, then a second launch reduces the partials.
#define BLOCK 256
__global__ void partial_sums(const float* x, float* partial, int n) {
  __shared__ float s[BLOCK];
  unsigned t = threadIdx.x;
  float v = 0.f;
  for (unsigned i = blockIdx.x * BLOCK + t; i < (unsigned)n; i += BLOCK * gridDim.x) v += x[i];
  s[t] = v;
  __syncthreads();
  for (unsigned o = BLOCK / 2; o > 0; o >>= 1) {
    if (t < o) s[t] += s[t + o];
    __syncthreads();
  }
  if (t == 0) partial[blockIdx.x] = s[0];
}
extern "C" int reduce_smem_two_pass(const float* x, float* out, int n, cudaStream_t stream) {
  const int blocks = 24;
  float* partial = nullptr;
  cudaError_t e = cudaMalloc(&partial, blocks * sizeof(float));
  if (e != cudaSuccess) return (int)e;
  partial_sums<<<blocks, BLOCK, 0, stream>>>(x, partial, n);
  partial_sums<<<1, BLOCK, 0, stream>>>(partial, out, blocks);
  e = cudaGetLastError();
  cudaStreamSynchronize(stream);
  cudaFree(partial);
  return (int)e;
}
