// cudaperf CPU emulation: warp-synchronous `volatile` pointers. Legacy reductions write shared memory
// through `volatile T*` without __syncwarp and rely on the lanes of a warp moving in lockstep. The
// rewriter turns `volatile T*` into vptr<T>; every store through it is a lockstep point (all lanes of the
// warp that run finish their loads before any stores, and all stores land before later loads), which
// reproduces what such code computes on the GPU. Kernels that use it run their threads as fibers.
#pragma once
#include <cstddef>

namespace cudaperf_emu {
void lockstep();

template <class T> struct vref {
  volatile T* p;
  operator T() const { return *p; }
  vref& operator=(T v) { lockstep(); *p = v; lockstep(); return *this; }
  vref& operator=(const vref& o) { T v = o; return *this = v; }
#define CUDAPERF_EMU_VREF_OP(OP)                                                                  \
  template <class U> vref& operator OP##=(const U& v) { T cur = *p; cur OP##= v; return *this = cur; }
  CUDAPERF_EMU_VREF_OP(+) CUDAPERF_EMU_VREF_OP(-) CUDAPERF_EMU_VREF_OP(*) CUDAPERF_EMU_VREF_OP(/)
  CUDAPERF_EMU_VREF_OP(|) CUDAPERF_EMU_VREF_OP(&) CUDAPERF_EMU_VREF_OP(^)
#undef CUDAPERF_EMU_VREF_OP
  vref& operator++() { return *this += 1; }
  vref& operator--() { return *this -= 1; }
  T operator++(int) { T old = *p; *this += 1; return old; }
  T operator--(int) { T old = *p; *this -= 1; return old; }
  volatile T* operator&() const { return p; }
  volatile T* operator->() const { return p; }
};

template <class T> struct vptr {
  volatile T* p = nullptr;
  vptr() = default;
  vptr(T* q) : p(q) {}
  vptr(volatile T* q) : p(q) {}
  vptr(const T* q) : p(const_cast<T*>(q)) {}
  vptr(std::nullptr_t) : p(nullptr) {}
  template <class U> explicit vptr(U* q) : p(reinterpret_cast<volatile T*>(q)) {}
  vref<T> operator[](std::ptrdiff_t i) const { return vref<T>{p + i}; }
  vref<T> operator*() const { return vref<T>{p}; }
  volatile T* operator->() const { return p; }
  operator volatile T*() const { return p; }
  explicit operator bool() const { return p != nullptr; }
  vptr operator+(std::ptrdiff_t i) const { return vptr(p + i); }
  vptr operator-(std::ptrdiff_t i) const { return vptr(p - i); }
  std::ptrdiff_t operator-(const vptr& o) const { return p - o.p; }
  vptr& operator+=(std::ptrdiff_t i) { p += i; return *this; }
  vptr& operator-=(std::ptrdiff_t i) { p -= i; return *this; }
  vptr& operator++() { ++p; return *this; }
  vptr& operator--() { --p; return *this; }
  vptr operator++(int) { vptr o = *this; ++p; return o; }
  bool operator==(const vptr& o) const { return p == o.p; }
  bool operator!=(const vptr& o) const { return p != o.p; }
};
}  // namespace cudaperf_emu
