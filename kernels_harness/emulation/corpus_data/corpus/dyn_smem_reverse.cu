#include <cuda_runtime.h>
// Reverses each block-sized chunk through dynamically sized shared memory.
__global__ void reverse_kernel(const float* in, float* out, int n) {
  extern __shared__ float buf[];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int chunk = min((int)blockDim.x, n - (int)(blockIdx.x * blockDim.x));
  if (threadIdx.x < chunk) buf[threadIdx.x] = in[i];
  __syncthreads();
  if (threadIdx.x < chunk) out[i] = buf[chunk - 1 - threadIdx.x];
}
extern "C" int dyn_smem_reverse(const float* in, float* out, int n, cudaStream_t stream) {
  int threads = 96;
  reverse_kernel<<<(n + threads - 1) / threads, threads, threads * sizeof(float), stream>>>(in, out, n);
  return (int)cudaGetLastError();
}
