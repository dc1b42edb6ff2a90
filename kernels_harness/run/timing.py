"""Timing on the cuda backend: CUDA events, L2 flush, device-wide sync, adaptive repetitions.

One repetition of call k: flush L2 (write a buffer twice the L2 size), record `start` on the stream,
call, synchronise the whole device (so work the candidate put on other streams is counted), record
`end`, read the elapsed time. Calls are interleaved (candidate, baseline, then baseline, candidate on
the next round), after a warm-up. Repetitions continue until every call has at least `min_reps` and
a relative IQR below `target_rel_iqr`, or `budget_s` is spent, or `max_reps` is reached. A
cross-process file lock (`lock_path`) is held exclusively while timing and shared by the other
workers' correctness trials, so a timed candidate has the GPU to itself.
"""
from __future__ import annotations

import contextlib
import fcntl
import time

import numpy as np


def summarize(samples: list) -> dict:
    """{"median_ms", "iqr_ms", "reps", "min_ms"} of a list of times in ms."""
    a = np.asarray(samples, dtype=np.float64)
    q1, med, q3 = np.percentile(a, [25, 50, 75])
    return {"median_ms": float(med), "iqr_ms": float(q3 - q1), "reps": int(a.size), "min_ms": float(a.min())}


def _flock(f, mode: int, progress, last: list) -> None:
    while True:
        try:
            fcntl.flock(f, mode | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            time.sleep(0.002)
            if progress is not None and time.monotonic() - last[0] > 1.0:
                progress("waiting for the GPU")
                last[0] = time.monotonic()


@contextlib.contextmanager
def gpu_lock(path: str | None, shared: bool = False, progress=None):
    """The per-GPU lock: timing holds it exclusively; other device work (correctness trials) shares it,
    so nothing else runs on the GPU while a candidate is timed. A timer waiting for it first takes
    `path + ".turn"`, which new shared holders must pass, so many workers' checks cannot starve the
    timing (writer preference). While waiting, `progress("waiting for the GPU")` is called every
    second, so the pool does not mistake the wait for a hang."""
    if not path:
        yield
        return
    last = [time.monotonic()]
    with open(path + ".turn", "a+") as turn, open(path, "a+") as f:
        if shared:
            _flock(turn, fcntl.LOCK_SH, progress, last)
            try:
                _flock(f, fcntl.LOCK_SH, progress, last)
            finally:
                fcntl.flock(turn, fcntl.LOCK_UN)
        else:
            _flock(turn, fcntl.LOCK_EX, progress, last)
            try:
                _flock(f, fcntl.LOCK_EX, progress, last)
            except BaseException:
                fcntl.flock(turn, fcntl.LOCK_UN)
                raise
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
            if not shared:
                fcntl.flock(turn, fcntl.LOCK_UN)


class Timer:
    """Event timing on the backend's stream; `flush` comes from kernels_harness.run.device_kernels."""

    def __init__(self, backend, flush):
        self.be = backend
        self.cp = backend.cp
        self.flush = flush
        self.start = self.cp.cuda.Event()
        self.end = self.cp.cuda.Event()

    def once(self, call) -> float:
        cp, stream = self.cp, self.be.stream
        self.flush()
        self.start.record(stream)
        call()
        cp.cuda.runtime.deviceSynchronize()
        self.end.record(stream)
        self.end.synchronize()
        return float(cp.cuda.get_elapsed_time(self.start, self.end))

    def measure(self, calls: list, lock_path: str | None = None, warmup: int = 3, min_reps: int = 10,
                max_reps: int = 500, budget_s: float = 0.25, target_rel_iqr: float = 0.02,
                progress=None) -> list[dict]:
        """Times each zero-argument launcher in `calls`; returns one summarize() dict per call."""
        with gpu_lock(lock_path, progress=progress):
            for call in calls:
                for _ in range(warmup):
                    self.once(call)
            samples = [[] for _ in calls]
            t0 = time.perf_counter()
            rnd = 0
            while True:
                order = range(len(calls)) if rnd % 2 == 0 else reversed(range(len(calls)))
                for k in order:
                    samples[k].append(self.once(calls[k]))
                rnd += 1
                if rnd >= max_reps:
                    break
                if rnd >= min_reps:
                    stats = [summarize(s) for s in samples]
                    stable = all(s["iqr_ms"] <= target_rel_iqr * max(s["median_ms"], 1e-9) for s in stats)
                    if stable or time.perf_counter() - t0 > budget_s:
                        break
        return [summarize(s) for s in samples]
