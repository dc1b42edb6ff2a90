#include <cuda_runtime.h>
// 3D grid and 3D blocks: out[z][y][x] = in[z][y][x] * (x + 2y + 3z) over a D x H x W volume.
__global__ void vol_kernel(const float* in, float* out, int D, int H, int W) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  int z = blockIdx.z * blockDim.z + threadIdx.z;
  if (x < W && y < H && z < D) {
    size_t i = ((size_t)z * H + y) * W + x;
    out[i] = in[i] * (float)(x + 2 * y + 3 * z);
  }
}
extern "C" int volume_3d(const float* in, float* out, int D, int H, int W, cudaStream_t stream) {
  dim3 b(8, 4, 4);
  dim3 g((W + b.x - 1) / b.x, (H + b.y - 1) / b.y, (D + b.z - 1) / b.z);
  vol_kernel<<<g, b, 0, stream>>>(in, out, D, H, W);
  return (int)cudaGetLastError();
}
