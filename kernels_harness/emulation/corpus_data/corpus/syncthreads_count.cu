#include <cuda_runtime.h>
// Per block: number of positive elements (__syncthreads_count), any > 0.99 (_or), all > -1 (_and).
__global__ void count_kernel(const float* x, int* cnt, int* any_big, int* all_gt, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = i < n ? x[i] : 0.f;
  int c = __syncthreads_count(v > 0.f);
  int o = __syncthreads_or(v > 0.99f);
  int a = __syncthreads_and(v > -1.0f);
  if (threadIdx.x == 0) { cnt[blockIdx.x] = c; any_big[blockIdx.x] = o; all_gt[blockIdx.x] = a; }
}
extern "C" int syncthreads_count(const float* x, int* cnt, int* any_big, int* all_gt, int n, cudaStream_t stream) {
  count_kernel<<<(n + 127) / 128, 128, 0, stream>>>(x, cnt, any_big, all_gt, n);
  return (int)cudaGetLastError();
}
