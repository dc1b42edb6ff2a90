"""What the cpu backend costs: emulated GPU threads per second for a barrier-free kernel (plain loop
over the threads of a block), a barrier-heavy one and a shuffle-heavy one (threads as fibers), with one
host thread and with all cores.

    python benchmarks/emulation.py [--quick]    # prints a table, writes benchmarks/results/emulation.json (+ .png)

Times are medians of repeated launches of the built library (build time reported apart).
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernels_harness.emulation import EmulatedLibrary, build_shared_library

SOURCE = r'''
#include <cuda_runtime.h>
__global__ void elementwise(const float* x, float* y, int n) {        // no barrier: plain loop
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i] + 1.0f;
}
__global__ void barrier_heavy(const float* x, float* y, int n, int rounds) {  // `rounds` barriers per thread
  __shared__ float s[256];
  int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  float v = i < n ? x[i] : 0.f;
  for (int r = 0; r < rounds; ++r) {
    s[t] = v;
    __syncthreads();
    v = 0.5f * (v + s[(t + 1) & 255]);
    __syncthreads();
  }
  if (i < n) y[i] = v;
}
__global__ void shuffle_heavy(const float* x, float* y, int n) {       // 5 shuffles per thread
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = i < n ? x[i] : 0.f;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (i < n) y[i] = v;
}
extern "C" int run_elementwise(const float* x, float* y, int n, int rounds, cudaStream_t s) {
  elementwise<<<(n + 255) / 256, 256, 0, s>>>(x, y, n); return cudaGetLastError();
}
extern "C" int run_barrier(const float* x, float* y, int n, int rounds, cudaStream_t s) {
  barrier_heavy<<<(n + 255) / 256, 256, 0, s>>>(x, y, n, rounds); return cudaGetLastError();
}
extern "C" int run_shuffle(const float* x, float* y, int n, int rounds, cudaStream_t s) {
  shuffle_heavy<<<(n + 255) / 256, 256, 0, s>>>(x, y, n); return cudaGetLastError();
}
'''

# name, entry, threads launched, barriers per thread (2 per round), description
KERNELS = [("barrier-free", "run_elementwise", 1 << 22, 0, "y = 2x + 1, one thread per element"),
           ("barrier-heavy", "run_barrier", 1 << 16, 16, "8 rounds of 2 __syncthreads, 256 threads/block"),
           ("shuffle-heavy", "run_shuffle", 1 << 18, 0, "5 __shfl_xor_sync per thread")]


def measure(lib: EmulatedLibrary, entry: str, n: int, rounds: int, reps: int) -> float:
    fn = lib.entry(entry)
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    y = np.zeros(n, np.float32)
    times = []
    for _ in range(reps + 1):  # the first call warms the pool and the fiber stacks
        t0 = time.perf_counter()
        rc = fn(x.ctypes.data, y.ctypes.data, n, rounds, None)
        times.append(time.perf_counter() - t0)
        if rc != 0:
            raise RuntimeError(f"{entry} failed: {lib.last_error()}")
    return float(np.median(times[1:]))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a quarter of the work, 2 repetitions")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    args = ap.parse_args(argv)
    reps, scale = (2, 4) if args.quick else (5, 1)
    work = Path(tempfile.mkdtemp(prefix="cudaperf_emu_bench_"))
    t0 = time.perf_counter()
    res = build_shared_library(SOURCE, work / "bench.so", checks=False)
    if not res.ok:
        print("the benchmark kernels do not build: " + res.log.splitlines()[0])
        return 1
    build_s = time.perf_counter() - t0
    lib = EmulatedLibrary(res.path)
    cores = os.cpu_count() or 1
    rows = []
    for name, entry, threads, barriers, what in KERNELS:
        threads //= scale
        for host_threads in sorted({1, cores}):
            lib.set_threads(host_threads)
            try:
                sec = measure(lib, entry, threads, barriers // 2, reps)
                rows.append({"kernel": name, "description": what, "gpu_threads": threads, "host_threads": host_threads,
                             "seconds": sec, "threads_per_s": threads / sec,
                             "barriers_per_s": threads * barriers / sec if barriers else None})
            except Exception as e:  # noqa: BLE001 - a failing row is reported, the others still run
                rows.append({"kernel": name, "host_threads": host_threads, "error": str(e)})
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"machine": platform.machine(), "cpu_count": cores, "python": platform.python_version(),
            "build_seconds": round(build_s, 2), "quick": args.quick}
    (out / "emulation.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    _plot(rows, out / "emulation.png")
    print(f"build (rewrite + g++ -O2 + link): {build_s:.2f} s on {cores} cores")
    print(f"{'kernel':14s} {'host thr':>8s} {'GPU threads':>11s} {'seconds':>8s} {'threads/s':>10s} {'barriers/s':>10s}")
    for r in rows:
        if "error" in r:
            print(f"{r['kernel']:14s} {r['host_threads']:8d}  ERROR {r['error'][:60]}")
            continue
        bps = f"{r['barriers_per_s']:10.3g}" if r["barriers_per_s"] else f"{'-':>10s}"
        print(f"{r['kernel']:14s} {r['host_threads']:8d} {r['gpu_threads']:11d} {r['seconds']:8.4f} "
              f"{r['threads_per_s']:10.3g} {bps}")
    return 0


def _plot(rows, path: Path) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception:  # noqa: BLE001 - the plot is optional
        return
    ok = [r for r in rows if "error" not in r]
    fig, ax = plt.subplots(figsize=(6, 3))
    labels = [f"{r['kernel']}\n{r['host_threads']} thr" for r in ok]
    ax.bar(range(len(ok)), [r["threads_per_s"] for r in ok])
    ax.set_xticks(range(len(ok)), labels, fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("emulated GPU threads / s")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
