#include <cuda_runtime.h>
// y[r][c] = max(x[r][c] + bias[c], 0) with a (32, 8) block and a grid over (cols, rows).
__global__ void bias_relu_kernel(const float* __restrict__ x, const float* __restrict__ bias, float* __restrict__ y,
                                 int rows, int cols) {
  int c = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y * blockDim.y + threadIdx.y;
  if (r < rows && c < cols) y[r * cols + c] = fmaxf(x[r * cols + c] + __ldg(&bias[c]), 0.f);
}
extern "C" int bias_relu_2d(const float* x, const float* bias, float* y, int rows, int cols, cudaStream_t stream) {
  dim3 block(32, 8);
  dim3 grid((cols + 31) / 32, (rows + 7) / 8);
  bias_relu_kernel<<<grid, block, 0, stream>>>(x, bias, y, rows, cols);
  return (int)cudaGetLastError();
}
