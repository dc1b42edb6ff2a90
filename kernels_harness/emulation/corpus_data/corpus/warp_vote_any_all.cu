#include <cuda_runtime.h>
// Per-warp flags: any element > 0.9, all elements > -0.9 (__any_sync / __all_sync), plus __activemask.
__global__ void vote_kernel(const float* x, int* any_out, int* all_out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = i < n ? x[i] : 0.f;
  unsigned act = __activemask();
  int a = __any_sync(act, v > 0.9f);
  int b = __all_sync(0xffffffffu, v > -0.9f);
  if ((threadIdx.x & 31) == 0 && i < n) {
    int w = i / 32;
    any_out[w] = a;
    all_out[w] = b;
  }
}
extern "C" int warp_vote_any_all(const float* x, int* any_out, int* all_out, int n, cudaStream_t stream) {
  vote_kernel<<<(n + 63) / 64, 64, 0, stream>>>(x, any_out, all_out, n);  // n is a multiple of 32
  return (int)cudaGetLastError();
}
