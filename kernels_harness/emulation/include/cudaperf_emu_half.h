// cudaperf CPU emulation: __half and __nv_bfloat16 (bit-exact round-to-nearest-even conversions;
// each arithmetic operation is computed in float and rounded once, which is exact for + - * / sqrt).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

namespace cudaperf_emu {
static inline uint32_t f2u(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
static inline float u2f(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

static inline unsigned short float_to_half_bits(float fin) {
  uint32_t f = f2u(fin);
  const uint32_t sign = f & 0x80000000u;
  f ^= sign;
  unsigned short o;
  if (f >= (127u + 16u) << 23) {                 // overflow, inf or nan
    o = (f > (255u << 23)) ? 0x7e00 : 0x7c00;
  } else if (f < (113u << 23)) {                 // subnormal half or zero
    const uint32_t magic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
    o = (unsigned short)(f2u(u2f(f) + u2f(magic)) - magic);
  } else {
    const uint32_t mant_odd = (f >> 13) & 1u;
    f += (uint32_t)((15 - 127) * (1 << 23)) + 0xfffu;
    f += mant_odd;
    o = (unsigned short)(f >> 13);
  }
  return (unsigned short)(o | (sign >> 16));
}

static inline float half_bits_to_float(unsigned short h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) {
    float v = (float)m * 5.9604644775390625e-8f;  // m * 2^-24
    return sign ? -v : v;
  }
  if (e == 31) return u2f(sign | 0x7f800000u | (m << 13));
  return u2f(sign | ((e + 112u) << 23) | (m << 13));
}

static inline unsigned short float_to_bf16_bits(float f) {
  uint32_t u = f2u(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)(((u >> 16) & 0x8000u) | 0x7fffu);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (unsigned short)(u >> 16);
}
static inline float bf16_bits_to_float(unsigned short b) { return u2f((uint32_t)b << 16); }
}  // namespace cudaperf_emu

struct __half_raw { unsigned short x; };
struct __nv_bfloat16_raw { unsigned short x; };

#define CUDAPERF_EMU_HALF_CLASS(H, RAW, TOF, FROMF)                                                 \
  struct __align__(2) H {                                                                          \
    unsigned short __x;                                                                            \
    H() = default;                                                                                 \
    H(const RAW& r) : __x(r.x) {}                                                                  \
    H(float f) : __x(cudaperf_emu::FROMF(f)) {}                                                    \
    H(double f) : __x(cudaperf_emu::FROMF((float)f)) {}                                            \
    H(short v) : __x(cudaperf_emu::FROMF((float)v)) {}                                             \
    H(unsigned short v) : __x(cudaperf_emu::FROMF((float)v)) {}                                    \
    H(int v) : __x(cudaperf_emu::FROMF((float)v)) {}                                               \
    H(unsigned int v) : __x(cudaperf_emu::FROMF((float)v)) {}                                      \
    H(long long v) : __x(cudaperf_emu::FROMF((float)v)) {}                                         \
    H(unsigned long long v) : __x(cudaperf_emu::FROMF((float)v)) {}                                \
    operator float() const { return cudaperf_emu::TOF(__x); }                                      \
    operator RAW() const { RAW r; r.x = __x; return r; }                                           \
    H& operator=(float f) { __x = cudaperf_emu::FROMF(f); return *this; }                          \
    H& operator=(double f) { __x = cudaperf_emu::FROMF((float)f); return *this; }                  \
    H& operator=(const RAW& r) { __x = r.x; return *this; }                                        \
  };                                                                                               \
  static inline H operator+(const H& a, const H& b) { return H((float)a + (float)b); }             \
  static inline H operator-(const H& a, const H& b) { return H((float)a - (float)b); }             \
  static inline H operator*(const H& a, const H& b) { return H((float)a * (float)b); }             \
  static inline H operator/(const H& a, const H& b) { return H((float)a / (float)b); }             \
  static inline H& operator+=(H& a, const H& b) { a = a + b; return a; }                           \
  static inline H& operator-=(H& a, const H& b) { a = a - b; return a; }                           \
  static inline H& operator*=(H& a, const H& b) { a = a * b; return a; }                           \
  static inline H& operator/=(H& a, const H& b) { a = a / b; return a; }                           \
  static inline H operator-(const H& a) { H r; r.__x = (unsigned short)(a.__x ^ 0x8000u); return r; } \
  static inline H operator+(const H& a) { return a; }                                              \
  static inline bool operator==(const H& a, const H& b) { return (float)a == (float)b; }           \
  static inline bool operator!=(const H& a, const H& b) { return (float)a != (float)b; }           \
  static inline bool operator<(const H& a, const H& b) { return (float)a < (float)b; }             \
  static inline bool operator>(const H& a, const H& b) { return (float)a > (float)b; }             \
  static inline bool operator<=(const H& a, const H& b) { return (float)a <= (float)b; }           \
  static inline bool operator>=(const H& a, const H& b) { return (float)a >= (float)b; }

CUDAPERF_EMU_HALF_CLASS(__half, __half_raw, half_bits_to_float, float_to_half_bits)
CUDAPERF_EMU_HALF_CLASS(__nv_bfloat16, __nv_bfloat16_raw, bf16_bits_to_float, float_to_bf16_bits)
#undef CUDAPERF_EMU_HALF_CLASS
typedef __half half;
typedef __nv_bfloat16 nv_bfloat16;

struct __align__(4) __half2 {
  __half x, y;
  __half2() = default;
  __half2(const __half& a, const __half& b) : x(a), y(b) {}
};
struct __align__(4) __nv_bfloat162 {
  __nv_bfloat16 x, y;
  __nv_bfloat162() = default;
  __nv_bfloat162(const __nv_bfloat16& a, const __nv_bfloat16& b) : x(a), y(b) {}
};
typedef __half2 half2;
typedef __nv_bfloat162 nv_bfloat162;

// ---- conversions -------------------------------------------------------------------------------
static inline __half __float2half(float f) { return __half(f); }
static inline __half __float2half_rn(float f) { return __half(f); }
static inline __half __double2half(double d) { return __half((float)d); }
static inline float __half2float(__half h) { return (float)h; }
static inline __half __int2half_rn(int v) { return __half((float)v); }
static inline __half __uint2half_rn(unsigned v) { return __half((float)v); }
static inline int __half2int_rn(__half h) { return (int)std::nearbyint((float)h); }
static inline int __half2int_rz(__half h) { return (int)(float)h; }
static inline unsigned short __half_as_ushort(__half h) { return h.__x; }
static inline short __half_as_short(__half h) { return (short)h.__x; }
static inline __half __ushort_as_half(unsigned short u) { __half h; h.__x = u; return h; }
static inline __half __short_as_half(short u) { __half h; h.__x = (unsigned short)u; return h; }
static inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
static inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
static inline __nv_bfloat16 __double2bfloat16(double d) { return __nv_bfloat16((float)d); }
static inline float __bfloat162float(__nv_bfloat16 h) { return (float)h; }
static inline __nv_bfloat16 __int2bfloat16_rn(int v) { return __nv_bfloat16((float)v); }
static inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.__x; }
static inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) { __nv_bfloat16 h; h.__x = u; return h; }
static inline __half2 __halves2half2(__half a, __half b) { return __half2(a, b); }
static inline __half2 __half2half2(__half a) { return __half2(a, a); }
static inline __half2 __floats2half2_rn(float a, float b) { return __half2(__half(a), __half(b)); }
static inline __half2 __float2half2_rn(float a) { return __half2(__half(a), __half(a)); }
static inline __half2 __float22half2_rn(float2 f) { return __half2(__half(f.x), __half(f.y)); }
static inline float2 __half22float2(__half2 h) { return make_float2((float)h.x, (float)h.y); }
static inline __half __low2half(__half2 h) { return h.x; }
static inline __half __high2half(__half2 h) { return h.y; }
static inline float __low2float(__half2 h) { return (float)h.x; }
static inline float __high2float(__half2 h) { return (float)h.y; }
static inline __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat162(a, b); }
static inline __nv_bfloat162 __bfloat162bfloat162(__nv_bfloat16 a) { return __nv_bfloat162(a, a); }
static inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) {
  return __nv_bfloat162(__nv_bfloat16(a), __nv_bfloat16(b));
}
static inline __nv_bfloat162 __float2bfloat162_rn(float a) { return __nv_bfloat162(__nv_bfloat16(a), __nv_bfloat16(a)); }
static inline __nv_bfloat162 __float22bfloat162_rn(float2 f) {
  return __nv_bfloat162(__nv_bfloat16(f.x), __nv_bfloat16(f.y));
}
static inline float2 __bfloat1622float2(__nv_bfloat162 h) { return make_float2((float)h.x, (float)h.y); }
static inline __nv_bfloat16 __low2bfloat16(__nv_bfloat162 h) { return h.x; }
static inline __nv_bfloat16 __high2bfloat16(__nv_bfloat162 h) { return h.y; }
static inline float __low2float(__nv_bfloat162 h) { return (float)h.x; }
static inline float __high2float(__nv_bfloat162 h) { return (float)h.y; }

// ---- arithmetic and math, for both 16-bit types ------------------------------------------------
#define CUDAPERF_EMU_HALF_OPS(H, H2)                                                                \
  static inline H __hadd(H a, H b) { return H((float)a + (float)b); }                             \
  static inline H __hsub(H a, H b) { return H((float)a - (float)b); }                             \
  static inline H __hmul(H a, H b) { return H((float)a * (float)b); }                             \
  static inline H __hdiv(H a, H b) { return H((float)a / (float)b); }                             \
  static inline H __hadd_rn(H a, H b) { return __hadd(a, b); }                                    \
  static inline H __hmul_rn(H a, H b) { return __hmul(a, b); }                                    \
  static inline H __hadd_sat(H a, H b) { float r = (float)a + (float)b; return H(r < 0.f ? 0.f : (r > 1.f ? 1.f : r)); } \
  static inline H __hfma(H a, H b, H c) { return H((float)((double)(float)a * (float)b + (float)c)); } \
  static inline H __hneg(H a) { return -a; }                                                      \
  static inline H __habs(H a) { H r = a; r.__x &= 0x7fff; return r; }                              \
  static inline H __hmax(H a, H b) { return (float)a >= (float)b || b != b ? a : b; }             \
  static inline H __hmin(H a, H b) { return (float)a <= (float)b || b != b ? a : b; }             \
  static inline bool __heq(H a, H b) { return (float)a == (float)b; }                             \
  static inline bool __hne(H a, H b) { return (float)a != (float)b; }                             \
  static inline bool __hlt(H a, H b) { return (float)a < (float)b; }                              \
  static inline bool __hle(H a, H b) { return (float)a <= (float)b; }                             \
  static inline bool __hgt(H a, H b) { return (float)a > (float)b; }                              \
  static inline bool __hge(H a, H b) { return (float)a >= (float)b; }                             \
  static inline bool __hisnan(H a) { return std::isnan((float)a); }                               \
  static inline int __hisinf(H a) { float f = (float)a; return std::isinf(f) ? (f > 0 ? 1 : -1) : 0; } \
  static inline H hexp(H a) { return H(std::exp((float)a)); }                                      \
  static inline H hexp2(H a) { return H(std::exp2((float)a)); }                                    \
  static inline H hlog(H a) { return H(std::log((float)a)); }                                      \
  static inline H hlog2(H a) { return H(std::log2((float)a)); }                                    \
  static inline H hsqrt(H a) { return H(std::sqrt((float)a)); }                                   \
  static inline H hrsqrt(H a) { return H(1.0f / std::sqrt((float)a)); }                            \
  static inline H hrcp(H a) { return H(1.0f / (float)a); }                                         \
  static inline H hsin(H a) { return H(std::sin((float)a)); }                                      \
  static inline H hcos(H a) { return H(std::cos((float)a)); }                                      \
  static inline H htanh(H a) { return H(std::tanh((float)a)); }                                    \
  static inline H hfloor(H a) { return H(std::floor((float)a)); }                                  \
  static inline H hceil(H a) { return H(std::ceil((float)a)); }                                    \
  static inline H2 __hadd2(H2 a, H2 b) { return H2(__hadd(a.x, b.x), __hadd(a.y, b.y)); }          \
  static inline H2 __hsub2(H2 a, H2 b) { return H2(__hsub(a.x, b.x), __hsub(a.y, b.y)); }          \
  static inline H2 __hmul2(H2 a, H2 b) { return H2(__hmul(a.x, b.x), __hmul(a.y, b.y)); }          \
  static inline H2 __h2div(H2 a, H2 b) { return H2(__hdiv(a.x, b.x), __hdiv(a.y, b.y)); }          \
  static inline H2 __hfma2(H2 a, H2 b, H2 c) { return H2(__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)); } \
  static inline H2 __hneg2(H2 a) { return H2(-a.x, -a.y); }                                       \
  static inline H2 __habs2(H2 a) { return H2(__habs(a.x), __habs(a.y)); }                         \
  static inline H2 __hmax2(H2 a, H2 b) { return H2(__hmax(a.x, b.x), __hmax(a.y, b.y)); }          \
  static inline H2 __hmin2(H2 a, H2 b) { return H2(__hmin(a.x, b.x), __hmin(a.y, b.y)); }          \
  static inline H2 __lowhigh2highlow(H2 a) { return H2(a.y, a.x); }                               \
  static inline H2 operator+(const H2& a, const H2& b) { return __hadd2(a, b); }                  \
  static inline H2 operator-(const H2& a, const H2& b) { return __hsub2(a, b); }                  \
  static inline H2 operator*(const H2& a, const H2& b) { return __hmul2(a, b); }                  \
  static inline H2 operator/(const H2& a, const H2& b) { return __h2div(a, b); }                  \
  static inline H2& operator+=(H2& a, const H2& b) { a = a + b; return a; }                       \
  static inline H2& operator*=(H2& a, const H2& b) { a = a * b; return a; }

CUDAPERF_EMU_HALF_OPS(__half, __half2)
CUDAPERF_EMU_HALF_OPS(__nv_bfloat16, __nv_bfloat162)
#undef CUDAPERF_EMU_HALF_OPS
