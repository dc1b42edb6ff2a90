#include <cuda_runtime.h>
#include <cuda_fp16.h>
// y = a*x + y in half precision with __hfma, a passed as float.
__global__ void haxpy_kernel(int n, __half a, const __half* x, __half* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __hfma(a, x[i], y[i]);
}
extern "C" int half_axpy(int n, float a, const __half* x, __half* y, cudaStream_t stream) {
  haxpy_kernel<<<(n + 255) / 256, 256, 0, stream>>>(n, __float2half(a), x, y);
  return (int)cudaGetLastError();
}
