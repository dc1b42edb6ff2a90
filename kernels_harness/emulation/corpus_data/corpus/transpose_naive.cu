#include <cuda_runtime.h>
__global__ void transpose_naive_kernel(const int* in, int* out, int rows, int cols) {
  int c = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y * blockDim.y + threadIdx.y;
  if (r < rows && c < cols) out[c * rows + r] = in[r * cols + c];
}
extern "C" int transpose_naive(const int* in, int* out, int rows, int cols, cudaStream_t stream) {
  dim3 b(8, 8), g((cols + 7) / 8, (rows + 7) / 8);
  transpose_naive_kernel<<<g, b, 0, stream>>>(in, out, rows, cols);
  return (int)cudaGetLastError();
}
