#include <cuda_runtime.h>
// Counts positive values: __ballot_sync + __popc per warp, one atomicAdd per warp; also writes each
// element's rank among the positives of its warp (__popc of the ballot below the lane).
__global__ void ballot_kernel(const float* x, int* count, int* rank, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int lane = threadIdx.x & 31;
  bool pos = i < n && x[i] > 0.f;
  unsigned m = __ballot_sync(0xffffffffu, pos);
  if (lane == 0) atomicAdd(count, __popc(m));
  if (i < n) rank[i] = pos ? __popc(m & ((1u << lane) - 1u)) : -1;
}
extern "C" int ballot_count(const float* x, int* count, int* rank, int n, cudaStream_t stream) {
  cudaMemsetAsync(count, 0, sizeof(int), stream);
  ballot_kernel<<<(n + 127) / 128, 128, 0, stream>>>(x, count, rank, n);
  return (int)cudaGetLastError();
}
