// cudaperf CPU emulation: the threads of one block. Without barriers or warp collectives they run as a
// plain loop; otherwise each is a fiber, and a round-robin scheduler runs every fiber until it blocks,
// releases warp collectives whose lanes have all arrived and block barriers that every thread reached,
// and reports divergence (threads that can never meet) as an error instead of hanging.
// Internal to cudaperf_emu_runtime.h (included inside its anonymous namespace's translation unit).
#pragma once
#include "cudaperf_emu.h"
#include "cudaperf_emu_fiber.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define CUDAPERF_EMU_ASAN 1
#else
#define CUDAPERF_EMU_ASAN 0
#endif

namespace cudaperf_emu {
namespace {
struct KernelTrap { std::string what; int code = 719; };  // code: the launch's cudaError_t

enum FiberState { kRunnable = 0, kWaitBar, kWaitWarp, kDone };

struct Fiber {
  Context ctx;
  FiberStack stack;
  ThreadCtx tc;
  int state = kDone;
  int index = 0;
  int op = 0, param = 0, width = 32, pred = 0;
  unsigned mask = 0;
  uint64_t value = 0, result = 0;
  void* fake_stack = nullptr;
};

// One per OS thread that runs blocks.
struct Worker {
  std::vector<Fiber*> fibers;
  Context sched;
  Fiber* running = nullptr;
  bool fiber_mode = false;
  int nthreads = 0;
  BlockBody body = nullptr;
  void* closure = nullptr;
  const char* kernel = "";
  char* dyn = nullptr;
  size_t dyn_size = (size_t)-1;
  ThreadCtx loop_tc;
  std::string error;
  int error_code = 719;
  bool abort = false;
  void* sched_fake = nullptr;
  const void* main_bottom = nullptr;
  size_t main_size = 0;
  bool stacks_dirty = false;
  std::vector<std::pair<char*, size_t>> shared_blocks;  // static __shared__ storage used on this thread
};
thread_local Worker* tw = nullptr;
Worker* worker() {
  if (!tw) tw = new Worker();
  return tw;
}

size_t stack_bytes() {
  static size_t s = [] {
    const char* e = getenv("CUDAPERF_EMU_STACK_KB");
    size_t kb = e ? (size_t)atol(e) : (CUDAPERF_EMU_ASAN ? 256 : 64);
    return (kb < 16 ? 16 : kb) * 1024;
  }();
  return s;
}

std::string where(const Worker* w, const ThreadCtx* t) {
  char buf[256];
  snprintf(buf, sizeof buf, "kernel `%s` block (%u,%u,%u)", w->kernel, t->bid.x, t->bid.y, t->bid.z);
  return buf;
}

// ---- fibers ----------------------------------------------------------------------------------------
void switch_to_fiber(Worker* w, Fiber* f) {
  cudaperf_emu_cur = &f->tc;
  w->running = f;
#if CUDAPERF_EMU_ASAN
  __sanitizer_start_switch_fiber(&w->sched_fake, f->stack.base, f->stack.size);
#endif
  switch_context(&w->sched, &f->ctx);
#if CUDAPERF_EMU_ASAN
  __sanitizer_finish_switch_fiber(w->sched_fake, nullptr, nullptr);
#endif
  w->running = nullptr;
}

void switch_to_scheduler(Worker* w, Fiber* f, bool final) {
#if CUDAPERF_EMU_ASAN
  __sanitizer_start_switch_fiber(final ? nullptr : &f->fake_stack, w->main_bottom, w->main_size);
#else
  (void)final;
#endif
  switch_context(&f->ctx, &w->sched);
#if CUDAPERF_EMU_ASAN
  __sanitizer_finish_switch_fiber(f->fake_stack, &w->main_bottom, &w->main_size);
#endif
}

void fiber_main(void* arg) {
  Fiber* f = static_cast<Fiber*>(arg);
  Worker* w = tw;
#if CUDAPERF_EMU_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &w->main_bottom, &w->main_size);
#endif
  try {
    w->body(w->closure);
  } catch (const KernelTrap& t) {
    if (w->error.empty()) { w->error = where(w, &f->tc) + ": " + t.what; w->error_code = t.code; }
    w->abort = true;
  }
  f->state = kDone;
  switch_to_scheduler(w, f, true);
  __builtin_unreachable();
}

void set_thread_index(ThreadCtx* t, const dim3& b, int linear) {
  t->tid.x = (unsigned)linear % b.x;
  t->tid.y = ((unsigned)linear / b.x) % b.y;
  t->tid.z = (unsigned)linear / (b.x * b.y);
}

// Resolves the warp collectives of warp `wi` if every lane they wait for has arrived.
bool resolve_warp(Worker* w, int wi) {
  const int lo = wi * 32, hi = std::min(lo + 32, w->nthreads);
  unsigned waiting = 0, live = 0, need = 0;
  for (int l = lo; l < hi; ++l) {
    Fiber* f = w->fibers[l];
    if (f->state != kDone) live |= 1u << (l - lo);
    if (f->state == kWaitWarp) { waiting |= 1u << (l - lo); need |= f->mask; }
  }
  if (!waiting || (need & live & ~waiting)) return false;
  uint64_t vals[32];
  for (int l = lo; l < hi; ++l) vals[l - lo] = w->fibers[l]->value;
  for (int l = lo; l < hi; ++l) {
    Fiber* f = w->fibers[l];
    if (f->state != kWaitWarp) continue;
    const int lane = l - lo;
    int width = f->width;
    if (width <= 0 || width > 32 || (width & (width - 1))) width = 32;
    const int base = lane & ~(width - 1);
    const unsigned members = f->mask & waiting;
    int src = lane;
    uint64_t r = 0;
    switch (f->op) {
      case kShflIdx: src = base + (f->param & (width - 1)); break;
      case kShflUp: src = (lane - base) >= f->param ? lane - f->param : lane; break;
      case kShflDown: src = (lane - base) + f->param < width ? lane + f->param : lane; break;
      case kShflXor: src = lane ^ f->param; if (src >= base + width || src < 0 || src > 31) src = lane; break;
      default: break;
    }
    switch (f->op) {
      case kShflIdx: case kShflUp: case kShflDown: case kShflXor:
        r = (waiting >> src) & 1u ? vals[src] : f->value; break;
      case kBallot:
        for (int k = 0; k < 32; ++k) if (((members >> k) & 1u) && vals[k]) r |= 1ull << k;
        break;
      case kMatchAny:
        for (int k = 0; k < 32; ++k) if (((members >> k) & 1u) && vals[k] == f->value) r |= 1ull << k;
        break;
      case kReduceAdd: case kReduceMin: case kReduceMax: case kReduceUMin: case kReduceUMax:
      case kReduceAnd: case kReduceOr: case kReduceXor: {
        bool first = true; uint32_t acc = 0;
        for (int k = 0; k < 32; ++k) {
          if (!((members >> k) & 1u)) continue;
          uint32_t v = (uint32_t)vals[k];
          if (first) { acc = v; first = false; continue; }
          switch (f->op) {
            case kReduceAdd: acc += v; break;
            case kReduceMin: acc = (int32_t)v < (int32_t)acc ? v : acc; break;
            case kReduceMax: acc = (int32_t)v > (int32_t)acc ? v : acc; break;
            case kReduceUMin: acc = v < acc ? v : acc; break;
            case kReduceUMax: acc = v > acc ? v : acc; break;
            case kReduceAnd: acc &= v; break;
            case kReduceOr: acc |= v; break;
            default: acc ^= v; break;
          }
        }
        r = acc; break;
      }
      default: break;  // __syncwarp
    }
    f->result = r;
  }
  for (int l = lo; l < hi; ++l)
    if (w->fibers[l]->state == kWaitWarp) w->fibers[l]->state = kRunnable;
  return true;
}

std::string deadlock_message(Worker* w, const ThreadCtx* t) {
  int done = 0, bar = 0, warp = 0;
  for (int i = 0; i < w->nthreads; ++i) {
    int s = w->fibers[i]->state;
    done += s == kDone; bar += s == kWaitBar; warp += s == kWaitWarp;
  }
  char buf[512];
  if (warp == 0)
    snprintf(buf, sizeof buf, "barrier divergence: %d of %d threads wait at __syncthreads() but %d threads "
             "exited without reaching it (every thread of the block must reach each barrier)", bar, w->nthreads, done);
  else
    snprintf(buf, sizeof buf, "warp divergence: %d threads wait at a warp collective (__shfl*_sync, "
             "__ballot_sync, __syncwarp, ...) for lanes of its mask that never arrive (%d wait at __syncthreads(), "
             "%d exited)", warp, bar, done);
  return where(w, t) + ": " + buf;
}

bool run_block_fibers(Worker* w) {
  const int n = w->nthreads;
  while ((int)w->fibers.size() < n) {
    Fiber* f = new Fiber();
    f->index = (int)w->fibers.size();
    if (!f->stack.allocate(stack_bytes())) { w->error = "cannot allocate fiber stacks"; return false; }
    w->fibers.push_back(f);
  }
  const ThreadCtx& proto = w->loop_tc;
  for (int i = 0; i < n; ++i) {
    Fiber* f = w->fibers[i];
#if CUDAPERF_EMU_ASAN
    if (w->stacks_dirty) __asan_unpoison_memory_region(f->stack.base, f->stack.size);
#endif
    f->tc = proto;
    set_thread_index(&f->tc, proto.bdim, i);
    f->state = kRunnable;
    f->fake_stack = nullptr;
    f->ctx.init(f->stack, &fiber_main, f);
  }
  w->stacks_dirty = false;
  const int nwarps = (n + 31) / 32;
  for (;;) {
    for (int i = 0; i < n; ++i) {
      Fiber* f = w->fibers[i];
      if (f->state != kRunnable) continue;
      switch_to_fiber(w, f);
      if (w->abort) { w->stacks_dirty = true; return false; }
    }
    bool progressed = false;
    int done = 0, bar = 0;
    for (int i = 0; i < n; ++i) {
      Fiber* f = w->fibers[i];
      done += f->state == kDone;
      bar += f->state == kWaitBar;
      if (f->state == kWaitWarp && f->op == kLockstep) { f->state = kRunnable; progressed = true; }
    }
    if (done == n) return true;
    if (progressed) continue;  // lanes at a lockstep point of a volatile store: every lane has caught up
    for (int wi = 0; wi < nwarps; ++wi) progressed |= resolve_warp(w, wi);
    if (progressed) continue;
    if (bar == n) {
      int count = 0;
      for (int i = 0; i < n; ++i) count += w->fibers[i]->pred;
      for (int i = 0; i < n; ++i) {
        Fiber* f = w->fibers[i];
        f->result = f->op == kBarCount ? (uint64_t)count : f->op == kBarAnd ? (uint64_t)(count == n)
                  : f->op == kBarOr ? (uint64_t)(count > 0) : 0;
        f->state = kRunnable;
      }
      continue;
    }
    w->error = deadlock_message(w, &proto);
    w->stacks_dirty = true;
    return false;
  }
}

bool run_block_loop(Worker* w) {
  ThreadCtx* t = &w->loop_tc;
  const dim3 b = t->bdim;
  cudaperf_emu_cur = t;
  try {
    for (unsigned z = 0; z < b.z; ++z)
      for (unsigned y = 0; y < b.y; ++y)
        for (unsigned x = 0; x < b.x; ++x) {
          t->tid.x = x; t->tid.y = y; t->tid.z = z;
          w->body(w->closure);
          if (w->abort) return false;
        }
  } catch (const KernelTrap& e) {
    if (w->error.empty()) { w->error = where(w, t) + ": " + e.what; w->error_code = e.code; }
    return false;
  }
  return true;
}
}  // namespace
}  // namespace cudaperf_emu
