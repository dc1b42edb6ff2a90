#include <cuda_runtime.h>
// LayerNorm over the last axis: one block per row, warp shuffles then a shared-memory combine.
__device__ float block_sum(float v, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float total = 0.f;
  if (threadIdx.x < 32) {
    total = lane < (int)(blockDim.x / 32) ? scratch[lane] : 0.f;
    for (int o = 16; o > 0; o >>= 1) total += __shfl_down_sync(0xffffffffu, total, o);
    if (lane == 0) scratch[0] = total;
  }
  __syncthreads();
  total = scratch[0];
  __syncthreads();
  return total;
}
__global__ void layernorm_kernel(const float* x, const float* gamma, const float* beta, float* y, int cols, float eps) {
  __shared__ float scratch[32];
  const float* xr = x + blockIdx.x * cols;
  float s = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += xr[c];
  float mean = block_sum(s, scratch) / cols;
  float q = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) { float d = xr[c] - mean; q += d * d; }
  float rstd = rsqrtf(block_sum(q, scratch) / cols + eps);
  for (int c = threadIdx.x; c < cols; c += blockDim.x)
    y[blockIdx.x * cols + c] = (xr[c] - mean) * rstd * gamma[c] + beta[c];
}
extern "C" int layernorm(const float* x, const float* gamma, const float* beta, float* y, int rows, int cols, float eps,
                         cudaStream_t stream) {
  layernorm_kernel<<<rows, 128, 0, stream>>>(x, gamma, beta, y, cols, eps);
  return (int)cudaGetLastError();
}
