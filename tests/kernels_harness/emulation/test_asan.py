"""Checks mode: AddressSanitizer builds run in a subprocess (as the harness does) catch out-of-bounds
accesses to harness arrays, cudaMalloc'd arrays and dynamic shared memory, with a one-line summary."""
import subprocess
import sys
import textwrap

import pytest

from kernels_harness.emulation import (
    ASAN_EXIT_CODE,
    EmulatedLibrary,
    LibraryLoadError,
    asan_environment,
    build_shared_library,
    summarize_report,
)

SRC = r'''
#include <cuda_runtime.h>
__global__ void fill(float* y, int n, int extra) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n + extra) y[i] = 2.0f * i;
}
__global__ void through_smem(float* y, int n) {  // fibers: a barrier and a shuffle, all in bounds
  __shared__ float s[64];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  s[threadIdx.x] = 2.0f * i;
  __syncthreads();
  float zero = __shfl_xor_sync(0xffffffffu, 0.0f, 1);
  if (i < n) y[i] = s[threadIdx.x] + zero;
}
__global__ void static_smem_over(float* y) {
  __shared__ float s[32];
  s[threadIdx.x] = 1.f;            // 33 threads, room for 32
  __syncthreads();
  y[threadIdx.x] = s[0];
}
__global__ void smem_over(float* y) {
  extern __shared__ float s[];
  s[threadIdx.x] = 1.f;            // 33 threads, room for 32
  __syncthreads();
  y[threadIdx.x] = s[0];
}
extern "C" int host_array(float* y, int n, int extra, cudaStream_t s) {
  fill<<<(n + extra + 63) / 64, 64, 0, s>>>(y, n, extra);
  return cudaGetLastError();
}
extern "C" int device_array(float* out, int n, int extra, cudaStream_t s) {
  float* d;
  cudaMalloc(&d, n * sizeof(float));
  fill<<<(n + extra + 63) / 64, 64, 0, s>>>(d, n, extra);
  cudaMemcpy(out, d, n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(d);
  return cudaGetLastError();
}
extern "C" int fibers_ok(float* y, int n, int extra, cudaStream_t s) {
  through_smem<<<(n + 63) / 64, 64, 0, s>>>(y, n);
  return cudaGetLastError();
}
extern "C" int static_shared_array(float* y, int n, int extra, cudaStream_t s) {
  static_smem_over<<<1, 33, 0, s>>>(y);
  return cudaGetLastError();
}
extern "C" int shared_array(float* y, int n, int extra, cudaStream_t s) {
  smem_over<<<1, 33, 32 * sizeof(float), s>>>(y);
  return cudaGetLastError();
}
'''

DRIVER = textwrap.dedent('''
    import ctypes, sys
    import numpy as np
    from kernels_harness.emulation import EmulatedLibrary
    lib = EmulatedLibrary(sys.argv[1])
    fn = lib.entry(sys.argv[2])
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
    y = np.zeros(1000, np.float32)
    rc = fn(y.ctypes.data, 1000, int(sys.argv[3]), None)
    ok = bool(np.all(y == 2.0 * np.arange(1000))) or "shared" in sys.argv[2]
    print("rc", rc, "ok", ok)
''')


@pytest.fixture(scope="module")
def checked_lib(tmp_path_factory):
    res = build_shared_library(SRC, tmp_path_factory.mktemp("asan") / "checked.so", checks=True)
    assert res.ok, res.log
    return res.path


def _run(path, entry, extra):
    return subprocess.run([sys.executable, "-c", DRIVER, str(path), entry, str(extra)], env=asan_environment(),
                          check=False, capture_output=True, text=True, timeout=120)


def test_in_bounds_kernels_run_normally_under_asan(checked_lib):
    for entry in ("host_array", "device_array", "fibers_ok"):
        p = _run(checked_lib, entry, 0)
        assert p.returncode == 0, p.stderr[-3000:]
        assert "rc 0 ok True" in p.stdout


@pytest.mark.parametrize("entry, what", [("host_array", "out-of-bounds write of 4 bytes in kernel `fill`"),
                                         ("device_array", "out-of-bounds write of 4 bytes in kernel `fill`"),
                                         ("shared_array", "out-of-bounds write of 4 bytes in kernel `smem_over`"),
                                         ("static_shared_array",
                                          "out-of-bounds write of 4 bytes in kernel `static_smem_over`")])
def test_out_of_bounds_writes_are_caught_and_summarized(checked_lib, entry, what):
    p = _run(checked_lib, entry, 0 if "shared" in entry else 1)
    assert p.returncode == ASAN_EXIT_CODE, (p.stdout, p.stderr[-3000:])
    summary = summarize_report(p.stderr)
    assert summary.startswith(what), summary
    assert "heap-buffer-overflow" in summary and "solution.cu:" in summary and "\n" not in summary


def test_checks_library_refuses_to_load_without_asan(checked_lib):
    with pytest.raises(LibraryLoadError, match="asan_environment"):
        EmulatedLibrary(checked_lib)
