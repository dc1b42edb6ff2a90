#include <cuda_runtime.h>
#include <cfloat>
// Row maxima, one warp per row, butterfly (xor) shuffles: every lane ends with the maximum.
__global__ void row_max_kernel(const float* x, float* out, int rows, int cols) {
  int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  int lane = threadIdx.x % 32;
  if (warp >= rows) return;  // whole warps leave together
  float m = -FLT_MAX;
  for (int c = lane; c < cols; c += 32) m = fmaxf(m, x[warp * cols + c]);
  for (int o = 16; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if (lane == 7) out[warp] = m;
}
extern "C" int max_shfl_xor(const float* x, float* out, int rows, int cols, cudaStream_t stream) {
  int threads = 128;
  int blocks = (rows * 32 + threads - 1) / threads;
  row_max_kernel<<<blocks, threads, 0, stream>>>(x, out, rows, cols);
  return (int)cudaGetLastError();
}
