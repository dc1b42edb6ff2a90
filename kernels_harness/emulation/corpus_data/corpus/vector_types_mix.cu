#include <cuda_runtime.h>
// int2 and double2 loads; outputs the sum of components into int and double arrays.
__global__ void mix_kernel(const int2* a, const double2* b, int* si, double* sd, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    int2 p = __ldg(&a[i]);
    double2 q = b[i];
    si[i] = p.x * 3 - p.y;
    sd[i] = q.x * q.y + q.x;
    int4 w = make_int4(p.x, p.y, 1, 2);
    si[i] += w.z + w.w;
  }
}
extern "C" int vector_types_mix(const int* a, const double* b, int* si, double* sd, int n, cudaStream_t stream) {
  mix_kernel<<<(n + 63) / 64, 64, 0, stream>>>(reinterpret_cast<const int2*>(a), reinterpret_cast<const double2*>(b), si, sd, n);
  return (int)cudaGetLastError();
}
