// cudaperf CPU emulation: what device code sees. Built-in variables, barriers and warp collectives
// (served by the fiber scheduler in cudaperf_emu_runtime.h), atomics, memory fences, cache-hinted loads,
// and the integer/float intrinsics of the CUDA math library.
#pragma once
#include <climits>
#include <cmath>
#include <math.h>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <type_traits>

namespace cudaperf_emu {
// The state of the emulated GPU thread that is running on this OS thread right now.
struct ThreadCtx {
  uint3 tid;
  uint3 bid;
  dim3 bdim;
  dim3 gdim;
};
}  // namespace cudaperf_emu
extern __thread cudaperf_emu::ThreadCtx* cudaperf_emu_cur;

#define threadIdx (static_cast<const uint3&>(cudaperf_emu_cur->tid))
#define blockIdx (static_cast<const uint3&>(cudaperf_emu_cur->bid))
#define blockDim (static_cast<const dim3&>(cudaperf_emu_cur->bdim))
#define gridDim (static_cast<const dim3&>(cudaperf_emu_cur->gdim))
static constexpr int warpSize = 32;

// ---- barriers and warp collectives (implemented by the runtime) --------------------------------
namespace cudaperf_emu {
enum WarpOp { kWarpSync = 0, kShflIdx, kShflUp, kShflDown, kShflXor, kBallot, kMatchAny, kReduceAdd,
              kReduceMin, kReduceMax, kReduceUMin, kReduceUMax, kReduceAnd, kReduceOr, kReduceXor, kLockstep };
enum BarOp { kBarPlain = 0, kBarCount, kBarAnd, kBarOr };
int block_barrier(int op, int predicate);
uint64_t warp_collective(int op, unsigned mask, uint64_t value, int param, int width);
unsigned active_mask();
void trap(const char* what);
void* dyn_smem();
void* register_shared(size_t bytes);
// Static shared memory of one declaration site (ID) and type: a heap block per host thread, so that
// AddressSanitizer sees overflows; the runtime refills it with 0xFF bytes before each block.
template <class A, int ID> static inline A& shared_var() {
  static thread_local A* p = nullptr;
  if (__builtin_expect(p == nullptr, 0)) p = static_cast<A*>(register_shared(sizeof(A)));
  return *p;
}
template <class T> static inline uint64_t to_bits(const T& v) {
  static_assert(sizeof(T) <= 8, "warp shuffles move at most 8 bytes");
  uint64_t b = 0; std::memcpy(&b, &v, sizeof(T)); return b;
}
template <class T> static inline T from_bits(uint64_t b) { T v; std::memcpy(&v, &b, sizeof(T)); return v; }
}  // namespace cudaperf_emu

static inline void __syncthreads() { cudaperf_emu::block_barrier(cudaperf_emu::kBarPlain, 1); }
static inline int __syncthreads_count(int p) { return cudaperf_emu::block_barrier(cudaperf_emu::kBarCount, p != 0); }
static inline int __syncthreads_and(int p) { return cudaperf_emu::block_barrier(cudaperf_emu::kBarAnd, p != 0); }
static inline int __syncthreads_or(int p) { return cudaperf_emu::block_barrier(cudaperf_emu::kBarOr, p != 0); }
static inline void __syncwarp(unsigned mask = 0xffffffffu) {
  cudaperf_emu::warp_collective(cudaperf_emu::kWarpSync, mask, 0, 0, 32);
}
template <class T> static inline T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  return cudaperf_emu::from_bits<T>(cudaperf_emu::warp_collective(cudaperf_emu::kShflIdx, mask, cudaperf_emu::to_bits(v), src, width));
}
template <class T> static inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  return cudaperf_emu::from_bits<T>(cudaperf_emu::warp_collective(cudaperf_emu::kShflUp, mask, cudaperf_emu::to_bits(v), (int)delta, width));
}
template <class T> static inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  return cudaperf_emu::from_bits<T>(cudaperf_emu::warp_collective(cudaperf_emu::kShflDown, mask, cudaperf_emu::to_bits(v), (int)delta, width));
}
template <class T> static inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  return cudaperf_emu::from_bits<T>(cudaperf_emu::warp_collective(cudaperf_emu::kShflXor, mask, cudaperf_emu::to_bits(v), lane_mask, width));
}
static inline unsigned __ballot_sync(unsigned mask, int p) {
  return (unsigned)cudaperf_emu::warp_collective(cudaperf_emu::kBallot, mask, p != 0, 0, 32);
}
static inline int __any_sync(unsigned mask, int p) { return __ballot_sync(mask, p) != 0; }
static inline int __all_sync(unsigned mask, int p) { return __ballot_sync(mask, p) == (__ballot_sync(mask, 1)); }
static inline int __uni_sync(unsigned mask, int p) { unsigned b = __ballot_sync(mask, p); return b == 0 || b == __ballot_sync(mask, 1); }
static inline unsigned __activemask() { return cudaperf_emu::active_mask(); }
template <class T> static inline unsigned __match_any_sync(unsigned mask, T v) {
  return (unsigned)cudaperf_emu::warp_collective(cudaperf_emu::kMatchAny, mask, cudaperf_emu::to_bits(v), 0, 32);
}
#define CUDAPERF_EMU_REDUCE(NAME, T, OP)                                                           \
  static inline T NAME(unsigned mask, T v) {                                                      \
    return (T)cudaperf_emu::warp_collective(cudaperf_emu::OP, mask, (uint64_t)(uint32_t)v, 0, 32); \
  }
CUDAPERF_EMU_REDUCE(__reduce_add_sync, int, kReduceAdd)
CUDAPERF_EMU_REDUCE(__reduce_add_sync, unsigned, kReduceAdd)
CUDAPERF_EMU_REDUCE(__reduce_min_sync, int, kReduceMin)
CUDAPERF_EMU_REDUCE(__reduce_min_sync, unsigned, kReduceUMin)
CUDAPERF_EMU_REDUCE(__reduce_max_sync, int, kReduceMax)
CUDAPERF_EMU_REDUCE(__reduce_max_sync, unsigned, kReduceUMax)
CUDAPERF_EMU_REDUCE(__reduce_and_sync, unsigned, kReduceAnd)
CUDAPERF_EMU_REDUCE(__reduce_or_sync, unsigned, kReduceOr)
CUDAPERF_EMU_REDUCE(__reduce_xor_sync, unsigned, kReduceXor)
#undef CUDAPERF_EMU_REDUCE
static inline unsigned __lanemask_lt() { return (1u << (cudaperf_emu_cur->tid.x + cudaperf_emu_cur->bdim.x *
    (cudaperf_emu_cur->tid.y + cudaperf_emu_cur->bdim.y * cudaperf_emu_cur->tid.z)) % 32) - 1u; }
[[noreturn]] static inline void __trap() { cudaperf_emu::trap("__trap() was called"); __builtin_unreachable(); }
static inline void __brkpt() {}
static inline void __nanosleep(unsigned) {}
static inline long long clock64() {
#if defined(__x86_64__) || defined(__i386__)
  return (long long)__builtin_ia32_rdtsc();
#else
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
#endif
}

// ---- memory: fences, atomics, cache-hinted loads ------------------------------------------------
static inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
template <class T> static inline T __ldg(const T* p) { return *p; }
template <class T> static inline T __ldcg(const T* p) { return *p; }
template <class T> static inline T __ldca(const T* p) { return *p; }
template <class T> static inline T __ldcs(const T* p) { return *p; }
template <class T> static inline T __ldlu(const T* p) { return *p; }
template <class T> static inline T __ldcv(const T* p) { return *p; }
template <class T> static inline void __stcg(T* p, T v) { *p = v; }
template <class T> static inline void __stcs(T* p, T v) { *p = v; }
template <class T> static inline void __stwb(T* p, T v) { *p = v; }
template <class T> static inline void __stwt(T* p, T v) { *p = v; }

#define CUDAPERF_EMU_INT_ATOMICS(T)                                                                 \
  static inline T atomicAdd(T* p, T v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }     \
  static inline T atomicSub(T* p, T v) { return __atomic_fetch_sub(p, v, __ATOMIC_SEQ_CST); }     \
  static inline T atomicExch(T* p, T v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }   \
  static inline T atomicAnd(T* p, T v) { return __atomic_fetch_and(p, v, __ATOMIC_SEQ_CST); }     \
  static inline T atomicOr(T* p, T v) { return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }       \
  static inline T atomicXor(T* p, T v) { return __atomic_fetch_xor(p, v, __ATOMIC_SEQ_CST); }     \
  static inline T atomicCAS(T* p, T cmp, T v) {                                                   \
    __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); return cmp; \
  }                                                                                               \
  static inline T atomicMin(T* p, T v) {                                                          \
    T old = __atomic_load_n(p, __ATOMIC_SEQ_CST);                                                 \
    while (v < old && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {} \
    return old;                                                                                   \
  }                                                                                               \
  static inline T atomicMax(T* p, T v) {                                                          \
    T old = __atomic_load_n(p, __ATOMIC_SEQ_CST);                                                 \
    while (v > old && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {} \
    return old;                                                                                   \
  }
CUDAPERF_EMU_INT_ATOMICS(int)
CUDAPERF_EMU_INT_ATOMICS(unsigned int)
CUDAPERF_EMU_INT_ATOMICS(long long)
CUDAPERF_EMU_INT_ATOMICS(unsigned long long)
#undef CUDAPERF_EMU_INT_ATOMICS
static inline unsigned short atomicCAS(unsigned short* p, unsigned short cmp, unsigned short v) {
  __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); return cmp;
}
static inline unsigned atomicInc(unsigned* p, unsigned limit) {
  unsigned old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
  while (!__atomic_compare_exchange_n(p, &old, old >= limit ? 0u : old + 1u, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {}
  return old;
}
static inline unsigned atomicDec(unsigned* p, unsigned limit) {
  unsigned old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
  while (!__atomic_compare_exchange_n(p, &old, (old == 0u || old > limit) ? limit : old - 1u, true,
                                      __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {}
  return old;
}
namespace cudaperf_emu {
template <class F, class U, class Fn> static inline F atomic_float_rmw(F* p, Fn fn) {
  U* q = reinterpret_cast<U*>(p);
  U old = __atomic_load_n(q, __ATOMIC_SEQ_CST);
  for (;;) {
    F f; std::memcpy(&f, &old, sizeof(F));
    F n = fn(f); U nu; std::memcpy(&nu, &n, sizeof(F));
    if (__atomic_compare_exchange_n(q, &old, nu, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) return f;
  }
}
}  // namespace cudaperf_emu
static inline float atomicAdd(float* p, float v) { return cudaperf_emu::atomic_float_rmw<float, uint32_t>(p, [v](float a) { return a + v; }); }
static inline double atomicAdd(double* p, double v) { return cudaperf_emu::atomic_float_rmw<double, uint64_t>(p, [v](double a) { return a + v; }); }
static inline float atomicExch(float* p, float v) { return cudaperf_emu::atomic_float_rmw<float, uint32_t>(p, [v](float) { return v; }); }
static inline float atomicMax(float* p, float v) { return cudaperf_emu::atomic_float_rmw<float, uint32_t>(p, [v](float a) { return fmaxf(a, v); }); }
static inline float atomicMin(float* p, float v) { return cudaperf_emu::atomic_float_rmw<float, uint32_t>(p, [v](float a) { return fminf(a, v); }); }
static inline __half atomicAdd(__half* p, __half v) {
  unsigned short* q = &p->__x;
  unsigned short old = __atomic_load_n(q, __ATOMIC_SEQ_CST);
  for (;;) {
    __half h = __ushort_as_half(old);
    unsigned short n = __hadd(h, v).__x;
    if (__atomic_compare_exchange_n(q, &old, n, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) return h;
  }
}
static inline __half2 atomicAdd(__half2* p, __half2 v) {
  uint32_t* q = reinterpret_cast<uint32_t*>(p);
  uint32_t old = __atomic_load_n(q, __ATOMIC_SEQ_CST);
  for (;;) {
    __half2 h; std::memcpy(&h, &old, 4);
    __half2 n = __hadd2(h, v); uint32_t nu; std::memcpy(&nu, &n, 4);
    if (__atomic_compare_exchange_n(q, &old, nu, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) return h;
  }
}
#define atomicAdd_block atomicAdd
#define atomicAdd_system atomicAdd
#define atomicMax_block atomicMax
#define atomicMin_block atomicMin
#define atomicExch_block atomicExch
#define atomicCAS_block atomicCAS

// ---- integer and bit intrinsics -----------------------------------------------------------------
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
static inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
static inline unsigned __brev(unsigned x) {
  x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1); x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
  x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4); return __builtin_bswap32(x);
}
static inline unsigned long long __brevll(unsigned long long x) {
  return ((unsigned long long)__brev((unsigned)x) << 32) | __brev((unsigned)(x >> 32));
}
static inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  uint64_t v = ((uint64_t)y << 32) | x; unsigned r = 0;
  for (int i = 0; i < 4; ++i) r |= (unsigned)((v >> (8 * ((s >> (4 * i)) & 7))) & 0xff) << (8 * i);
  return r;
}
static inline int __mul24(int a, int b) { return (int)((long long)((a << 8) >> 8) * ((b << 8) >> 8)); }
static inline unsigned __umul24(unsigned a, unsigned b) { return (a & 0xffffffu) * (b & 0xffffffu); }
static inline int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
static inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
static inline long long __mul64hi(long long a, long long b) { return (long long)(((__int128)a * b) >> 64); }
static inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
static inline unsigned __sad(int a, int b, unsigned c) { return c + (unsigned)(a > b ? a - b : b - a); }
static inline unsigned __usad(unsigned a, unsigned b, unsigned c) { return c + (a > b ? a - b : b - a); }
static inline int __hadd(int a, int b) { return (int)(((long long)a + b) >> 1); }
static inline int __rhadd(int a, int b) { return (int)(((long long)a + b + 1) >> 1); }
static inline unsigned __funnelshift_l(unsigned lo, unsigned hi, unsigned s) {
  return (unsigned)((((uint64_t)hi << 32) | lo) << (s & 31) >> 32);
}
static inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned s) {
  return (unsigned)((((uint64_t)hi << 32) | lo) >> (s & 31));
}
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
static inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
static inline unsigned min(int a, unsigned b) { return min((unsigned)a, b); }
static inline unsigned min(unsigned a, int b) { return min(a, (unsigned)b); }
static inline unsigned max(int a, unsigned b) { return max((unsigned)a, b); }
static inline unsigned max(unsigned a, int b) { return max(a, (unsigned)b); }
static inline long long min(long long a, long long b) { return a < b ? a : b; }
static inline long long max(long long a, long long b) { return a > b ? a : b; }
static inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
static inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
static inline float min(float a, float b) { return fminf(a, b); }
static inline float max(float a, float b) { return fmaxf(a, b); }
static inline double min(double a, double b) { return fmin(a, b); }
static inline double max(double a, double b) { return fmax(a, b); }
static inline float min(float a, double b) { return fminf(a, (float)b); }

// ---- float intrinsics ---------------------------------------------------------------------------
static inline float __int_as_float(int x) { float f; std::memcpy(&f, &x, 4); return f; }
static inline int __float_as_int(float x) { int i; std::memcpy(&i, &x, 4); return i; }
static inline float __uint_as_float(unsigned x) { float f; std::memcpy(&f, &x, 4); return f; }
static inline unsigned __float_as_uint(float x) { unsigned i; std::memcpy(&i, &x, 4); return i; }
static inline double __longlong_as_double(long long x) { double f; std::memcpy(&f, &x, 8); return f; }
static inline long long __double_as_longlong(double x) { long long i; std::memcpy(&i, &x, 8); return i; }
static inline int __double2hiint(double d) { return (int)(__double_as_longlong(d) >> 32); }
static inline int __double2loint(double d) { return (int)__double_as_longlong(d); }
static inline double __hiloint2double(int hi, int lo) {
  return __longlong_as_double((long long)(((unsigned long long)(unsigned)hi << 32) | (unsigned)lo));
}
inline float __expf(float x) noexcept { return expf(x); }
inline float __exp10f(float x) noexcept { return exp10f(x); }
inline float __logf(float x) noexcept { return logf(x); }
inline float __log2f(float x) noexcept { return log2f(x); }
inline float __log10f(float x) noexcept { return log10f(x); }
inline float __sinf(float x) noexcept { return sinf(x); }
inline float __cosf(float x) noexcept { return cosf(x); }
inline float __tanf(float x) noexcept { return tanf(x); }
inline void __sincosf(float x, float* s, float* c) noexcept { *s = sinf(x); *c = cosf(x); }
inline float __powf(float x, float y) noexcept { return powf(x, y); }
static inline float __fdividef(float a, float b) { return a / b; }
static inline float fdividef(float a, float b) { return a / b; }
static inline double fdivide(double a, double b) { return a / b; }
static inline float __saturatef(float x) { return x != x ? 0.f : (x < 0.f ? 0.f : (x > 1.f ? 1.f : x)); }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
static inline float rcbrtf(float x) { return 1.0f / cbrtf(x); }
static inline double rcbrt(double x) { return 1.0 / cbrt(x); }
static inline float __frsqrt_rn(float x) { return 1.0f / sqrtf(x); }
static inline float __fsqrt_rn(float x) { return sqrtf(x); }
static inline double __dsqrt_rn(double x) { return sqrt(x); }
static inline float __frcp_rn(float x) { return 1.0f / x; }
static inline double __drcp_rn(double x) { return 1.0 / x; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fadd_rz(float a, float b) { return a + b; }
static inline float __fmul_rz(float a, float b) { return a * b; }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline float __fmaf_rz(float a, float b, float c) { return fmaf(a, b, c); }
static inline double __fma_rn(double a, double b, double c) { return fma(a, b, c); }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dsub_rn(double a, double b) { return a - b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __ddiv_rn(double a, double b) { return a / b; }
static inline float normcdff(float x) { return 0.5f * erfcf(-x * 0.70710678118654752f); }
static inline double normcdf(double x) { return 0.5 * erfc(-x * 0.70710678118654752); }
static inline float sinpif(float x) { return sinf(3.14159265358979323846f * x); }
static inline float cospif(float x) { return cosf(3.14159265358979323846f * x); }
static inline double sinpi(double x) { return sin(3.14159265358979323846 * x); }
static inline double cospi(double x) { return cos(3.14159265358979323846 * x); }
static inline void sincospif(float x, float* s, float* c) { *s = sinpif(x); *c = cospif(x); }
static inline int __float2int_rn(float x) { return (int)nearbyintf(x); }
static inline int __float2int_rz(float x) { return (int)truncf(x); }
static inline int __float2int_rd(float x) { return (int)floorf(x); }
static inline int __float2int_ru(float x) { return (int)ceilf(x); }
static inline unsigned __float2uint_rn(float x) { return (unsigned)nearbyintf(x); }
static inline unsigned __float2uint_rz(float x) { return (unsigned)truncf(x); }
static inline long long __float2ll_rn(float x) { return (long long)nearbyintf(x); }
static inline long long __float2ll_rz(float x) { return (long long)truncf(x); }
static inline int __double2int_rn(double x) { return (int)nearbyint(x); }
static inline int __double2int_rz(double x) { return (int)trunc(x); }
static inline float __double2float_rn(double x) { return (float)x; }
static inline float __int2float_rn(int x) { return (float)x; }
static inline float __uint2float_rn(unsigned x) { return (float)x; }
static inline double __int2double_rn(int x) { return (double)x; }
static inline float __ll2float_rn(long long x) { return (float)x; }
