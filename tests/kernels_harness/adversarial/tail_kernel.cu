// correct: a vectorised main kernel for n / 4 float4 groups and a tail kernel for the last n % 4 elements
// (launched only when n is not a multiple of 4)
#include <cuda_runtime.h>
__global__ void saxpy_vec4(int n4, float a, const float4* x, float4* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n4) {
    float4 u = x[i], v = y[i];
    v.x = a * u.x + v.x; v.y = a * u.y + v.y; v.z = a * u.z + v.z; v.w = a * u.w + v.w;
    y[i] = v;
  }
}
__global__ void saxpy_tail(int start, int n, float a, const float* x, float* y) {
  int i = start + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" int saxpy(int n, float a, const float* x, float* y, cudaStream_t stream) {
  int n4 = n / 4;
  if (n4 > 0) saxpy_vec4<<<(n4 + 255) / 256, 256, 0, stream>>>(n4, a, (const float4*)x, (float4*)y);
  if (n % 4) saxpy_tail<<<1, 32, 0, stream>>>(4 * n4, n, a, x, y);
  return (int)cudaGetLastError();
}
