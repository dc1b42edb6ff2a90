#include <cuda_runtime.h>
// A file-scope extern __shared__ array used by two kernels with different element types.
extern __shared__ unsigned char dyn_bytes[];
__global__ void block_sums_int(const int* x, int* out, int n) {
  int* s = reinterpret_cast<int*>(dyn_bytes);
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  s[threadIdx.x] = i < n ? x[i] : 0;
  __syncthreads();
  if (threadIdx.x == 0) {
    int acc = 0;
    for (int k = 0; k < blockDim.x; ++k) acc += s[k];
    out[blockIdx.x] = acc;
  }
}
__global__ void shift_left_float(const float* x, float* y, int n) {
  float* s = (float*)dyn_bytes;
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  s[threadIdx.x] = i < n ? x[i] : 0.f;
  __syncthreads();
  int j = (threadIdx.x + 1) % blockDim.x;
  if (i < n) y[i] = s[j];
}
extern "C" int dyn_smem_file_scope(const int* xi, int* sums, const float* xf, float* yf, int n, cudaStream_t stream) {
  int t = 64, b = (n + t - 1) / t;
  block_sums_int<<<b, t, t * sizeof(int), stream>>>(xi, sums, n);
  shift_left_float<<<b, t, t * sizeof(float), stream>>>(xf, yf, n);
  return (int)cudaGetLastError();
}
