#include <cuda_runtime.h>
#include <cuda_bf16.h>
// GELU (tanh approximation) on bf16 data, computed in float.
__global__ void gelu_kernel(const __nv_bfloat16* x, __nv_bfloat16* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float v = __bfloat162float(x[i]);
    float t = tanhf(0.7978845608f * (v + 0.044715f * v * v * v));
    y[i] = __float2bfloat16(0.5f * v * (1.0f + t));
  }
}
extern "C" int bf16_gelu(const __nv_bfloat16* x, __nv_bfloat16* y, int n, cudaStream_t stream) {
  gelu_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x, y, n);
  return (int)cudaGetLastError();
}
