"""Probe a GPU machine: software versions, carried wheels, an nvcc-built solution run through CuPy and
ctypes, and the device's measured peaks (kernels_harness.features.peaks: copy bandwidth, GEMM rates).

    OUT=out python benchmarks/device_probe.py       # prints a table, writes $OUT/device_probe.json

The peaks are the roofline ceilings of kernels_harness.features (measured, not datasheet numbers).
"""
from __future__ import annotations

import ctypes
import datetime
import importlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def versions() -> dict:
    out = {"python": platform.python_version()}
    for m in ("jax", "flax", "optax", "orbax.checkpoint", "cupy", "numba", "torch", "transformers",
              "tensorstore", "gguf", "tree_sitter", "tree_sitter_cuda", "ml_collections", "tensorboardX"):
        try:
            mod = importlib.import_module(m)
            out[m] = getattr(mod, "__version__", "present")
        except Exception as e:  # noqa: BLE001
            out[m] = f"missing ({type(e).__name__})"
    try:
        out["nvidia_smi"] = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm",
                                            "--format=csv,noheader"], capture_output=True, text=True,
                                           timeout=30, check=False).stdout.strip()
    except Exception as e:  # noqa: BLE001
        out["nvidia_smi"] = f"failed: {e}"
    return out


def run_solution() -> dict:
    """Builds the smoke saxpy baseline with kernels_harness.build.nvcc and runs it via CuPy + ctypes."""
    import cupy as cp
    import numpy as np

    from kernels_harness.build import nvcc
    from kernels_harness.tasks.schema import load_task
    task = load_task(Path(__file__).resolve().parents[1] / "experiments/suites/smoke/smoke_saxpy.json")
    res = {}
    with tempfile.TemporaryDirectory() as tmp:
        for impl in task.implementations:
            b = nvcc.build_shared(impl.source, Path(tmp) / f"{impl.name}.so")
            lib = ctypes.CDLL(str(b.path))
            fn = getattr(lib, task.entry)
            fn.restype = ctypes.c_int
            n = 1 << 24
            x = cp.random.uniform(-1, 1, n, dtype=cp.float32)
            y0 = cp.random.uniform(-1, 1, n, dtype=cp.float32)
            y = y0.copy()
            stream = cp.cuda.Stream(non_blocking=True)
            args = [ctypes.c_int(n), ctypes.c_float(2.5), ctypes.c_void_p(x.data.ptr), ctypes.c_void_p(y.data.ptr),
                    ctypes.c_void_p(stream.ptr)]
            rc = fn(*args)
            stream.synchronize()
            err = float(cp.max(cp.abs(y - (2.5 * x + y0))).get())
            start, end = cp.cuda.Event(), cp.cuda.Event()
            times = []
            for _ in range(20):
                start.record(stream)
                fn(*args)
                end.record(stream)
                end.synchronize()
                times.append(cp.cuda.get_elapsed_time(start, end))
            res[impl.name] = {"build_s": round(b.seconds, 2), "rc": rc, "max_err_after_1_call": err,
                              "median_ms": float(np.median(times)), "resources": b.resources}
    return res


def peaks() -> dict:
    import cupy as cp

    from kernels_harness.features.peaks import measure_peaks
    out = measure_peaks()
    props = cp.cuda.runtime.getDeviceProperties(0)
    out["device"] = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in props.items()
                     if k in ("name", "multiProcessorCount", "l2CacheSize", "sharedMemPerMultiprocessor",
                              "regsPerMultiprocessor", "maxThreadsPerMultiProcessor", "clockRate",
                              "memoryClockRate", "memoryBusWidth", "totalGlobalMem", "major", "minor")}
    return out


def main():
    out_dir = Path(os.environ.get("OUT", "out"))
    out_dir.mkdir(parents=True, exist_ok=True)
    report = {"date": datetime.datetime.now(datetime.UTC).isoformat(), "versions": versions()}
    for name, fn in (("solution", run_solution), ("peaks", peaks)):
        t0 = time.perf_counter()
        try:
            report[name] = fn()
        except Exception as e:  # noqa: BLE001 - a probe reports, it does not stop
            report[name] = {"error": f"{type(e).__name__}: {e}"}
        report[f"{name}_seconds"] = round(time.perf_counter() - t0, 2)
    (out_dir / "device_probe.json").write_text(json.dumps(report, indent=2, default=str))
    print(json.dumps(report["versions"], indent=1))
    for k, v in report.get("solution", {}).items():
        print(f"{k:>20}: {v if not isinstance(v, dict) else {kk: vv for kk, vv in v.items() if kk != 'resources'}}")
    for k, v in report.get("peaks", {}).items():
        if k not in ("device", "date", "source"):
            print(f"{k:>24}: {v}")
    print(report.get("peaks", {}).get("device"))


if __name__ == "__main__":
    main()
