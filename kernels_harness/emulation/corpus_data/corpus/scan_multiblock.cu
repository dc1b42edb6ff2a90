#include <cuda_runtime.h>
// Exclusive scan of any length: block scans (Blelloch in shared memory), a scan of block sums,
// and an add of the offsets; three kernels and a temporary buffer.
#define B 256
__global__ void block_scan(const int* in, int* out, int* sums, int n) {
  __shared__ int s[B];
  int t = threadIdx.x, i = blockIdx.x * B + t;
  s[t] = i < n ? in[i] : 0;
  __syncthreads();
  for (int d = 1; d < B; d *= 2) {  // up-sweep
    int k = (t + 1) * 2 * d - 1;
    if (k < B) s[k] += s[k - d];
    __syncthreads();
  }
  if (t == 0) { if (sums) sums[blockIdx.x] = s[B - 1]; s[B - 1] = 0; }
  __syncthreads();
  for (int d = B / 2; d >= 1; d /= 2) {  // down-sweep
    int k = (t + 1) * 2 * d - 1;
    if (k < B) { int x = s[k - d]; s[k - d] = s[k]; s[k] += x; }
    __syncthreads();
  }
  if (i < n) out[i] = s[t];
}
__global__ void add_offsets(int* out, const int* offs, int n) {
  int i = blockIdx.x * B + threadIdx.x;
  if (i < n) out[i] += offs[blockIdx.x];
}
extern "C" int scan_multiblock(const int* in, int* out, int n, cudaStream_t stream) {
  int blocks = (n + B - 1) / B;  // at most B blocks
  int *sums, *offs;
  cudaMalloc((void**)&sums, blocks * sizeof(int));
  cudaMalloc((void**)&offs, blocks * sizeof(int));
  block_scan<<<blocks, B, 0, stream>>>(in, out, sums, n);
  block_scan<<<1, B, 0, stream>>>(sums, offs, nullptr, blocks);
  add_offsets<<<blocks, B, 0, stream>>>(out, offs, n);
  cudaError_t e = cudaGetLastError();
  cudaDeviceSynchronize();
  cudaFree(sums);
  cudaFree(offs);
  return (int)e;
}
