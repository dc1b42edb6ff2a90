// cudaperf CPU emulation: the CUDA runtime API a solution may call, and the launch template that the
// source rewriter puts in place of `kernel<<<grid, block, smem, stream>>>(args)`.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>

enum cudaError_t {
  cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorMemoryAllocation = 2, cudaErrorInitializationError = 3,
  cudaErrorInvalidConfiguration = 9, cudaErrorInvalidSymbol = 13, cudaErrorInvalidDevicePointer = 17,
  cudaErrorInvalidMemcpyDirection = 21, cudaErrorInvalidDeviceFunction = 98, cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101, cudaErrorInvalidResourceHandle = 400, cudaErrorNotReady = 600,
  cudaErrorIllegalAddress = 700, cudaErrorLaunchOutOfResources = 701, cudaErrorLaunchTimeout = 702,
  cudaErrorAssert = 710, cudaErrorLaunchFailure = 719, cudaErrorNotSupported = 801, cudaErrorUnknown = 999
};
typedef cudaError_t cudaError;
enum cudaMemcpyKind { cudaMemcpyHostToHost = 0, cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2,
                      cudaMemcpyDeviceToDevice = 3, cudaMemcpyDefault = 4 };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
                         cudaFuncAttributePreferredSharedMemoryCarveout = 9 };
enum cudaFuncCache { cudaFuncCachePreferNone = 0, cudaFuncCachePreferShared = 1, cudaFuncCachePreferL1 = 2,
                     cudaFuncCachePreferEqual = 3 };
enum cudaSharedMemConfig { cudaSharedMemBankSizeDefault = 0, cudaSharedMemBankSizeFourByte = 1,
                           cudaSharedMemBankSizeEightByte = 2 };
enum cudaDeviceAttr {
  cudaDevAttrMaxThreadsPerBlock = 1, cudaDevAttrMaxBlockDimX = 2, cudaDevAttrMaxBlockDimY = 3,
  cudaDevAttrMaxBlockDimZ = 4, cudaDevAttrMaxGridDimX = 5, cudaDevAttrMaxGridDimY = 6, cudaDevAttrMaxGridDimZ = 7,
  cudaDevAttrMaxSharedMemoryPerBlock = 8, cudaDevAttrTotalConstantMemory = 9, cudaDevAttrWarpSize = 10,
  cudaDevAttrMaxRegistersPerBlock = 12, cudaDevAttrClockRate = 13, cudaDevAttrMultiProcessorCount = 16,
  cudaDevAttrMemoryClockRate = 36, cudaDevAttrGlobalMemoryBusWidth = 37, cudaDevAttrL2CacheSize = 38,
  cudaDevAttrMaxThreadsPerMultiProcessor = 39, cudaDevAttrComputeCapabilityMajor = 75,
  cudaDevAttrComputeCapabilityMinor = 76, cudaDevAttrMaxSharedMemoryPerMultiprocessor = 81,
  cudaDevAttrMaxRegistersPerMultiprocessor = 82, cudaDevAttrMaxSharedMemoryPerBlockOptin = 97,
  cudaDevAttrMaxBlocksPerMultiprocessor = 106
};
struct CUstream_st;
typedef CUstream_st* cudaStream_t;
struct CUevent_st;
typedef CUevent_st* cudaEvent_t;
#define cudaStreamDefault 0x00
#define cudaStreamNonBlocking 0x01
#define cudaStreamLegacy ((cudaStream_t)0x1)
#define cudaStreamPerThread ((cudaStream_t)0x2)
#define cudaEventDefault 0x00
#define cudaEventDisableTiming 0x02
#define cudaHostAllocDefault 0x00
#define cudaMemAttachGlobal 0x01
#define CUDART_VERSION 13000

struct cudaDeviceProp {
  char name[256];
  size_t totalGlobalMem, sharedMemPerBlock;
  int regsPerBlock, warpSize;
  size_t memPitch;
  int maxThreadsPerBlock, maxThreadsDim[3], maxGridSize[3], clockRate;
  size_t totalConstMem;
  int major, minor;
  size_t textureAlignment;
  int multiProcessorCount, integrated, canMapHostMemory, concurrentKernels, ECCEnabled, memoryClockRate,
      memoryBusWidth, l2CacheSize, persistingL2CacheMaxSize, maxThreadsPerMultiProcessor, unifiedAddressing,
      managedMemory, isMultiGpuBoard, cooperativeLaunch;
  size_t sharedMemPerMultiprocessor;
  int regsPerMultiprocessor;
  size_t sharedMemPerBlockOptin, reservedSharedMemPerBlock;
  int maxBlocksPerMultiProcessor, asyncEngineCount, pciBusID, pciDeviceID;
};
struct cudaFuncAttributes {
  size_t sharedSizeBytes, constSizeBytes, localSizeBytes;
  int maxThreadsPerBlock, numRegs, ptxVersion, binaryVersion, cacheModeCA, maxDynamicSharedSizeBytes,
      preferredShmemCarveout;
};

namespace cudaperf_emu {
// Runtime entry points (cudaperf_emu_runtime.h).
cudaError_t set_error(cudaError_t e, const char* message);
cudaError_t get_last_error(bool clear);
void* device_alloc(size_t bytes);
void device_free(void* p);
void func_set_max_dyn_smem(int bytes);
void fill_device_prop(cudaDeviceProp* p);
int device_attribute(int attr);
typedef void (*BlockBody)(void* closure);
cudaError_t launch_impl(const char* name, dim3 grid, dim3 block, size_t smem, int fibers, BlockBody body,
                        void* closure);

template <class F, class... A>
static inline cudaError_t launch(const char* name, dim3 grid, dim3 block, size_t smem, cudaStream_t, int fibers,
                                 F f, A&&... a) {
  struct Closure {
    F f;
    std::tuple<std::decay_t<A>...> args;
  } c{f, std::tuple<std::decay_t<A>...>(std::forward<A>(a)...)};
  return launch_impl(name, grid, block, smem, fibers,
                     [](void* p) { Closure* cl = static_cast<Closure*>(p); std::apply(cl->f, cl->args); }, &c);
}
}  // namespace cudaperf_emu

static inline cudaError_t cudaGetLastError() { return cudaperf_emu::get_last_error(true); }
static inline cudaError_t cudaPeekAtLastError() { return cudaperf_emu::get_last_error(false); }
const char* cudaGetErrorString(cudaError_t e);
const char* cudaGetErrorName(cudaError_t e);
static inline cudaError_t cudaDeviceSynchronize() { return cudaperf_emu::get_last_error(false); }
static inline cudaError_t cudaThreadSynchronize() { return cudaperf_emu::get_last_error(false); }
static inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaperf_emu::get_last_error(false); }
static inline cudaError_t cudaStreamQuery(cudaStream_t) { return cudaSuccess; }
static inline cudaError_t cudaDeviceReset() { return cudaSuccess; }
static inline cudaError_t cudaSetDevice(int d) { return d == 0 ? cudaSuccess : cudaErrorInvalidDevice; }
static inline cudaError_t cudaGetDevice(int* d) { *d = 0; return cudaSuccess; }
static inline cudaError_t cudaGetDeviceCount(int* n) { *n = 1; return cudaSuccess; }
static inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int) { cudaperf_emu::fill_device_prop(p); return cudaSuccess; }
static inline cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr a, int) { *v = cudaperf_emu::device_attribute(a); return cudaSuccess; }
static inline cudaError_t cudaStreamCreate(cudaStream_t* s) { *s = (cudaStream_t)0x10; return cudaSuccess; }
static inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) { *s = (cudaStream_t)0x10; return cudaSuccess; }
static inline cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
static inline cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned = 0) { return cudaSuccess; }
static inline cudaError_t cudaEventCreate(cudaEvent_t* e) { *e = (cudaEvent_t)0x20; return cudaSuccess; }
static inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) { *e = (cudaEvent_t)0x20; return cudaSuccess; }
static inline cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t = 0) { return cudaSuccess; }
static inline cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
static inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t, cudaEvent_t) { *ms = 0.f; return cudaSuccess; }
static inline cudaError_t cudaEventDestroy(cudaEvent_t) { return cudaSuccess; }

static inline cudaError_t cudaMalloc(void** p, size_t n) {
  *p = cudaperf_emu::device_alloc(n);
  return (*p || n == 0) ? cudaSuccess : cudaperf_emu::set_error(cudaErrorMemoryAllocation, "cudaMalloc: out of memory");
}
template <class T> static inline cudaError_t cudaMalloc(T** p, size_t n) { return cudaMalloc(reinterpret_cast<void**>(p), n); }
template <class T> static inline cudaError_t cudaMallocAsync(T** p, size_t n, cudaStream_t) { return cudaMalloc(reinterpret_cast<void**>(p), n); }
template <class T> static inline cudaError_t cudaMallocManaged(T** p, size_t n, unsigned = 1) { return cudaMalloc(reinterpret_cast<void**>(p), n); }
template <class T> static inline cudaError_t cudaMallocHost(T** p, size_t n) { return cudaMalloc(reinterpret_cast<void**>(p), n); }
template <class T> static inline cudaError_t cudaHostAlloc(T** p, size_t n, unsigned) { return cudaMalloc(reinterpret_cast<void**>(p), n); }
static inline cudaError_t cudaFree(void* p) { cudaperf_emu::device_free(p); return cudaSuccess; }
static inline cudaError_t cudaFreeAsync(void* p, cudaStream_t) { cudaperf_emu::device_free(p); return cudaSuccess; }
static inline cudaError_t cudaFreeHost(void* p) { cudaperf_emu::device_free(p); return cudaSuccess; }
static inline cudaError_t cudaMemcpy(void* d, const void* s, size_t n, cudaMemcpyKind) {
  if (n) std::memmove(d, s, n);
  return cudaSuccess;
}
static inline cudaError_t cudaMemcpyAsync(void* d, const void* s, size_t n, cudaMemcpyKind k, cudaStream_t = 0) { return cudaMemcpy(d, s, n, k); }
static inline cudaError_t cudaMemcpy2D(void* d, size_t dp, const void* s, size_t sp, size_t w, size_t h, cudaMemcpyKind) {
  for (size_t r = 0; r < h; ++r) std::memmove((char*)d + r * dp, (const char*)s + r * sp, w);
  return cudaSuccess;
}
static inline cudaError_t cudaMemcpy2DAsync(void* d, size_t dp, const void* s, size_t sp, size_t w, size_t h, cudaMemcpyKind k, cudaStream_t = 0) {
  return cudaMemcpy2D(d, dp, s, sp, w, h, k);
}
static inline cudaError_t cudaMemset(void* p, int v, size_t n) { if (n) std::memset(p, v, n); return cudaSuccess; }
static inline cudaError_t cudaMemsetAsync(void* p, int v, size_t n, cudaStream_t = 0) { return cudaMemset(p, v, n); }
template <class T> static inline cudaError_t cudaMemcpyToSymbol(T& sym, const void* src, size_t n, size_t off = 0,
                                                                 cudaMemcpyKind = cudaMemcpyHostToDevice) {
  if (off + n > sizeof(T)) return cudaperf_emu::set_error(cudaErrorInvalidValue, "cudaMemcpyToSymbol: count+offset exceeds the symbol's size");
  std::memcpy(reinterpret_cast<char*>(&sym) + off, src, n);
  return cudaSuccess;
}
template <class T> static inline cudaError_t cudaMemcpyToSymbolAsync(T& sym, const void* src, size_t n, size_t off = 0,
                                                                      cudaMemcpyKind k = cudaMemcpyHostToDevice, cudaStream_t = 0) {
  return cudaMemcpyToSymbol(sym, src, n, off, k);
}
template <class T> static inline cudaError_t cudaMemcpyFromSymbol(void* dst, const T& sym, size_t n, size_t off = 0,
                                                                   cudaMemcpyKind = cudaMemcpyDeviceToHost) {
  if (off + n > sizeof(T)) return cudaperf_emu::set_error(cudaErrorInvalidValue, "cudaMemcpyFromSymbol: count+offset exceeds the symbol's size");
  std::memcpy(dst, reinterpret_cast<const char*>(&sym) + off, n);
  return cudaSuccess;
}
template <class T> static inline cudaError_t cudaGetSymbolAddress(void** p, T& sym) { *p = (void*)&sym; return cudaSuccess; }

template <class F> static inline cudaError_t cudaFuncSetAttribute(F*, cudaFuncAttribute a, int v) {
  if (a == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    if (v < 0 || v > 232448) return cudaperf_emu::set_error(cudaErrorInvalidValue, "cudaFuncSetAttribute: MaxDynamicSharedMemorySize above 232448 bytes (227 KiB)");
    cudaperf_emu::func_set_max_dyn_smem(v);
  }
  return cudaSuccess;
}
template <class F> static inline cudaError_t cudaFuncSetCacheConfig(F*, cudaFuncCache) { return cudaSuccess; }
template <class F> static inline cudaError_t cudaFuncSetSharedMemConfig(F*, cudaSharedMemConfig) { return cudaSuccess; }
static inline cudaError_t cudaDeviceSetCacheConfig(cudaFuncCache) { return cudaSuccess; }
static inline cudaError_t cudaDeviceSetSharedMemConfig(cudaSharedMemConfig) { return cudaSuccess; }
template <class F> static inline cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* a, F*) {
  std::memset(a, 0, sizeof(*a)); a->maxThreadsPerBlock = 1024; a->numRegs = 32; a->ptxVersion = 90;
  a->binaryVersion = 90; a->maxDynamicSharedSizeBytes = 49152; return cudaSuccess;
}
// Occupancy queries answer with the sm_90 limits for a kernel of 32 registers per thread.
static inline int cudaperf_emu_blocks_per_sm(int block, size_t smem) {
  if (block <= 0 || block > 1024) return 0;
  int warps = (block + 31) / 32, by_threads = 64 / warps, by_regs = 65536 / (warps * 32 * 32);
  int by_smem = smem ? (int)(233472 / (smem + 1024)) : 32;
  int r = by_threads < by_regs ? by_threads : by_regs; r = r < by_smem ? r : by_smem; return r < 32 ? r : 32;
}
template <class F> static inline cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* n, F*, int block, size_t smem) {
  *n = cudaperf_emu_blocks_per_sm(block, smem); return cudaSuccess;
}
template <class F> static inline cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int* n, F* f, int block, size_t smem, unsigned) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(n, f, block, smem);
}
template <class F> static inline cudaError_t cudaOccupancyMaxPotentialBlockSize(int* min_grid, int* block, F*, size_t smem = 0, int limit = 0) {
  int best = 32, best_occ = 0;
  for (int b = 32; b <= (limit > 0 ? limit : 1024); b += 32) {
    int occ = cudaperf_emu_blocks_per_sm(b, smem) * b;
    if (occ >= best_occ) { best_occ = occ; best = b; }
  }
  *block = best; *min_grid = cudaperf_emu_blocks_per_sm(best, smem) * 132; return cudaSuccess;
}
