#include <cuda_runtime.h>
// Classic NVIDIA reduce #5: the last warp reduces through a volatile pointer without __syncwarp
// (warp-synchronous code; the cpu backend runs stores through volatile pointers in warp lockstep).
template <unsigned int blockSize>
__device__ void warpReduce(volatile float* sdata, unsigned int tid) {
  if (blockSize >= 64) sdata[tid] += sdata[tid + 32];
  if (blockSize >= 32) sdata[tid] += sdata[tid + 16];
  if (blockSize >= 16) sdata[tid] += sdata[tid + 8];
  if (blockSize >= 8) sdata[tid] += sdata[tid + 4];
  if (blockSize >= 4) sdata[tid] += sdata[tid + 2];
  if (blockSize >= 2) sdata[tid] += sdata[tid + 1];
}
template <unsigned int blockSize>
__global__ void reduce5(const float* g_idata, float* g_odata, unsigned int n) {
  __shared__ float sdata[blockSize];
  unsigned int tid = threadIdx.x;
  unsigned int i = blockIdx.x * (blockSize * 2) + tid;
  float v = 0.f;
  if (i < n) v += g_idata[i];
  if (i + blockSize < n) v += g_idata[i + blockSize];
  sdata[tid] = v;
  __syncthreads();
  if (blockSize >= 256) { if (tid < 128) sdata[tid] += sdata[tid + 128]; __syncthreads(); }
  if (blockSize >= 128) { if (tid < 64) sdata[tid] += sdata[tid + 64]; __syncthreads(); }
  if (tid < 32) warpReduce<blockSize>(sdata, tid);
  if (tid == 0) g_odata[blockIdx.x] = sdata[0];
}
extern "C" int reduce_volatile_warp(const float* x, float* partial, int n, cudaStream_t s) {
  reduce5<256><<<(n + 511) / 512, 256, 0, s>>>(x, partial, n);
  return cudaGetLastError();
}
