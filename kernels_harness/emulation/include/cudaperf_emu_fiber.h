// cudaperf CPU emulation: user-space context switching for the fibers that run the threads of a block.
// x86-64: a hand-written switch of the callee-saved registers (no system call per switch); elsewhere
// ucontext. Stacks are mmap'ed with a guard page and reused from block to block.
#pragma once
#include <cstddef>
#include <cstdint>
#include <sys/mman.h>
#include <unistd.h>

namespace cudaperf_emu {
struct FiberStack {
  char* base = nullptr;   // lowest usable address (above the guard page)
  size_t size = 0;
  bool allocate(size_t bytes) {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    bytes = (bytes + page - 1) / page * page;
    void* p = mmap(nullptr, bytes + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return false;
    mprotect(p, page, PROT_NONE);
    base = static_cast<char*>(p) + page;
    size = bytes;
    return true;
  }
};
}  // namespace cudaperf_emu

#if defined(__x86_64__) && !defined(CUDAPERF_EMU_UCONTEXT)
extern "C" void cudaperf_emu_switch(void** save_sp, void* new_sp);
extern "C" void cudaperf_emu_trampoline();
asm(R"(
  .text
  .p2align 4
  .globl cudaperf_emu_switch
  .hidden cudaperf_emu_switch
  .type cudaperf_emu_switch,@function
cudaperf_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size cudaperf_emu_switch,.-cudaperf_emu_switch
  .globl cudaperf_emu_trampoline
  .hidden cudaperf_emu_trampoline
  .type cudaperf_emu_trampoline,@function
cudaperf_emu_trampoline:
  movq %r12, %rdi
  callq *%r13
  ud2
  .size cudaperf_emu_trampoline,.-cudaperf_emu_trampoline
)");

namespace cudaperf_emu {
struct Context {
  void* sp = nullptr;
  // Prepares a context that, when switched to, calls fn(arg) on the given stack.
  void init(const FiberStack& st, void (*fn)(void*), void* arg) {
    uintptr_t top = (reinterpret_cast<uintptr_t>(st.base) + st.size) & ~static_cast<uintptr_t>(15);
    void** s = reinterpret_cast<void**>(top) - 9;
    s[0] = nullptr; s[1] = nullptr;                       // r15, r14
    s[2] = reinterpret_cast<void*>(fn);                   // r13
    s[3] = arg;                                           // r12
    s[4] = nullptr; s[5] = nullptr;                       // rbx, rbp
    s[6] = reinterpret_cast<void*>(&cudaperf_emu_trampoline);
    s[7] = nullptr; s[8] = nullptr;
    sp = s;
  }
};
static inline void switch_context(Context* from, Context* to) { cudaperf_emu_switch(&from->sp, to->sp); }
}  // namespace cudaperf_emu
#else
#include <ucontext.h>
namespace cudaperf_emu {
struct Context {
  ucontext_t uc;
  void init(const FiberStack& st, void (*fn)(void*), void* arg) {
    getcontext(&uc);
    uc.uc_stack.ss_sp = st.base;
    uc.uc_stack.ss_size = st.size;
    uc.uc_link = nullptr;
    uintptr_t a = reinterpret_cast<uintptr_t>(arg);
    makecontext(&uc, reinterpret_cast<void (*)()>(&Context::entry), 4, (unsigned)(a >> 32), (unsigned)a,
                (unsigned)(reinterpret_cast<uintptr_t>(fn) >> 32), (unsigned)reinterpret_cast<uintptr_t>(fn));
  }
  static void entry(unsigned ah, unsigned al, unsigned fh, unsigned fl) {
    void* arg = reinterpret_cast<void*>(((uintptr_t)ah << 32) | al);
    auto fn = reinterpret_cast<void (*)(void*)>(((uintptr_t)fh << 32) | fl);
    fn(arg);
  }
};
static inline void switch_context(Context* from, Context* to) { swapcontext(&from->uc, &to->uc); }
}  // namespace cudaperf_emu
#endif
