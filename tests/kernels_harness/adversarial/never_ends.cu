// never ends: the kernel spins forever
#include <cuda_runtime.h>
__global__ void spin(int n, volatile int* flag) {
  while (flag[0] == 0 || n > 0) { }
}
extern "C" int saxpy(int n, float a, const float* x, float* y, cudaStream_t stream) {
  spin<<<1, 1, 0, stream>>>(n, (volatile int*)y);
  return (int)cudaGetLastError();
}
