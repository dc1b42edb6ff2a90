"""Measuring one task on an NVIDIA GPU (CuPy): inputs, calls through ctypes, agreement with the
baseline, CUDA-event timing with L2 flushes, and PyTorch eager times for torch2cuda tasks.

Used by kernels_harness.datasets.measure (in its worker process); `cp` is the cupy module.
"""
from __future__ import annotations

import ctypes
import time

import numpy as np

from kernels_harness.tasks.schema import Task, config_env

_C_SCALAR = {"int32": ctypes.c_int, "int64": ctypes.c_longlong, "float32": ctypes.c_float,
             "float64": ctypes.c_double, "uint32": ctypes.c_uint, "int16": ctypes.c_short,
             "int8": ctypes.c_byte, "uint8": ctypes.c_ubyte, "uint64": ctypes.c_ulonglong, "bool": ctypes.c_bool}


# ---- inputs, calls, comparison ---------------------------------------------------------------------
def _np_dtype(name: str):
    return np.dtype({"bfloat16": "float32"}.get(name, name))


def make_inputs(cp, task: Task, config: dict, rng: np.random.Generator) -> dict:
    from kernels_harness.tasks import inits
    env = config_env(config)
    arrays = {}
    for a in task.arrays:
        shape = task.shape(a, env)
        dt = _np_dtype(a.dtype)
        if a.role == "out":
            arrays[a.name] = cp.empty(shape, dtype=dt)
            continue
        init = a.init or ("randint(0, 100)" if dt.kind in "iub" else "uniform(-1, 1)")
        name, args = inits.parse(init)
        vals = [float(inits.expr_lib.evaluate(x, env)) for x in args]
        n = int(np.prod(shape))
        if name == "uniform" and dt.kind == "f":
            lo, hi = (vals + [-1.0, 1.0])[:2] if vals else (-1.0, 1.0)
            arr = cp.random.uniform(lo, hi, size=shape).astype(dt)
        elif name == "normal":
            mu, sd = (vals + [0.0, 1.0])[:2] if vals else (0.0, 1.0)
            arr = cp.random.normal(mu, sd, size=shape).astype(dt)
        elif name in ("randint", "uniform") and dt.kind in "iu":
            lo, hi = (int(vals[0]), int(vals[1])) if len(vals) == 2 else (0, 100)
            arr = cp.random.randint(lo, hi, size=shape).astype(dt)
        elif name == "permutation":
            arr = cp.random.permutation(n).astype(dt).reshape(shape)
        elif name == "bernoulli":
            arr = (cp.random.random(shape) < (vals[0] if vals else 0.5)).astype(dt)
        else:  # csr_rowptr, sorted_uniform, spd_diag, arange, constants: numpy, then copied
            arr = cp.asarray(inits.generate(init, rng, shape, dt, env))
        arrays[a.name] = cp.ascontiguousarray(arr)
    return arrays


def call_args(task: Task, config: dict, arrays: dict, stream_ptr: int) -> list:
    env = config_env(config)
    args = []
    for a in task.signature:
        if a.is_array:
            args.append(ctypes.c_void_p(arrays[a.name].data.ptr))
        else:
            args.append(_C_SCALAR[a.dtype](task.scalar(a, env)))
    args.append(ctypes.c_void_p(stream_ptr))
    return args


def poison(cp, arr) -> None:
    if arr.dtype.kind == "f":
        arr.fill(np.nan)
    else:
        arr.fill(np.iinfo(arr.dtype).max // 3)


def compare(cp, task: Task, config: dict, got: dict, ref: dict) -> tuple[bool, float]:
    worst, ok = 0.0, True
    for a in task.outputs:
        g, r = got[a.name], ref[a.name]
        atol, rtol = task.tolerance_for(a.dtype, config)
        if g.dtype.kind == "f":
            bad_nan = cp.isnan(g) & ~cp.isnan(r)
            diff = cp.abs(g.astype(cp.float64) - r.astype(cp.float64))
            lim = atol + rtol * cp.abs(r.astype(cp.float64))
            fails = bool(cp.any(bad_nan | (diff > lim)))
            err = float(cp.nanmax(diff)) if diff.size else 0.0
        else:
            diff = cp.abs(g.astype(cp.int64) - r.astype(cp.int64))
            fails = bool(cp.any(diff > atol))
            err = float(cp.max(diff)) if diff.size else 0.0
        ok = ok and not fails
        worst = max(worst, err if np.isfinite(err) else float("inf"))
    return ok, worst


# Timing defaults: repetitions of one (implementation, config) until they sum to TARGET_MS, at least
# MIN_REPS and at most MAX_REPS, each after writing FLUSH_MB of memory to evict the L2 cache.
TARGET_MS, MIN_REPS, MAX_REPS, FLUSH_MB = 40.0, 3, 30, 256


class Timer:
    def __init__(self, cp, flush_bytes: int = FLUSH_MB << 20, target_ms: float = TARGET_MS, max_reps: int = MAX_REPS):
        self.cp, self.target_ms, self.max_reps = cp, target_ms, max_reps
        self.flush = cp.empty(flush_bytes // 4, dtype=cp.float32)
        self.stream = cp.cuda.Stream()  # blocking: ordered after work on the legacy default stream

    def time(self, fn, args) -> tuple[float, float, int, int]:
        """(median ms, IQR ms, repetitions, return code of the first call)."""
        cp = self.cp
        with self.stream:
            rc = fn(*args)
            self.stream.synchronize()
            cp.cuda.runtime.deviceSynchronize()
            times = []
            start, end = cp.cuda.Event(), cp.cuda.Event()
            while len(times) < self.max_reps:
                self.flush.fill(0)
                start.record(self.stream)
                fn(*args)
                cp.cuda.runtime.deviceSynchronize()
                end.record(self.stream)
                end.synchronize()
                times.append(cp.cuda.get_elapsed_time(start, end))
                if len(times) >= MIN_REPS and sum(times) >= self.target_ms:
                    break
        q1, med, q3 = np.percentile(times, [25, 50, 75])
        return float(med), float(q3 - q1), len(times), int(rc)


def torch_eager_ms(cp, timer: Timer, task: Task, config: dict) -> float | None:
    """PyTorch eager time of a torch2cuda module on this config (the track's baseline), or None."""
    try:
        import torch
    except ImportError:
        return None
    from kernels_harness.tasks.torch_source import module_mode, set_module_mode
    ns: dict = {"__name__": "measure_module"}
    exec(compile(task.source, f"<{task.id}>", "exec"), ns)  # noqa: S102 - the task's own module
    for k in task.extra.get("constants", []):
        if k in config:
            ns[k] = config[k]
    torch.manual_seed(0)
    model = set_module_mode(ns["Model"](*ns["get_init_inputs"]()).cuda(), module_mode(task))
    inputs = [x.cuda() if hasattr(x, "cuda") else x for x in ns["get_inputs"]()]
    times = []
    with torch.no_grad():
        model(*inputs)
        torch.cuda.synchronize()
        while len(times) < timer.max_reps:
            timer.flush.fill(0)
            cp.cuda.runtime.deviceSynchronize()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            model(*inputs)
            torch.cuda.synchronize()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
            if len(times) >= MIN_REPS and sum(times) >= timer.target_ms:
                break
    del model, inputs
    torch.cuda.empty_cache()
    return float(np.median(times))


# ---- one task ------------------------------------------------------------------------------------
def measure_task(cp, timer: Timer, ti: int, task: Task, fns: dict, seed: int, deadline: float) -> dict:
    rec = {"task": task.id, "family": task.family, "track": task.track, "split": task.split,
           "impls": [i.name for i in task.implementations], "strategies": [list(i.strategies) for i in task.implementations],
           "expected": [i.expected for i in task.implementations],
           "baseline": next((k for k, i in enumerate(task.implementations) if i.baseline), 0),
           "configs": [c.get("name", str(k)) for k, c in enumerate(task.configs)],
           "time_ms": [], "iqr_ms": [], "agrees": [], "max_err": [], "errors": []}
    if task.track == "torch2cuda":
        rec["torch_eager_ms"] = [None] * len(task.configs)
    rng = np.random.default_rng(seed)
    n_i = len(task.implementations)
    for ci, config in enumerate(task.configs):
        row_t, row_q, row_a, row_e = [None] * n_i, [None] * n_i, [None] * n_i, [None] * n_i
        if time.time() > deadline:
            rec["errors"].append(f"config {ci}: out of time")
            rec["incomplete"] = True  # cut by the run's deadline: a resumed run measures this task again
            for lst, row in ((rec["time_ms"], row_t), (rec["iqr_ms"], row_q), (rec["agrees"], row_a), (rec["max_err"], row_e)):
                lst.append(row)
            continue
        try:
            arrays = make_inputs(cp, task, config, rng)
            pristine = {a.name: arrays[a.name].copy() for a in task.arrays if a.role == "inout"}
            stream_ptr = timer.stream.ptr
            base = rec["baseline"]
            order = [base] + [k for k in range(n_i) if k != base]
            ref = None
            for ii in order:
                fn, log = fns.get((ti, ii), (None, "not built"))
                if fn is None:
                    rec["errors"].append(f"{task.implementations[ii].name}: build failed: {log[-300:]}")
                    continue
                try:
                    for name, arr in pristine.items():
                        arrays[name][...] = arr
                    for a in task.arrays:
                        if a.role == "out":
                            poison(cp, arrays[a.name])
                    args = call_args(task, config, arrays, stream_ptr)
                    fn.restype = ctypes.c_int
                    cp.cuda.runtime.deviceSynchronize()
                    with timer.stream:
                        rc = fn(*args)
                    cp.cuda.runtime.deviceSynchronize()
                    outs = {a.name: arrays[a.name].copy() for a in task.outputs}
                    if rc != 0:
                        raise RuntimeError(f"returned cudaError {rc}")
                    if ii == base:
                        ref = outs
                        row_a[ii], row_e[ii] = True, 0.0
                    elif ref is not None:
                        row_a[ii], row_e[ii] = compare(cp, task, config, outs, ref)
                    med, iqr, _, _ = timer.time(fn, args)
                    row_t[ii], row_q[ii] = med, iqr
                except Exception as e:
                    rec["errors"].append(f"{task.implementations[ii].name} config {ci}: {type(e).__name__}: {str(e)[:200]}")
                    if "illegal" in str(e).lower() or "sticky" in str(e).lower():
                        raise
        except Exception as e:  # noqa: BLE001
            rec["errors"].append(f"config {ci}: {type(e).__name__}: {str(e)[:300]}")
            if "illegal" in str(e).lower():
                rec["fatal"] = True
        finally:
            rec["time_ms"].append(row_t)
            rec["iqr_ms"].append(row_q)
            rec["agrees"].append(row_a)
            rec["max_err"].append(row_e)
            arrays = pristine = ref = None
            cp.get_default_memory_pool().free_all_blocks()
        if task.track == "torch2cuda" and not rec.get("fatal") and time.time() < deadline:
            try:
                rec["torch_eager_ms"][ci] = torch_eager_ms(cp, timer, task, config)
            except Exception as e:  # noqa: BLE001
                rec["errors"].append(f"torch eager config {ci}: {type(e).__name__}: {str(e)[:200]}")
        elif task.track == "torch2cuda" and time.time() >= deadline:
            rec["errors"].append(f"torch eager config {ci}: out of time")
            rec["incomplete"] = True
    return rec
