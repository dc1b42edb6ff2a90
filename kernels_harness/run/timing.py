"""Timing on the cuda backend: CUDA events, L2 flush, every stream joined, adaptive repetitions.

One repetition of call k: flush L2 (write a buffer twice the L2 size), record `start` on the stream
(the legacy default stream waits for it, so work a candidate puts there cannot start early), call,
record `joined` on the legacy default stream after it has waited for the harness's stream; then
synchronise the whole device and record `end` on the stream. Two times per repetition: `joined`
(start -> joined: the candidate's stream and the legacy stream, every blocking stream with it; no host
round trip in it) and `synced` (start -> end: everything on the device, plus the host's wake-up after
the device synchronisation, a few microseconds that vary with the host's load). The joined times are
reported unless the candidate's median gap between the two exceeds the gap an empty call shows
(calibrated once per Timer, `gap_limit_ms`): then work ran on some other stream, and the synced times
(every stream drained inside the timed region) are reported instead. The gap test cannot see short work
on another stream that ends before the joined streams do, so the join is only used where the static
checks reject stream creation (kernels_harness.hacks "stream"; HarnessPool passes join="device" otherwise).
Calls are interleaved (candidate, baseline, then baseline, candidate on the next round), after a
warm-up. Repetitions continue until every call has at least `min_reps` and an IQR below
`target_rel_iqr` of its median (or below `min_iqr_ms`, the event timer's resolution), or `budget_s` is
spent, or `max_reps` is reached. A cross-process file lock
(`lock_path`) is held exclusively while timing and shared by the other workers' correctness trials,
so a timed candidate has the GPU to itself.
"""
from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import threading
import time

import numpy as np

# the prefix of progress labels for the harness's own work (kernels_harness.run.protocol.harness_stage)
HARNESS_STAGE = "harness: "


@dataclasses.dataclass(frozen=True)
class TimingParams:
    """The repetition rule of Timer.measure (see the module docstring); `as_kwargs()` is what HarnessPool's
    `timing_params` takes. The defaults are the pool's (dataset times, RL rewards); evaluation picks its own
    (cudaperf_jax.eval.config.EVAL_TIMING). Every launcher runs warmup + min_reps times at least, so a candidate
    whose call takes t seconds holds the exclusive turn of the GPU for (warmup + min_reps) * t per config, unless
    max_s cuts it short (after one warm-up and one timed call of each launcher)."""
    warmup: int = 3                  # untimed calls of each launcher first
    min_reps: int = 10               # rounds (each launcher once, interleaved) before the stop rule is asked
    max_reps: int = 500              # rounds at most
    budget_s: float = 0.25           # after min_reps: stop once this much wall time is spent
    target_rel_iqr: float = 0.02     # ... or once every launcher's IQR is below this share of its median
    min_iqr_ms: float = 0.0005       # ... or below this (the resolution of CUDA event times)
    max_s: float = 0.0               # stop once this much wall time is spent, warm-up included, even before
                                     # min_reps (each launcher warmed up once and timed once at least); 0: off

    def __post_init__(self):
        if self.warmup < 0 or self.min_reps < 1 or self.max_reps < self.min_reps:
            raise ValueError(f"timing: warmup >= 0 and 1 <= min_reps <= max_reps (got warmup={self.warmup}, "
                             f"min_reps={self.min_reps}, max_reps={self.max_reps})")
        if self.budget_s < 0 or self.target_rel_iqr < 0 or self.min_iqr_ms < 0 or self.max_s < 0:
            raise ValueError("timing: budget_s, target_rel_iqr, min_iqr_ms and max_s must be >= 0")

    def as_kwargs(self) -> dict:
        return dataclasses.asdict(self)


def summarize(samples: list) -> dict:
    """{"median_ms", "iqr_ms", "reps", "min_ms"} of a list of times in ms."""
    a = np.asarray(samples, dtype=np.float64)
    q1, med, q3 = np.percentile(a, [25, 50, 75])
    return {"median_ms": float(med), "iqr_ms": float(q3 - q1), "reps": int(a.size), "min_ms": float(a.min())}


def gpu_lock_path(root: str, device: int) -> str:
    """The lock file of GPU `device` for the workers of the pool whose directory is `root`."""
    return os.path.join(root, f"gpu{device}.lock")


def gpu_lock_files(path: str) -> list[str]:
    """The files `gpu_lock(path)` opens: a sandboxed worker must be allowed to write exactly these."""
    return [path, path + ".turn"]


def _flock(f, mode: int, progress, last: list) -> None:
    pause = 0.0001  # short waits (a check finishing) end within ~0.1 ms; long ones back off to 2 ms polls
    while True:
        try:
            fcntl.flock(f, mode | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            time.sleep(pause)
            pause = min(2 * pause, 0.002)
            if progress is not None and time.monotonic() - last[0] > 1.0:
                progress(HARNESS_STAGE + "waiting for the GPU")
                last[0] = time.monotonic()


_HELD = threading.local()   # lock path -> "shared" | "exclusive", what this thread holds now


@contextlib.contextmanager
def gpu_lock(path: str | None, shared: bool = False, progress=None):
    """The per-GPU lock: timing holds it exclusively; other device work (correctness trials) shares it,
    so nothing else runs on the GPU while a candidate is timed. A timer waiting for it first takes
    `path + ".turn"`, which new shared holders must pass, so many workers' checks cannot starve the
    timing (writer preference). While waiting, `progress("harness: waiting for the GPU")` is called every
    second, so the pool does not mistake the wait for a hang. A thread that holds the lock already passes a nested
    request it covers (shared inside shared or exclusive, exclusive inside exclusive) at once: asking again would
    wait behind a timer that waits for this very thread (e.g. torch.compile's first run of a graph that is compiled
    again inside the timed region)."""
    if not path:
        yield
        return
    held = getattr(_HELD, "locks", None)
    if held is None:
        held = _HELD.locks = {}
    if held.get(path) == "exclusive" or (shared and held.get(path) == "shared"):
        yield
        return
    last = [time.monotonic()]
    lock, turn_path = gpu_lock_files(path)
    with open(turn_path, "a+") as turn, open(lock, "a+") as f:
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
        held[path] = "shared" if shared else "exclusive"
        try:
            yield
        finally:
            del held[path]
            fcntl.flock(f, fcntl.LOCK_UN)
            if not shared:
                fcntl.flock(turn, fcntl.LOCK_UN)


class _Heartbeat:
    """Calls `fn()` when called, at most every `every_s` seconds (nothing when fn is None)."""

    def __init__(self, fn, every_s: float = 0.5):
        self.fn, self.every_s, self.last = fn, every_s, time.monotonic()

    def __call__(self) -> None:
        if self.fn is not None and time.monotonic() - self.last >= self.every_s:
            self.fn()
            self.last = time.monotonic()


_LEGACY_STREAM = 1  # cudaStreamLegacy: the legacy default stream, whatever the caller's default-stream mode


class Timer:
    """Event timing on the backend's stream; `flush` comes from kernels_harness.run.device_kernels.
    `join`: "auto" (the joined times unless work ran elsewhere, see the module docstring) or "device"
    (always the synced times: the timer before 2026-12-06)."""

    def __init__(self, backend, flush, join: str = "auto"):
        if join not in ("auto", "device"):
            raise ValueError(f"Timer join must be 'auto' or 'device', not {join!r}")
        self.be = backend
        self.cp = backend.cp
        self.flush = flush
        self.join = join
        self.start = self.cp.cuda.Event()
        self.joined = self.cp.cuda.Event()
        self.mid = self.cp.cuda.Event(disable_timing=True)
        self.end = self.cp.cuda.Event()
        self.gap_limit_ms: float | None = None

    def pair(self, call) -> tuple[float, float]:
        """(joined ms, synced ms) of one repetition of `call` (see the module docstring)."""
        cp, stream = self.cp, self.be.stream
        rt = cp.cuda.runtime
        self.flush()
        self.start.record(stream)
        rt.streamWaitEvent(_LEGACY_STREAM, self.start.ptr, 0)
        call()
        self.mid.record(stream)
        rt.streamWaitEvent(_LEGACY_STREAM, self.mid.ptr, 0)
        rt.eventRecord(self.joined.ptr, _LEGACY_STREAM)
        rt.deviceSynchronize()
        self.end.record(stream)
        self.end.synchronize()
        return (float(cp.cuda.get_elapsed_time(self.start, self.joined)),
                float(cp.cuda.get_elapsed_time(self.start, self.end)))

    def once(self, call) -> float:
        """The synced time of one repetition (every stream drained inside the timed region)."""
        return self.pair(call)[1]

    def calibrate(self, reps: int = 40) -> float:
        """The largest gap (synced - joined, ms) a call may show before its synced times are reported: the
        host's wake-up after the device synchronisation on an empty call (p90 of `reps` repetitions), times 3,
        plus 20 us: generous, so that a busier host later does not flip a config to the other protocol (the
        join is used where no other stream can be reached anyway). Call it under the lock."""
        gaps = [b - a for a, b in (self.pair(lambda: 0) for _ in range(reps))]
        self.gap_limit_ms = 3.0 * float(np.percentile(gaps, 90)) + 0.02
        return self.gap_limit_ms

    def measure(self, calls: list, lock_path: str | None = None, warmup: int = 3, min_reps: int = 10,
                max_reps: int = 500, budget_s: float = 0.25, target_rel_iqr: float = 0.02,
                progress=None, join: str | None = None, min_iqr_ms: float = 0.0005,
                heartbeat=None, max_s: float = 0.0) -> list[dict]:
        """Times each zero-argument launcher in `calls`; returns one summarize() dict per call, with
        "join" ("stream" or "device": which times it reports) and "sync_gap_ms" (median synced - joined).
        `join` overrides the Timer's mode for this call. A call is stable when its IQR is at most
        `target_rel_iqr` of its median or `min_iqr_ms` (0.5 us: the resolution of CUDA event times, below
        which a few-microsecond kernel's IQR cannot be asked to go). `heartbeat()`, if given, is called before
        a repetition once half a second has passed since the last call of it (outside the timed region): the
        pool then allows each repetition its own call limit, not one limit for all of them together. `max_s` > 0:
        the measurement stops once that much wall time is spent (warm-up included), even before min_reps, after
        one warm-up and one timed repetition of each launcher at least (a slow candidate does not hold the GPU for
        warmup + min_reps of its calls)."""
        mode = join or self.join
        if mode not in ("auto", "device"):
            raise ValueError(f"join must be 'auto' or 'device', not {mode!r}")
        beat = _Heartbeat(heartbeat)
        with gpu_lock(lock_path, progress=progress):
            if mode == "auto" and self.gap_limit_ms is None:
                self.calibrate()
            t_start = time.perf_counter()

            def over() -> bool:
                return max_s > 0 and time.perf_counter() - t_start > max_s
            for call in calls:
                for w in range(warmup):
                    if w and over():
                        break
                    beat()
                    self.pair(call)
            joined = [[] for _ in calls]
            synced = [[] for _ in calls]
            t0 = time.perf_counter()
            rnd = 0
            while True:
                order = range(len(calls)) if rnd % 2 == 0 else reversed(range(len(calls)))
                for k in order:
                    beat()
                    a, b = self.pair(calls[k])
                    joined[k].append(a)
                    synced[k].append(b)
                rnd += 1
                if rnd >= max_reps or over():
                    break
                if rnd >= min_reps:
                    stats = [summarize(self._pick(j, s, mode)[0]) for j, s in zip(joined, synced)]
                    stable = all(s["iqr_ms"] <= max(target_rel_iqr * s["median_ms"], min_iqr_ms) for s in stats)
                    if stable or time.perf_counter() - t0 > budget_s:
                        break
        out = []
        for j, s in zip(joined, synced):
            samples, how = self._pick(j, s, mode)
            out.append({**summarize(samples), "join": how,
                        "sync_gap_ms": float(np.median(np.asarray(s) - np.asarray(j)))})
        return out

    def _pick(self, joined: list, synced: list, mode: str) -> tuple[list, str]:
        """The samples to report: the joined ones unless work ran outside the joined streams."""
        if mode != "auto" or self.gap_limit_ms is None:
            return synced, "device"
        gap = float(np.median(np.asarray(synced) - np.asarray(joined)))
        return (joined, "stream") if gap <= self.gap_limit_ms else (synced, "device")
