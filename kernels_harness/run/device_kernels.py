"""The harness's own device work on cuda: Numba CUDA kernels, with CuPy fallbacks.

- `make_flush(backend)`: a zero-argument function that overwrites a buffer of twice the L2 size on the
  backend's stream (evicts the candidate's data between timing repetitions).
- `make_compare(backend)`: `compare(out, ref, atol, rtol) -> dict` like kernels_harness.run.arrays.compare,
  the same rule (atol scaled to the reference's largest finite magnitude by arrays.effective_atol): one
  pass for the scale (`absmax`), one for the comparison, over float32/float64 arrays on the device
  (other dtypes go to the CuPy version).
Each returns (function, "numba" | "cupy") so the worker can report which path it used.
"""
from __future__ import annotations

import math

from kernels_harness.run import arrays

_KERNELS = {}
cuda = None  # numba.cuda, imported on first use


def _numpy2_compat():
    """numba-cuda releases up to at least 0.2x register an overload for np.row_stack, which NumPy 2.4
    removed (an alias of np.vstack since NumPy 2.0); without the alias their kernel compiler fails to
    import (seen on the H200 image: numpy 2.5.2, numba 0.68). Restores the alias in this (worker) process."""
    import numpy as np
    if not hasattr(np, "row_stack"):
        np.row_stack = np.vstack


def _numba_kernels():
    global cuda  # a module global, so that Numba's CUDA simulator can swap it in the kernels
    if _KERNELS:
        return _KERNELS
    _numpy2_compat()
    from numba import cuda as _cuda
    cuda = _cuda

    @cuda.jit
    def flush(buf, value):
        i = cuda.grid(1)
        stride = cuda.gridsize(1)
        while i < buf.size:
            buf[i] = value
            i += stride

    @cuda.jit
    def absmax(ref, acc):
        # acc: float64[1] = max |ref| over finite values
        i = cuda.grid(1)
        stride = cuda.gridsize(1)
        m = 0.0
        while i < ref.size:
            r = float(ref[i])
            if not (math.isnan(r) or math.isinf(r)):
                m = max(m, abs(r))
            i += stride
        cuda.atomic.max(acc, 0, m)

    @cuda.jit
    def compare(out, ref, atol, rtol, accf, acci):
        # accf: float64[2] = (max_abs_err, max_rel_err); acci: int64[3] = (bad, nonfinite, first_bad)
        i = cuda.grid(1)
        stride = cuda.gridsize(1)
        n = out.size
        ma = 0.0
        mr = 0.0
        nb = 0
        nf = 0
        fb = n
        while i < n:
            o = float(out[i])
            r = float(ref[i])
            rfin = not (math.isnan(r) or math.isinf(r))
            ofin = not (math.isnan(o) or math.isinf(o))
            if rfin and ofin:
                d = abs(o - r)
                ma = max(ma, d)
                mr = max(mr, d / max(abs(r), 1e-30))
                if d > atol + rtol * abs(r):
                    nb += 1
                    fb = min(fb, i)
            elif rfin:
                nf += 1
                nb += 1
                fb = min(fb, i)
            elif not ((math.isnan(r) and math.isnan(o)) or r == o):
                nb += 1
                fb = min(fb, i)
            i += stride
        cuda.atomic.max(accf, 0, ma)
        cuda.atomic.max(accf, 1, mr)
        cuda.atomic.add(acci, 0, nb)
        cuda.atomic.add(acci, 1, nf)
        cuda.atomic.min(acci, 2, fb)

    _KERNELS.update(flush=flush, compare=compare, absmax=absmax, cuda=cuda)
    return _KERNELS


def _select(k, backend) -> None:
    """Numba on the backend's GPU (its primary context is the one CuPy uses)."""
    try:
        k["cuda"].select_device(int(backend.device.id))
    except Exception:  # noqa: BLE001, S110 - best effort: numba keeps its current device
        pass


def _grid(n: int, sms: int = 132) -> int:
    return max(1, min((n + 255) // 256, sms * 8))


def make_flush(backend, use_numba: bool = True):
    cp = backend.cp
    try:
        l2 = int(cp.cuda.Device().attributes.get("L2CacheSize", 50 << 20))
    except Exception:  # noqa: BLE001 - no L2 size reported: assume 50 MiB
        l2 = 50 << 20
    buf = cp.empty(max(2 * l2 // 4, 1 << 20), dtype=cp.int32)
    if use_numba:
        try:
            k = _numba_kernels()
            _select(k, backend)
            stream = k["cuda"].external_stream(backend.stream_ptr)
            dbuf = k["cuda"].as_cuda_array(buf)
            grid = _grid(buf.size)
            counter = [0]

            def flush():
                counter[0] += 1
                k["flush"][grid, 256, stream](dbuf, counter[0])
            flush()
            backend.stream.synchronize()
            return flush, "numba"
        except Exception:  # noqa: BLE001, S110 - numba unusable: the cupy flush below
            pass

    def flush_cupy():
        buf.fill(7)
    return flush_cupy, "cupy"


def make_compare(backend, use_numba: bool = True):
    cp = backend.cp
    if use_numba:
        try:
            k = _numba_kernels()
            _select(k, backend)
            stream = k["cuda"].external_stream(backend.stream_ptr)

            def compare(out, ref, atol, rtol):
                if out.dtype.kind != "f" or out.dtype.itemsize not in (4, 8) or out.size == 0:
                    return arrays.compare(cp, out, ref, atol, rtol)
                o, r = out.reshape(-1), ref.reshape(-1)
                acc = cp.zeros(1, dtype=cp.float64)
                dr = k["cuda"].as_cuda_array(r)
                k["absmax"][_grid(r.size), 256, stream](dr, k["cuda"].as_cuda_array(acc))
                scale = float(cp.asnumpy(acc)[0])
                atol = arrays.effective_atol(atol, scale)
                accf = cp.zeros(2, dtype=cp.float64)
                acci = cp.array([0, 0, o.size], dtype=cp.int64)
                k["compare"][_grid(o.size), 256, stream](k["cuda"].as_cuda_array(o), dr,
                                                         float(atol), float(rtol), k["cuda"].as_cuda_array(accf),
                                                         k["cuda"].as_cuda_array(acci))
                f, i = cp.asnumpy(accf), cp.asnumpy(acci)
                nonfinite = int(i[1])
                return {"ok": int(i[0]) == 0, "bad": int(i[0]), "nonfinite": nonfinite,
                        "max_abs_err": float(f[0]) if not nonfinite else None,
                        "max_rel_err": float(f[1]) if not nonfinite else None,
                        "first_bad": int(i[2]) if i[0] else None, "atol": float(atol), "scale": scale}
            return compare, "numba"
        except Exception:  # noqa: BLE001, S110 - numba unusable: the cupy comparison below
            pass
    return (lambda out, ref, atol, rtol: arrays.compare(cp, out, ref, atol, rtol)), "cupy"
