#include <cuda_runtime.h>
#include <cuda_bf16.h>
// Row-wise dot products of bf16 matrices with float accumulation (warp per row), float output.
__global__ void bf16_dot_kernel(const __nv_bfloat16* a, const __nv_bfloat16* b, float* out, int rows, int cols) {
  int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
  if (row >= rows) return;
  float acc = 0.f;
  for (int c = lane; c < cols; c += 32)
    acc += __bfloat162float(a[row * cols + c]) * __bfloat162float(b[row * cols + c]);
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
  if (lane == 0) out[row] = acc;
}
extern "C" int bf16_dot_rows(const __nv_bfloat16* a, const __nv_bfloat16* b, float* out, int rows, int cols, cudaStream_t stream) {
  bf16_dot_kernel<<<(rows * 32 + 255) / 256, 256, 0, stream>>>(a, b, out, rows, cols);
  return (int)cudaGetLastError();
}
