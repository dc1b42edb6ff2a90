"""PoolConfig: the throughput knobs of HarnessPool (batching, the build cache, checks side by side)."""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import threading


@dataclasses.dataclass(frozen=True)
class PoolConfig:
    """How HarnessPool builds and schedules (its verdicts do not depend on these).

    batch_size: candidates compiled together into one shared library (1: one compiler call each).
    cache: keep builds in an on-disk cache shared by processes (kernels_harness.build.cache), under
      cache_dir (default $CUDAPERF_CACHE/builds), at most cache_max_bytes.
    workers_per_gpu: execution workers per GPU on cuda; their correctness checks run side by side,
      their timing one at a time (HarnessPool's own workers_per_gpu argument, if given, wins).
    oom_recheck: a check that ran out of memory while others shared the device is run again alone.
    reload_retry: a worker lost while loading a shared library of several candidates is blamed on the
      library, not the candidate: the candidate is rebuilt alone and run again.
    sandbox: execution workers run candidates under kernels_harness.run.sandbox (Landlock file and network
      rules, seccomp against processes and sockets, on cpu a candidate thread that may not write files).
    time_duplicates_once: within one `evaluate` call, an exact repeat of a (task, source) pair (common in
      RL groups; built once in any case) is checked on its own fresh inputs, but not timed again: when it
      and the first copy are both `ok`, it takes the first copy's times (seconds["timed_once"] = 1).
    reuse_compile_baseline: with HarnessPool(torch_compile=True), a torch2cuda task's torch.compile baseline is
      compiled and timed by the first job of each (task, config) only; later jobs take that median (they do not
      build or compile the module again). PyTorch eager is still timed interleaved with every candidate.
    compile_nice: niceness added to the compile workers (and their compilers), so that the execution
      workers' timing and checks get a core at once while every other core compiles (0: off).
    infra_retry_pauses_s: a check that failed in the harness's own code (its allocations on a device whose memory
      other processes hold, a worker that would not start) is run again alone after each of these pauses; if
      it still fails, the verdict is `unchecked` (no reward, no penalty) rather than the candidate's runtime_error.
    device_budget: on cuda, the share of the device memory free when the pool's workers started that its jobs may
      hold at once (each job reserves an estimate of its largest config's arrays, kernels_harness.run.assemble.
      job_device_bytes, before it takes a worker; one larger than the whole budget runs when nothing else holds
      any). 0: no budget, jobs run as they come (one that runs out of memory beside others is checked again alone,
      `oom_recheck`). For KernelBench's 10+ GiB configs beside a policy's JAX memory; start JAX first, so the
      workers see what it leaves.
    compile_memory_bytes: address-space limit of each compile worker and the compilers it runs (a source that
      makes the compiler instantiate templates without end fails with a compile error instead of taking the
      machine's memory); None: no limit.
    """
    batch_size: int = 16
    cache: bool = True
    cache_dir: str | None = None
    cache_max_bytes: int = 4 << 30
    workers_per_gpu: int = 6
    oom_recheck: bool = True
    reload_retry: bool = True
    sandbox: bool = True
    time_duplicates_once: bool = True
    reuse_compile_baseline: bool = True
    compile_nice: int = 10
    compile_memory_bytes: int | None = 8 << 30
    infra_retry_pauses_s: tuple = (1.0, 5.0)
    device_budget: float = 0.0

    def __post_init__(self):
        if not 1 <= self.batch_size <= 256:
            raise ValueError(f"PoolConfig.batch_size must be between 1 and 256, not {self.batch_size}")
        if self.cache_max_bytes < 1 << 20:
            raise ValueError("PoolConfig.cache_max_bytes must be at least 1 MiB (or set cache=False)")
        if self.compile_memory_bytes is not None and self.compile_memory_bytes < 512 << 20:
            raise ValueError("PoolConfig.compile_memory_bytes must be at least 512 MiB (or None for no limit)")
        if not 1 <= self.workers_per_gpu <= 64:
            raise ValueError(f"PoolConfig.workers_per_gpu must be between 1 and 64, not {self.workers_per_gpu}")
        if any(not 0 <= p <= 600 for p in self.infra_retry_pauses_s):
            raise ValueError("PoolConfig.infra_retry_pauses_s must be pauses of 0 to 600 seconds")
        if not 0 <= self.device_budget <= 1:
            raise ValueError(f"PoolConfig.device_budget must be a share between 0 and 1, not {self.device_budget}")
        if not 0 <= self.compile_nice <= 19:
            raise ValueError(f"PoolConfig.compile_nice must be between 0 and 19, not {self.compile_nice}")

    @classmethod
    def legacy(cls) -> PoolConfig:
        """The pool as it was before batching: one build per candidate, no disk cache, 2 workers a GPU."""
        return cls(batch_size=1, cache=False, workers_per_gpu=2, oom_recheck=False, reload_retry=False,
                   time_duplicates_once=False, reuse_compile_baseline=False, compile_nice=0,
                   infra_retry_pauses_s=())


class SharedGate:
    """Ordinary jobs pass together (`shared`); an `exclusive` holder waits until they are done and keeps
    new ones out until it is (writer preference), so a re-check has the device to itself."""

    def __init__(self):
        self._cond = threading.Condition()
        self._readers = 0
        self._writer = False
        self._waiting = 0

    @contextlib.contextmanager
    def shared(self):
        with self._cond:
            while self._writer or self._waiting:
                self._cond.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                self._cond.notify_all()

    @contextlib.contextmanager
    def exclusive(self):
        with self._cond:
            self._waiting += 1
            while self._writer or self._readers:
                self._cond.wait()
            self._waiting -= 1
            self._writer = True
        try:
            yield
        finally:
            with self._cond:
                self._writer = False
                self._cond.notify_all()


class DeviceBudget:
    """Device bytes the pool's running jobs have reserved; `hold(n)` waits until n fits beside the others' holds
    under `capacity` (a hold larger than the capacity waits until nothing else is held, then runs alone). Holds are
    granted in the order they were asked for, so a large one is not passed over by a stream of small ones."""

    def __init__(self, capacity: int):
        self.capacity = int(capacity)
        self.held = 0
        self._cond = threading.Condition()
        self._queue: collections.deque = collections.deque()

    @contextlib.contextmanager
    def hold(self, nbytes: int):
        nbytes, ticket = max(int(nbytes), 0), object()
        with self._cond:
            self._queue.append(ticket)
            while self._queue[0] is not ticket or (self.held and self.held + nbytes > self.capacity):
                self._cond.wait()
            self._queue.popleft()
            self.held += nbytes
            self._cond.notify_all()   # the next in line may fit beside this one
        try:
            yield
        finally:
            with self._cond:
                self.held -= nbytes
                self._cond.notify_all()
