// cudaperf CPU emulation: dim3, uint3 and the CUDA vector types (same sizes and alignments as CUDA).
#pragma once
#include <cstddef>
#include <cstdint>

#define __align__(n) __attribute__((aligned(n)))

struct uint3 { unsigned int x, y, z; };

struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return uint3{x, y, z}; }
};

#define CUDAPERF_EMU_VEC(T, N, A1, A2, A3, A4)                                                        \
  struct __align__(A1) N##1 { T x; };                                                              \
  struct __align__(A2) N##2 { T x, y; };                                                           \
  struct __align__(A3) N##3 { T x, y, z; };                                                        \
  struct __align__(A4) N##4 { T x, y, z, w; };                                                     \
  static inline N##1 make_##N##1(T x) { N##1 r; r.x = x; return r; }                               \
  static inline N##2 make_##N##2(T x, T y) { N##2 r; r.x = x; r.y = y; return r; }                 \
  static inline N##3 make_##N##3(T x, T y, T z) { N##3 r; r.x = x; r.y = y; r.z = z; return r; }  \
  static inline N##4 make_##N##4(T x, T y, T z, T w) {                                             \
    N##4 r; r.x = x; r.y = y; r.z = z; r.w = w; return r;                                          \
  }

CUDAPERF_EMU_VEC(signed char, char, 1, 2, 1, 4)
CUDAPERF_EMU_VEC(unsigned char, uchar, 1, 2, 1, 4)
CUDAPERF_EMU_VEC(short, short, 2, 4, 2, 8)
CUDAPERF_EMU_VEC(unsigned short, ushort, 2, 4, 2, 8)
CUDAPERF_EMU_VEC(int, int, 4, 8, 4, 16)
CUDAPERF_EMU_VEC(long, long, 8, 16, 8, 16)
CUDAPERF_EMU_VEC(unsigned long, ulong, 8, 16, 8, 16)
CUDAPERF_EMU_VEC(long long, longlong, 8, 16, 8, 16)
CUDAPERF_EMU_VEC(unsigned long long, ulonglong, 8, 16, 8, 16)
CUDAPERF_EMU_VEC(float, float, 4, 8, 4, 16)
CUDAPERF_EMU_VEC(double, double, 8, 16, 8, 16)
#undef CUDAPERF_EMU_VEC

// uint1..uint4 are declared apart because uint3 (above) is also the type of threadIdx.
struct __align__(4) uint1 { unsigned int x; };
struct __align__(8) uint2 { unsigned int x, y; };
struct __align__(16) uint4 { unsigned int x, y, z, w; };
static inline uint1 make_uint1(unsigned int x) { uint1 r; r.x = x; return r; }
static inline uint2 make_uint2(unsigned int x, unsigned int y) { uint2 r; r.x = x; r.y = y; return r; }
static inline uint3 make_uint3(unsigned int x, unsigned int y, unsigned int z) { return uint3{x, y, z}; }
static inline uint4 make_uint4(unsigned int x, unsigned int y, unsigned int z, unsigned int w) {
  uint4 r; r.x = x; r.y = y; r.z = z; r.w = w; return r;
}

static_assert(sizeof(float4) == 16 && alignof(float4) == 16, "float4 layout");
static_assert(sizeof(float3) == 12 && alignof(float3) == 4, "float3 layout");
static_assert(sizeof(double2) == 16 && alignof(double2) == 16, "double2 layout");
static_assert(sizeof(int2) == 8 && alignof(int2) == 8, "int2 layout");
