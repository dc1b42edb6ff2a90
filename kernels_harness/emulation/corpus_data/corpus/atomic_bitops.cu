#include <cuda_runtime.h>
// Bitset construction: atomicOr sets, atomicXor toggles, atomicAnd clears; atomicInc and atomicSub
// counters; atomicExch records a value; 64-bit atomicAdd totals.
__global__ void bits_kernel(const int* idx, unsigned* bits, unsigned* counter, int* down,
                            unsigned long long* total, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int k = idx[i];
  atomicOr(&bits[k / 32], 1u << (k % 32));
  if (k % 3 == 0) atomicXor(&bits[k / 32], 1u << (k % 32));
  if (k % 5 == 0) atomicAnd(&bits[k / 32], ~(1u << (k % 32)));
  atomicInc(counter, 0xffffffffu);
  atomicSub(down, 2);
  atomicAdd(total, (unsigned long long)k);
}
__global__ void exch_kernel(int* slot, int v) { atomicExch(slot, v); }
extern "C" int atomic_bitops(const int* idx, unsigned* bits, unsigned* counter, int* down, unsigned long long* total,
                             int n, int nwords, cudaStream_t stream) {
  cudaMemsetAsync(bits, 0, nwords * sizeof(unsigned), stream);
  cudaMemsetAsync(counter, 0, sizeof(unsigned), stream);
  cudaMemsetAsync(down, 0, 2 * sizeof(int), stream);
  cudaMemsetAsync(total, 0, sizeof(unsigned long long), stream);
  bits_kernel<<<(n + 127) / 128, 128, 0, stream>>>(idx, bits, counter, down, total, n);
  exch_kernel<<<1, 1, 0, stream>>>(down + 1, 12345);
  return (int)cudaGetLastError();
}
