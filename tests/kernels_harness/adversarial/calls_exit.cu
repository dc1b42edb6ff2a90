// calls exit(): would end the process that hosts it
#include <cuda_runtime.h>
#include <cstdlib>
extern "C" int saxpy(int n, float a, const float* x, float* y, cudaStream_t stream) {
  exit(0);
  return 0;
}
