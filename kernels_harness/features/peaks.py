"""Measured device peaks (the roofline ceilings): copy bandwidth, fp32/fp64 GEMM (CuPy, TF32 off) and
bf16 GEMM (torch). Needs an NVIDIA GPU with CuPy; cache the result with roofline.save_peaks.

    peaks = measure_peaks()          # {source, date, device, sms, bandwidth_GBps, fp32_TFLOPs, ...}
"""
from __future__ import annotations

import datetime


def measure_copy_bandwidth(n_bytes: int = 1 << 29, reps: int = 20) -> float:
    """Device-to-device copy bandwidth in GB/s, counting bytes read plus bytes written (CuPy, events)."""
    import cupy as cp
    ev0, ev1 = cp.cuda.Event(), cp.cuda.Event()
    a, b = cp.ones(n_bytes, dtype=cp.uint8), cp.empty(n_bytes, dtype=cp.uint8)
    for _ in range(3):
        b[...] = a
    ev0.record()
    for _ in range(reps):
        b[...] = a
    ev1.record()
    ev1.synchronize()
    return 2 * n_bytes * reps / (cp.cuda.get_elapsed_time(ev0, ev1) * 1e-3) / 1e9


def measure_peaks() -> dict:
    import cupy as cp
    out = {"source": "measured", "date": datetime.datetime.now(datetime.UTC).isoformat()}
    props = cp.cuda.runtime.getDeviceProperties(0)
    out["device"] = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    out["sms"] = props["multiProcessorCount"]
    out["bandwidth_GBps"] = measure_copy_bandwidth()
    ev0, ev1 = cp.cuda.Event(), cp.cuda.Event()
    for name, dtype, m, reps in (("fp32_TFLOPs", cp.float32, 8192, 5), ("fp64_TFLOPs", cp.float64, 4096, 5)):
        try:
            x = cp.random.standard_normal((m, m)).astype(dtype)
            cp.matmul(x, x)
            ev0.record()
            for _ in range(reps):
                cp.matmul(x, x)
            ev1.record()
            ev1.synchronize()
            out[name] = 2 * m ** 3 * reps / (cp.cuda.get_elapsed_time(ev0, ev1) * 1e-3) / 1e12
            del x
        except Exception as e:  # noqa: BLE001
            out[name + "_error"] = str(e)[:200]
    try:
        import torch
        m = 8192
        x = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
        torch.matmul(x, x)
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(10):
            torch.matmul(x, x)
        e.record()
        torch.cuda.synchronize()
        out["bf16_TFLOPs"] = 2 * m ** 3 * 10 / (s.elapsed_time(e) * 1e-3) / 1e12
    except Exception as e:  # noqa: BLE001
        out["bf16_error"] = str(e)[:200]
    return out
