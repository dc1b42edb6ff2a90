"""CUDA semantics of the cpu backend beyond the corpus: exact 16-bit conversions, faults reported as
errors (barrier and warp divergence, __trap, bad launch configurations), launch records, device
properties, per-block shared memory under parallel blocks, and compiler messages."""
import ctypes

import numpy as np
import pytest

from kernels_harness.emulation import build_shared_library
from kernels_harness.emulation.corpus import bf16_bits_to_f32, f32_to_bf16_bits

P, I = ctypes.c_void_p, ctypes.c_int

CONVERT = r'''
#include <cuda_fp16.h>
#include <cuda_bf16.h>
__global__ void cvt(const float* x, unsigned short* h, unsigned short* b, float* hback, float* bback, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    h[i] = __half_as_ushort(__float2half(x[i]));
    b[i] = __bfloat16_as_ushort(__float2bfloat16(x[i]));
  }
  if (i < 65536) {
    hback[i] = __half2float(__ushort_as_half((unsigned short)i));
    bback[i] = __bfloat162float(__ushort_as_bfloat16((unsigned short)i));
  }
}
extern "C" int convert(const float* x, unsigned short* h, unsigned short* b, float* hback, float* bback, int n,
                       cudaStream_t s) {
  int m = n > 65536 ? n : 65536;
  cvt<<<(m + 255) / 256, 256, 0, s>>>(x, h, b, hback, bback, n);
  return cudaGetLastError();
}
'''


def test_half_and_bf16_conversions_are_bit_exact(build_lib):
    lib = build_lib(CONVERT, "convert")
    rng = np.random.default_rng(0)
    halves = np.arange(65536, dtype=np.uint16).view(np.float16).astype(np.float32)
    with np.errstate(invalid="ignore"):
        mids = (halves[:-1].astype(np.float64) + halves[1:]) / 2   # ties: round to even
    x = np.concatenate([halves, mids.astype(np.float32), rng.normal(0, 1e3, 20000).astype(np.float32),
                        rng.normal(0, 1e-6, 20000).astype(np.float32),
                        np.array([np.inf, -np.inf, 65504, 65519.99, 65520, 1e-8, -0.0, 3e38], np.float32)])
    x = x[np.isfinite(x) | np.isinf(x)]
    n = x.size
    h, b = np.zeros(n, np.uint16), np.zeros(n, np.uint16)
    hb, bb = np.zeros(65536, np.float32), np.zeros(65536, np.float32)
    fn = lib.entry("convert")
    fn.argtypes = [P, P, P, P, P, I, P]
    assert fn(x.ctypes.data, h.ctypes.data, b.ctypes.data, hb.ctypes.data, bb.ctypes.data, n, None) == 0
    ok = ~np.isnan(x)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(h[ok], x[ok].astype(np.float16).view(np.uint16))
    np.testing.assert_array_equal(b[ok], f32_to_bf16_bits(x[ok]))
    np.testing.assert_array_equal(hb, halves)
    np.testing.assert_array_equal(bb, bf16_bits_to_f32(np.arange(65536, dtype=np.uint16)))


FAULTS = r'''
#include <cuda_runtime.h>
__global__ void diverge(float* y) {
  __shared__ float s[64];
  if (threadIdx.x >= 32) return;        // half the block leaves before the barrier
  s[threadIdx.x] = 1.f;
  __syncthreads();
  y[threadIdx.x] = s[threadIdx.x];
}
__global__ void warp_deadlock(float* y) {
  float v = y[threadIdx.x];
  if (threadIdx.x % 32 < 16) v = __shfl_sync(0xffffffffu, v, 0);   // lanes 16..31 never come
  __syncthreads();
  y[threadIdx.x] = v;
}
__global__ void trapper(float* y) { if (threadIdx.x == 5) __trap(); y[threadIdx.x] = 1.f; }
__global__ void whole_block_exit(float* y, int nb) {
  __shared__ float s[32];
  if (blockIdx.x >= nb) return;          // uniform per block: fine
  s[threadIdx.x] = threadIdx.x;
  __syncthreads();
  y[blockIdx.x * 32 + threadIdx.x] = s[31 - threadIdx.x];
}
__global__ void block_id(int* out) {
  __shared__ int mine;
  if (threadIdx.x == 0) mine = blockIdx.x;
  __syncthreads();
  int v = mine;
  __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = v;
}
__global__ void big_dyn(float* y) { extern __shared__ float s[]; s[threadIdx.x] = 1.f; y[0] = s[0]; }
extern "C" int run_diverge(float* y, cudaStream_t s) { diverge<<<2, 64, 0, s>>>(y); return cudaGetLastError(); }
extern "C" int run_warp(float* y, cudaStream_t s) { warp_deadlock<<<1, 64, 0, s>>>(y); return cudaGetLastError(); }
extern "C" int run_trap(float* y, cudaStream_t s) { trapper<<<3, 32, 0, s>>>(y); return cudaGetLastError(); }
extern "C" int run_exit(float* y, cudaStream_t s) { whole_block_exit<<<4, 32, 0, s>>>(y, 2); return cudaGetLastError(); }
extern "C" int run_block_id(int* out, int blocks, cudaStream_t s) {
  block_id<<<blocks, 64, 0, s>>>(out);
  return cudaGetLastError();
}
extern "C" int run_bad_block(float* y, cudaStream_t s) { trapper<<<1, 2048, 0, s>>>(y); return cudaGetLastError(); }
extern "C" int run_big_dyn(float* y, cudaStream_t s) { big_dyn<<<1, 32, 64 * 1024, s>>>(y); return cudaGetLastError(); }
extern "C" int run_record(float* y, cudaStream_t s) {
  big_dyn<<<dim3(3, 2), dim3(32, 4), 128 * sizeof(float), s>>>(y);
  return cudaGetLastError();
}
extern "C" int props(int* out, cudaStream_t s) {
  cudaDeviceProp p;
  cudaGetDeviceProperties(&p, 0);
  out[0] = p.major; out[1] = p.minor; out[2] = p.multiProcessorCount; out[3] = p.warpSize;
  out[4] = (int)p.sharedMemPerBlockOptin; out[5] = p.maxThreadsPerBlock;
  int v = 0;
  cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, 0);
  out[6] = v;
  return 0;
}
'''


@pytest.fixture(scope="module")
def faults(build_lib):
    lib = build_lib(FAULTS, "faults")
    fns = {}
    for name in ("run_diverge", "run_warp", "run_trap", "run_exit", "run_bad_block", "run_big_dyn", "run_record"):
        fns[name] = lib.entry(name)
        fns[name].argtypes = [P, P]
    return lib, fns


def test_barrier_divergence_is_a_sticky_error_with_a_message(faults):
    lib, fn = faults
    lib.reset()
    y = np.zeros(128, np.float32)
    assert fn["run_diverge"](y.ctypes.data, None) == 719
    msg = lib.last_error()
    assert "barrier divergence" in msg and "`diverge`" in msg and "32 of 64 threads" in msg
    assert fn["run_exit"](y.ctypes.data, None) == 719          # sticky, like a real kernel fault
    lib.reset()
    assert fn["run_exit"](y.ctypes.data, None) == 0 and lib.last_error() == ""
    np.testing.assert_array_equal(y[:64], np.tile(np.arange(31, -1, -1, dtype=np.float32), 2))


def test_warp_collective_that_cannot_complete_is_reported(faults):
    lib, fn = faults
    lib.reset()
    y = np.ones(64, np.float32)
    assert fn["run_warp"](y.ctypes.data, None) == 719
    assert "warp divergence" in lib.last_error() and "`warp_deadlock`" in lib.last_error()
    lib.reset()


def test_trap_is_a_launch_failure(faults):
    lib, fn = faults
    lib.reset()
    y = np.zeros(96, np.float32)
    assert fn["run_trap"](y.ctypes.data, None) == 719
    assert "__trap()" in lib.last_error()
    lib.reset()


def test_invalid_launch_configurations_are_errors_not_sticky(faults):
    lib, fn = faults
    lib.reset()
    y = np.zeros(4096, np.float32)
    assert fn["run_bad_block"](y.ctypes.data, None) == 9      # cudaErrorInvalidConfiguration
    assert "invalid block (2048,1,1)" in lib.last_error()
    assert fn["run_big_dyn"](y.ctypes.data, None) == 1        # cudaErrorInvalidValue: > 48 KiB w/o attribute
    assert "cudaFuncSetAttribute" in lib.last_error()
    assert lib.launches() == []
    assert fn["run_exit"](y.ctypes.data, None) == 0
    lib.reset()


def test_launches_are_recorded(faults):
    lib, fn = faults
    lib.reset()
    y = np.zeros(4, np.float32)
    assert fn["run_record"](y.ctypes.data, None) == 0
    assert lib.launches() == [{"kernel": "big_dyn", "grid": (3, 2, 1), "block": (32, 4, 1), "smem": 512}]
    lib.reset()
    assert lib.launches() == []


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_shared_memory_is_private_to_each_block_under_parallel_blocks(faults, threads):
    lib, _ = faults
    lib.reset()
    lib.set_threads(threads)
    fn = lib.entry("run_block_id")
    fn.argtypes = [P, I, P]
    out = np.full(200 * 64, -1, np.int32)
    assert fn(out.ctypes.data, 200, None) == 0
    np.testing.assert_array_equal(out, np.repeat(np.arange(200, dtype=np.int32), 64))
    lib.set_threads(0)


def test_device_properties_describe_an_sm90_h200(faults):
    lib, _ = faults
    fn = lib.entry("props")
    fn.argtypes = [P, P]
    out = np.zeros(7, np.int32)
    assert fn(out.ctypes.data, None) == 0
    assert out.tolist() == [9, 0, 132, 32, 232448, 1024, 132]


def test_compile_errors_name_the_line_first(tmp_path):
    res = build_shared_library("__global__ void k(float* y) {\n  y[0] = undefined_thing;\n}\n", tmp_path / "bad.so",
                               checks=False)
    assert not res.ok and res.path is None
    first = res.log.splitlines()[0]
    assert first.startswith("solution.cu:2:") and "undefined_thing" in first and "error" in first


def test_unsupported_constructs_fail_the_build_with_one_line(tmp_path):
    res = build_shared_library('__global__ void k() { asm("trap;"); }', tmp_path / "asm.so", checks=False)
    assert not res.ok
    assert res.log.splitlines()[0] == "unsupported on the cpu backend: inline PTX assembly (asm) (line 1)"


HANG = r'''
__global__ void spin(volatile int* flag) { while (flag[0] == 0) { } }
__global__ void segv(float* y) { if (threadIdx.x == 7) y[1 << 30] = 1.f; }
extern "C" int run_spin(int* flag, cudaStream_t s) { spin<<<1, 1, 0, s>>>(flag); return cudaGetLastError(); }
extern "C" int run_segv(float* y, cudaStream_t s) { segv<<<2, 32, 0, s>>>(y); return cudaGetLastError(); }
'''
DRIVER = '''
import ctypes, sys
import numpy as np
from kernels_harness.emulation import EmulatedLibrary
lib = EmulatedLibrary(sys.argv[1])
lib.set_watchdog(0.3)
fn = lib.entry(sys.argv[2]); fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
buf = np.zeros(16, np.int32)
print("rc", fn(buf.ctypes.data, None))
'''


@pytest.fixture(scope="module")
def hang_lib(build_lib):
    return build_lib(HANG, "hang")


@pytest.mark.parametrize("entry, code, summary", [
    ("run_spin", 87, "timeout: kernel `spin` ran longer than 0.3 s"),
    ("run_segv", -11, "memory fault in kernel `segv` block (0,0,0) thread (7,0,0)")])
def test_endless_kernels_and_wild_pointers_end_the_worker_with_a_named_kernel(hang_lib, entry, code, summary):
    import subprocess
    import sys

    from kernels_harness.emulation import summarize_report
    p = subprocess.run([sys.executable, "-c", DRIVER, str(hang_lib.path), entry], check=False, capture_output=True, text=True, timeout=60)
    assert p.returncode == code, p.stderr[-2000:]
    assert summarize_report(p.stderr) == summary


def test_rebuilding_a_loaded_library_in_place_is_safe(tmp_path):
    from kernels_harness.emulation import EmulatedLibrary
    src = 'extern "C" int answer(int* out, cudaStream_t s) { out[0] = 41 + 1; return 0; }\n'
    first = EmulatedLibrary(build_shared_library(src, tmp_path / "same.so", checks=False).path)
    assert build_shared_library(src.replace("41", "40"), tmp_path / "same.so", checks=False).ok
    fn = first.entry("answer")
    fn.argtypes = [P, P]
    out = np.zeros(1, np.int32)
    assert fn(out.ctypes.data, None) == 0 and out[0] == 42    # the loaded copy is untouched


def test_device_assert_fails_the_launch_like_cuda(build_lib):
    src = r"""
#include <cassert>
__global__ void checked(const int* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) assert(x[i] >= 0);
}
extern "C" int run(const int* x, int n, cudaStream_t s) { checked<<<2, 64, 0, s>>>(x, n); return cudaGetLastError(); }
"""
    lib = build_lib(src, "asserts")
    fn = lib.entry("run")
    fn.argtypes = [P, I, P]
    x = np.arange(100, dtype=np.int32)
    assert fn(x.ctypes.data, 100, None) == 0
    x[70] = -1
    assert fn(x.ctypes.data, 100, None) == 710                   # cudaErrorAssert
    msg = lib.last_error()
    assert "assertion `x[i] >= 0` failed at solution.cu:5" in msg and "block (1,0,0)" in msg
    lib.reset()


def test_shared_memory_starts_each_block_poisoned(build_lib):
    src = r"""
__global__ void leftovers(float* y) {
  __shared__ float s[32];
  extern __shared__ float d[];
  if (blockIdx.x == 0) { s[threadIdx.x] = 1.f; d[threadIdx.x] = 2.f; }
  __syncthreads();
  y[blockIdx.x * 64 + threadIdx.x] = s[threadIdx.x];
  y[blockIdx.x * 64 + 32 + threadIdx.x] = d[threadIdx.x];
}
extern "C" int run(float* y, cudaStream_t s) { leftovers<<<2, 32, 32 * sizeof(float), s>>>(y); return cudaGetLastError(); }
"""
    lib = build_lib(src, "leftovers")
    lib.set_threads(1)                      # both blocks on one host thread: storage is reused
    fn = lib.entry("run")
    fn.argtypes = [P, P]
    y = np.zeros(128, np.float32)
    assert fn(y.ctypes.data, None) == 0
    np.testing.assert_array_equal(y[:64], np.r_[np.ones(32), 2 * np.ones(32)])
    assert np.isnan(y[64:]).all()           # block 1 never wrote: it reads poison, not block 0's values
    lib.set_threads(0)
