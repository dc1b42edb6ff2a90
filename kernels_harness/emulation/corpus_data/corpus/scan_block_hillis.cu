#include <cuda_runtime.h>
// Inclusive scan of n <= 1024 elements by one block: Hillis-Steele with a double buffer.
__global__ void scan_kernel(const float* in, float* out, int n) {
  __shared__ float buf[2][1024];
  int t = threadIdx.x;
  int pout = 0, pin = 1;
  buf[pout][t] = t < n ? in[t] : 0.f;
  __syncthreads();
  for (int off = 1; off < blockDim.x; off *= 2) {
    pout = 1 - pout; pin = 1 - pout;
    float v = buf[pin][t];
    if (t >= off) v += buf[pin][t - off];
    buf[pout][t] = v;
    __syncthreads();
  }
  if (t < n) out[t] = buf[pout][t];
}
extern "C" int scan_block_hillis(const float* in, float* out, int n, cudaStream_t stream) {
  int threads = 1;
  while (threads < n) threads *= 2;
  scan_kernel<<<1, threads, 0, stream>>>(in, out, n);
  return (int)cudaGetLastError();
}
