// cudaperf CPU emulation: the runtime, compiled once per build mode as its own translation unit and
// linked into every solution library. It executes launches (blocks over a pool of OS threads; threads of
// a block as fibers when the kernel synchronises, as a plain loop otherwise), implements barriers and
// warp collectives with a fiber scheduler that reports divergence instead of hanging, records every
// launch, and exports the cudaperf_emu_* C functions the harness reads.
#include "cudaperf_emu.h"
#include "cudaperf_emu_sched.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <signal.h>
#include <string>
#include <thread>
#include <vector>

#define CUDAPERF_EMU_EXPORT extern "C" __attribute__((visibility("default")))

__thread cudaperf_emu::ThreadCtx* cudaperf_emu_cur = nullptr;

namespace cudaperf_emu {
namespace {

// ---- process-wide state --------------------------------------------------------------------------
struct LaunchRec { std::string name; dim3 grid, block; size_t smem; };
std::mutex g_mu;
cudaError_t g_last = cudaSuccess;    // cleared by cudaGetLastError
cudaError_t g_sticky = cudaSuccess;  // a kernel fault: every later call reports it until reset
std::string g_message;
char g_message_copy[1024];
std::vector<LaunchRec> g_launches;
const size_t kMaxLaunchRecords = 100000;
int g_max_dyn_smem = 48 * 1024;
std::atomic<int> g_threads{0};
std::atomic<int> g_threads_started{0};  // OS threads this runtime created (its pool, the watchdog)

// ---- the pool of OS threads -------------------------------------------------------------------
struct Pool {
  std::mutex mu;
  std::condition_variable cv, done_cv;
  std::vector<std::thread> threads;
  const std::function<void()>* job = nullptr;
  uint64_t generation = 0;
  int participants = 0, pending = 0;

  void grow(int k) {
    while ((int)threads.size() < k) {
      int index = (int)threads.size();
      threads.emplace_back([this, index] { loop(index); });
      ++g_threads_started;
      threads.back().detach();
    }
  }
  void loop(int index) {
    uint64_t seen = 0;
    for (;;) {
      const std::function<void()>* fn;
      {
        std::unique_lock<std::mutex> lk(mu);
        cv.wait(lk, [&] { return generation != seen; });
        seen = generation;
        if (index >= participants) continue;
        fn = job;
      }
      (*fn)();
      std::lock_guard<std::mutex> lk(mu);
      if (--pending == 0) done_cv.notify_all();
    }
  }
  void run(int k, const std::function<void()>& fn) {  // fn on k-1 pool threads and the caller
    grow(k - 1);
    {
      std::lock_guard<std::mutex> lk(mu);
      job = &fn; participants = k - 1; pending = k - 1; ++generation;
    }
    cv.notify_all();
    fn();
    std::unique_lock<std::mutex> lk(mu);
    done_cv.wait(lk, [&] { return pending == 0; });
  }
};
Pool* g_pool = nullptr;
std::mutex g_pool_mu;
void forget_pool_after_fork() { g_pool = nullptr; }

int host_threads() {
  int n = g_threads.load();
  if (n > 0) return n;
  const char* e = getenv("CUDAPERF_EMU_THREADS");
  if (e && atoi(e) > 0) return atoi(e);
  unsigned hc = std::thread::hardware_concurrency();
  return hc == 0 ? 1 : (int)std::min(hc, 32u);
}

// ---- the watchdog: a launch that runs too long ends the process with a message ------------------------
std::atomic<double> g_watchdog_s{-1.0};           // < 0: read CUDAPERF_EMU_WATCHDOG_S on first launch
std::atomic<long long> g_launch_start_ns{0};       // 0: no launch running
std::atomic<const char*> g_running_kernel{""};
const int kWatchdogExit = 87;
long long now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
void start_watchdog_if_enabled() {
  if (g_watchdog_s.load() < 0) {
    const char* e = getenv("CUDAPERF_EMU_WATCHDOG_S");
    double expected = -1.0;
    g_watchdog_s.compare_exchange_strong(expected, e ? atof(e) : 0.0);
  }
  static std::once_flag once;
  if (g_watchdog_s.load() <= 0) return;
  std::call_once(once, [] {
    ++g_threads_started;
    std::thread([] {
      for (;;) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        double limit = g_watchdog_s.load();
        long long start = g_launch_start_ns.load();
        if (limit > 0 && start != 0 && (now_ns() - start) * 1e-9 > limit) {
          char buf[512];
          int k = snprintf(buf, sizeof buf, "cudaperf-emu: watchdog: kernel `%s` ran longer than %.3g s (an endless "
                           "loop, or a wait for another block that never comes)\n", g_running_kernel.load(), limit);
          if (k > 0) { ssize_t rc = write(2, buf, (size_t)k); (void)rc; }
          _exit(kWatchdogExit);
        }
      }
    }).detach();
  });
}

// ---- faults outside the sanitizer: name the kernel, block and thread before the process dies -------
thread_local const char* t_kernel = nullptr;
struct sigaction g_old_segv, g_old_bus;
void print_fault_context() {
  if (!t_kernel || !cudaperf_emu_cur) return;
  const ThreadCtx* t = cudaperf_emu_cur;
  char buf[384];
  int k = snprintf(buf, sizeof buf, "cudaperf-emu: fault in kernel `%s` block (%u,%u,%u) thread (%u,%u,%u)\n",
                   t_kernel, t->bid.x, t->bid.y, t->bid.z, t->tid.x, t->tid.y, t->tid.z);
  if (k > 0) { ssize_t rc = write(2, buf, (size_t)k); (void)rc; }
}
void on_fault(int sig) {
  print_fault_context();
  sigaction(SIGSEGV, &g_old_segv, nullptr);
  sigaction(SIGBUS, &g_old_bus, nullptr);
  (void)sig;  // returning re-executes the faulting access under the previous handler
}
void install_fault_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    pthread_atfork(nullptr, nullptr, &forget_pool_after_fork);
#if CUDAPERF_EMU_ASAN
    __sanitizer_set_death_callback(&print_fault_context);
#else
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = &on_fault;
    sigaction(SIGSEGV, &sa, &g_old_segv);
    sigaction(SIGBUS, &sa, &g_old_bus);
#endif
  });
}
}  // namespace

// ---- entry points used by device code and the API header ------------------------------------------
int block_barrier(int op, int pred) {
  Worker* w = tw;
  if (!w || !w->fiber_mode) {
    if (w && w->nthreads > 1 && cudaperf_emu_cur) {
      trap("internal error: a barrier was reached in a kernel launched without fibers (please report)");
    }
    return op == kBarPlain ? 0 : pred;
  }
  Fiber* f = w->running;
  f->state = kWaitBar; f->op = op; f->pred = pred;
  switch_to_scheduler(w, f, false);
  return (int)f->result;
}

uint64_t warp_collective(int op, unsigned mask, uint64_t value, int param, int width) {
  Worker* w = tw;
  if (!w || !w->fiber_mode) {
    if (w && w->nthreads > 1 && cudaperf_emu_cur) {
      trap("internal error: a warp collective was reached in a kernel launched without fibers (please report)");
    }
    switch (op) {  // a single thread is the whole warp
      case kBallot: return (mask & 1u) && value ? 1u : 0u;
      case kMatchAny: return 1u;
      case kWarpSync: return 0;
      default: return value;
    }
  }
  Fiber* f = w->running;
  f->state = kWaitWarp; f->op = op; f->mask = mask; f->value = value; f->param = param; f->width = width;
  switch_to_scheduler(w, f, false);
  return f->result;
}

void lockstep() {
  Worker* w = tw;
  if (!w || !w->fiber_mode || !w->running) return;
  Fiber* f = w->running;
  f->state = kWaitWarp; f->op = kLockstep; f->mask = 0; f->value = 0;
  switch_to_scheduler(w, f, false);
}

unsigned active_mask() {
  Worker* w = tw;
  if (!w || !w->fiber_mode || !w->running) return w && w->nthreads > 0 && w->nthreads < 32 ? (1u << w->nthreads) - 1u : 0xffffffffu;
  const int first = w->running->index - w->running->index % 32;
  unsigned m = 0;
  for (int l = first; l < std::min(first + 32, w->nthreads); ++l)
    if (w->fibers[l]->state != kDone) m |= 1u << (l - first);
  return m;
}

void trap(const char* what) { throw KernelTrap{what}; }

void assert_fail(const char* expr, const char* file, int line) {
  char buf[512];
  const char* base = strrchr(file, '/');
  snprintf(buf, sizeof buf, "assertion `%s` failed at %s:%d", expr, base ? base + 1 : file, line);
  if (cudaperf_emu_cur && tw && tw->nthreads > 0) throw KernelTrap{buf, cudaErrorAssert};
  fprintf(stderr, "%s\n", buf);
  abort();
}

void* dyn_smem() { return tw ? tw->dyn : nullptr; }

void* register_shared(size_t bytes) {
  Worker* w = worker();
  void* p = nullptr;
  if (posix_memalign(&p, 128, bytes ? bytes : 1) != 0) trap("out of host memory for __shared__ storage");
  memset(p, 0xFF, bytes);
  w->shared_blocks.emplace_back(static_cast<char*>(p), bytes);
  return p;
}

cudaError_t set_error(cudaError_t e, const char* message) {
  std::lock_guard<std::mutex> lk(g_mu);
  g_last = e;
  if (message) g_message = message;
  return e;
}

cudaError_t get_last_error(bool clear) {
  std::lock_guard<std::mutex> lk(g_mu);
  if (g_sticky != cudaSuccess) return g_sticky;
  cudaError_t e = g_last;
  if (clear) g_last = cudaSuccess;
  return e;
}

void* device_alloc(size_t bytes) {
  void* p = nullptr;
  if (posix_memalign(&p, 256, bytes ? bytes : 1) != 0) return nullptr;
  return p;
}
void device_free(void* p) { free(p); }
void func_set_max_dyn_smem(int bytes) {
  std::lock_guard<std::mutex> lk(g_mu);
  if (bytes > g_max_dyn_smem) g_max_dyn_smem = bytes;
}

void fill_device_prop(cudaDeviceProp* p) {
  memset(p, 0, sizeof *p);
  snprintf(p->name, sizeof p->name, "cudaperf CPU emulation of an NVIDIA H200 (sm_90)");
  p->totalGlobalMem = 150754820096ull; p->sharedMemPerBlock = 49152; p->regsPerBlock = 65536;
  p->warpSize = 32; p->memPitch = 2147483647; p->maxThreadsPerBlock = 1024;
  p->maxThreadsDim[0] = 1024; p->maxThreadsDim[1] = 1024; p->maxThreadsDim[2] = 64;
  p->maxGridSize[0] = 2147483647; p->maxGridSize[1] = 65535; p->maxGridSize[2] = 65535;
  p->clockRate = 1980000; p->totalConstMem = 65536; p->major = 9; p->minor = 0; p->textureAlignment = 512;
  p->multiProcessorCount = 132; p->concurrentKernels = 1; p->ECCEnabled = 1; p->memoryClockRate = 2619000;
  p->memoryBusWidth = 6144; p->l2CacheSize = 52428800; p->persistingL2CacheMaxSize = 32505856;
  p->maxThreadsPerMultiProcessor = 2048; p->unifiedAddressing = 1; p->managedMemory = 1; p->cooperativeLaunch = 1;
  p->sharedMemPerMultiprocessor = 233472; p->regsPerMultiprocessor = 65536; p->sharedMemPerBlockOptin = 232448;
  p->reservedSharedMemPerBlock = 1024; p->maxBlocksPerMultiProcessor = 32; p->asyncEngineCount = 3;
}

int device_attribute(int a) {
  switch (a) {
    case cudaDevAttrMaxThreadsPerBlock: case cudaDevAttrMaxBlockDimX: case cudaDevAttrMaxBlockDimY: return 1024;
    case cudaDevAttrMaxBlockDimZ: return 64;
    case cudaDevAttrMaxGridDimX: return 2147483647;
    case cudaDevAttrMaxGridDimY: case cudaDevAttrMaxGridDimZ: return 65535;
    case cudaDevAttrMaxSharedMemoryPerBlock: return 49152;
    case cudaDevAttrTotalConstantMemory: return 65536;
    case cudaDevAttrWarpSize: return 32;
    case cudaDevAttrMaxRegistersPerBlock: case cudaDevAttrMaxRegistersPerMultiprocessor: return 65536;
    case cudaDevAttrClockRate: return 1980000;
    case cudaDevAttrMultiProcessorCount: return 132;
    case cudaDevAttrMemoryClockRate: return 2619000;
    case cudaDevAttrGlobalMemoryBusWidth: return 6144;
    case cudaDevAttrL2CacheSize: return 52428800;
    case cudaDevAttrMaxThreadsPerMultiProcessor: return 2048;
    case cudaDevAttrComputeCapabilityMajor: return 9;
    case cudaDevAttrComputeCapabilityMinor: return 0;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: return 233472;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: return 232448;
    case cudaDevAttrMaxBlocksPerMultiprocessor: return 32;
    default: return 0;
  }
}

cudaError_t launch_impl(const char* name, dim3 grid, dim3 block, size_t smem, int fibers, BlockBody body,
                        void* closure) {
  install_fault_handlers();
  const unsigned long long nthreads = (unsigned long long)block.x * block.y * block.z;
  const unsigned long long nblocks = (unsigned long long)grid.x * grid.y * grid.z;
  char msg[512];
  if (nthreads == 0 || nthreads > 1024 || block.x > 1024 || block.y > 1024 || block.z > 64) {
    snprintf(msg, sizeof msg, "kernel `%s`: invalid block (%u,%u,%u): at most 1024 threads, (1024,1024,64) per axis, "
             "none zero", name, block.x, block.y, block.z);
    return set_error(cudaErrorInvalidConfiguration, msg);
  }
  if (nblocks == 0 || grid.x > 2147483647u || grid.y > 65535u || grid.z > 65535u) {
    snprintf(msg, sizeof msg, "kernel `%s`: invalid grid (%u,%u,%u): x in 1..2^31-1, y and z in 1..65535", name,
             grid.x, grid.y, grid.z);
    return set_error(cudaErrorInvalidConfiguration, msg);
  }
  {
    std::lock_guard<std::mutex> lk(g_mu);
    if (g_sticky != cudaSuccess) return g_sticky;
    if (smem > (size_t)g_max_dyn_smem) {
      snprintf(msg, sizeof msg, "kernel `%s`: %zu bytes of dynamic shared memory exceed the %d-byte limit (raise it with "
               "cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes), at most 232448)",
               name, smem, g_max_dyn_smem);
      g_last = cudaErrorInvalidValue; g_message = msg;
      return cudaErrorInvalidValue;
    }
    if (g_launches.size() < kMaxLaunchRecords) g_launches.push_back(LaunchRec{name, grid, block, smem});
  }
  std::atomic<unsigned long long> next{0};
  std::atomic<bool> failed{false};
  std::string first_error;
  cudaError_t fail_code = cudaErrorLaunchFailure;
  std::mutex err_mu;
  const bool use_fibers = fibers && nthreads > 1;
  start_watchdog_if_enabled();
  g_running_kernel = name;
  g_launch_start_ns = now_ns();
  std::function<void()> job = [&] {
    Worker* w = worker();
    const char* saved_kernel = t_kernel;
    ThreadCtx* saved_cur = cudaperf_emu_cur;
    t_kernel = name;
    w->kernel = name; w->body = body; w->closure = closure; w->fiber_mode = use_fibers;
    w->nthreads = (int)nthreads; w->abort = false; w->error.clear(); w->error_code = cudaErrorLaunchFailure;
    if (w->dyn_size != smem) {
      free(w->dyn);
      w->dyn = nullptr;
      if (posix_memalign(reinterpret_cast<void**>(&w->dyn), 128, smem ? smem : 1) != 0) w->dyn = nullptr;
      w->dyn_size = smem;
    }
    w->loop_tc.bdim = block; w->loop_tc.gdim = grid;
    for (;;) {
      if (failed.load(std::memory_order_relaxed)) break;
      unsigned long long b = next.fetch_add(1);
      if (b >= nblocks) break;
      w->loop_tc.bid.x = (unsigned)(b % grid.x);
      w->loop_tc.bid.y = (unsigned)((b / grid.x) % grid.y);
      w->loop_tc.bid.z = (unsigned)(b / ((unsigned long long)grid.x * grid.y));
      if (smem && w->dyn) memset(w->dyn, 0xFF, smem);  // uninitialised shared memory reads as NaN / -1
      for (auto& blk : w->shared_blocks) memset(blk.first, 0xFF, blk.second);
      bool ok = use_fibers ? run_block_fibers(w) : run_block_loop(w);
      if (!ok) {
        failed = true;
        std::lock_guard<std::mutex> lk(err_mu);
        if (first_error.empty()) {
          first_error = w->error.empty() ? where(w, &w->loop_tc) + ": failed" : w->error;
          fail_code = (cudaError_t)w->error_code;
        }
        break;
      }
    }
    w->fiber_mode = false; w->nthreads = 0;
    t_kernel = saved_kernel;
    cudaperf_emu_cur = saved_cur;
  };
  int k = (int)std::min<unsigned long long>((unsigned long long)host_threads(), nblocks);
  if (nblocks * nthreads < 4096) k = 1;  // not worth waking the pool
  if (k <= 1) {
    job();
  } else {
    std::lock_guard<std::mutex> lk(g_pool_mu);  // one launch at a time uses the pool
    if (!g_pool) g_pool = new Pool();
    g_pool->run(k, job);
  }
  g_launch_start_ns = 0;
  if (failed) {
    std::lock_guard<std::mutex> lk(g_mu);
    g_sticky = fail_code; g_last = fail_code; g_message = first_error;
    return fail_code;
  }
  return cudaSuccess;
}
}  // namespace cudaperf_emu

const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidSymbol: return "cudaErrorInvalidSymbol";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    case cudaErrorAssert: return "cudaErrorAssert";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorNotSupported: return "cudaErrorNotSupported";
    default: return "cudaErrorUnknown";
  }
}
const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidSymbol: return "invalid device symbol";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    case cudaErrorAssert: return "device-side assert triggered";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorNotSupported: return "operation not supported";
    default: return "unknown error";
  }
}

// ---- the C interface the harness reads (kernels_harness/emulation/library.py) ---------------------
CUDAPERF_EMU_EXPORT int cudaperf_emu_num_launches(void) {
  std::lock_guard<std::mutex> lk(cudaperf_emu::g_mu);
  return (int)cudaperf_emu::g_launches.size();
}
CUDAPERF_EMU_EXPORT int cudaperf_emu_get_launch(int i, char* name, int name_len, unsigned* grid3, unsigned* block3,
                                                size_t* dyn_smem) {
  std::lock_guard<std::mutex> lk(cudaperf_emu::g_mu);
  if (i < 0 || i >= (int)cudaperf_emu::g_launches.size()) return -1;
  const auto& r = cudaperf_emu::g_launches[i];
  if (name && name_len > 0) snprintf(name, (size_t)name_len, "%s", r.name.c_str());
  if (grid3) { grid3[0] = r.grid.x; grid3[1] = r.grid.y; grid3[2] = r.grid.z; }
  if (block3) { block3[0] = r.block.x; block3[1] = r.block.y; block3[2] = r.block.z; }
  if (dyn_smem) *dyn_smem = r.smem;
  return 0;
}
CUDAPERF_EMU_EXPORT void cudaperf_emu_reset(void) {
  std::lock_guard<std::mutex> lk(cudaperf_emu::g_mu);
  cudaperf_emu::g_launches.clear();
  cudaperf_emu::g_last = cudaSuccess;
  cudaperf_emu::g_sticky = cudaSuccess;
  cudaperf_emu::g_message.clear();
}
CUDAPERF_EMU_EXPORT const char* cudaperf_emu_last_error(void) {
  std::lock_guard<std::mutex> lk(cudaperf_emu::g_mu);
  snprintf(cudaperf_emu::g_message_copy, sizeof cudaperf_emu::g_message_copy, "%s", cudaperf_emu::g_message.c_str());
  return cudaperf_emu::g_message_copy;
}
CUDAPERF_EMU_EXPORT void cudaperf_emu_set_threads(int n) { cudaperf_emu::g_threads = n > 0 ? n : 0; }
CUDAPERF_EMU_EXPORT int cudaperf_emu_get_threads(void) { return cudaperf_emu::host_threads(); }
// OS threads the runtime itself has started (the worker tells them from threads a solution left running).
CUDAPERF_EMU_EXPORT int cudaperf_emu_threads_started(void) { return cudaperf_emu::g_threads_started.load(); }
// Seconds a single launch may run before the process exits with code 87 and a message (0: off).
CUDAPERF_EMU_EXPORT void cudaperf_emu_set_watchdog(double seconds) {
  cudaperf_emu::g_watchdog_s = seconds > 0 ? seconds : 0.0;
}
