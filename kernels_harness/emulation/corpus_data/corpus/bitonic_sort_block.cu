#include <cuda_runtime.h>
// Sorts each 256-element segment ascending with a bitonic network in shared memory.
#define SEG 256
__global__ void bitonic_kernel(const float* in, float* out) {
  __shared__ float s[SEG];
  int t = threadIdx.x;
  s[t] = in[blockIdx.x * SEG + t];
  __syncthreads();
  for (int k = 2; k <= SEG; k <<= 1) {
    for (int j = k >> 1; j > 0; j >>= 1) {
      int p = t ^ j;
      if (p > t) {
        bool up = (t & k) == 0;
        float a = s[t], b = s[p];
        if ((a > b) == up) { s[t] = b; s[p] = a; }
      }
      __syncthreads();
    }
  }
  out[blockIdx.x * SEG + t] = s[t];
}
extern "C" int bitonic_sort_block(const float* in, float* out, int segments, cudaStream_t stream) {
  bitonic_kernel<<<segments, SEG, 0, stream>>>(in, out);
  return (int)cudaGetLastError();
}
