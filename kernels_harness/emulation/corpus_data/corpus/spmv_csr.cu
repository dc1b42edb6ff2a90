#include <cuda_runtime.h>
// Sparse matrix-vector product, CSR, one thread per row.
__global__ void spmv_kernel(const int* rowptr, const int* colidx, const float* vals, const float* x, float* y, int rows) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < rows) {
    float acc = 0.f;
    for (int k = rowptr[r]; k < rowptr[r + 1]; ++k) acc += vals[k] * x[colidx[k]];
    y[r] = acc;
  }
}
extern "C" int spmv_csr(const int* rowptr, const int* colidx, const float* vals, const float* x, float* y, int rows,
                        cudaStream_t stream) {
  spmv_kernel<<<(rows + 63) / 64, 64, 0, stream>>>(rowptr, colidx, vals, x, y, rows);
  return (int)cudaGetLastError();
}
