#include <cuda_runtime.h>
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cooperative_groups/scan.h>
// Cooperative groups: warp tiles reduced with cg::reduce, a block sync, 8-wide tiles scanned and maxed.
namespace cg = cooperative_groups;
__device__ float tile_sum(cg::thread_block_tile<32> g, float v) { return cg::reduce(g, v, cg::plus<float>()); }
__global__ void cg_kernel(const float* x, float* sums, float* scans, float* maxes, int n) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
  cg::thread_block_tile<8> eight = cg::tiled_partition<8>(block);
  __shared__ float partial[8];
  int i = blockIdx.x * blockDim.x + block.thread_rank();
  float v = i < n ? x[i] : 0.f;
  float s = tile_sum(warp, v);
  if (warp.thread_rank() == 0) partial[warp.meta_group_rank()] = s;
  block.sync();
  if (block.thread_rank() == 0) {
    float t = 0.f;
    for (int k = 0; k < (int)(blockDim.x / 32); ++k) t += partial[k];
    sums[blockIdx.x] = t;
  }
  float sc = cg::inclusive_scan(eight, v);
  float m = cg::reduce(eight, v, cg::greater<float>());
  if (i < n) { scans[i] = sc; maxes[i] = m; }
}
extern "C" int coop_groups_tiles(const float* x, float* sums, float* scans, float* maxes, int n, cudaStream_t s) {
  cg_kernel<<<(n + 255) / 256, 256, 0, s>>>(x, sums, scans, maxes, n);
  return cudaGetLastError();
}
