#include <cuda_runtime.h>
// Inclusive scan per 32-element segment with __shfl_up_sync.
__global__ void warp_scan_kernel(const float* in, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int lane = threadIdx.x & 31;
  float v = i < n ? in[i] : 0.f;
  for (int d = 1; d < 32; d <<= 1) {
    float u = __shfl_up_sync(0xffffffffu, v, d);
    if (lane >= d) v += u;
  }
  if (i < n) out[i] = v;
}
extern "C" int scan_warp_shfl(const float* in, float* out, int n, cudaStream_t stream) {
  warp_scan_kernel<<<(n + 127) / 128, 128, 0, stream>>>(in, out, n);
  return (int)cudaGetLastError();
}
