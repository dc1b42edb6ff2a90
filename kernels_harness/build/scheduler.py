"""The pool's build scheduler: one Future per distinct build, the disk cache, batches of candidates.

    sched = BuildScheduler(compile_pool, out_dir, "cuda", batch_size=16, cache=BuildCache())
    fut = sched.request("solution", source, entry)    # Future[build dict]; the same build, the same Future
    sched.flush()                                      # queued solutions -> batches -> compile workers

A build dict is {ok, log, path, resources, seconds, symbol (the entry's name in `path`), batch_size}.
`request` answers from memory or the disk cache (kernels_harness.build.cache) when it can; otherwise
a solution that can share a library (kernels_harness.build.batch.unbatchable) waits for `flush`, which
cuts the queue into batches (at most `batch_size`, fewer when there are not enough to keep every
compile worker busy) and submits each as one compile job; members the batch could not take are then
built alone, each as its own job (so a broken candidate gets its own log and costs the others
nothing). Everything else (C references, unbatchable sources, batch_size 1) is built alone at once.
"""
from __future__ import annotations

import hashlib
import math
import os
import subprocess
import threading
import time
from concurrent.futures import Future

from kernels_harness.build import batch as batch_lib
from kernels_harness.build.cache import BuildCache, build_key

_FAILED_WORKER = "the compiler worker failed"


def _version(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False).stdout.strip().splitlines()
        return out[0] if out else "?"
    except (OSError, subprocess.SubprocessError):
        return "none"


def compiler_ids(backend: str, arch: str, checks: bool, resources: bool) -> dict[str, str]:
    """{kind: compiler identity} for the cache keys ("none" where a compiler is missing)."""
    ids = {"c_reference": _version(["gcc", "--version"]) + " | " + _version(["g++", "--version"])}
    nv = "none"
    try:
        from kernels_harness.build import nvcc
        nv = nvcc.compiler_id(arch)
    except Exception:  # noqa: BLE001, S110 - no usable nvcc: its id stays "none"
        pass
    if backend == "cuda":
        ids["solution"] = nv
    else:
        try:
            from kernels_harness.emulation.build import compiler_id
            emu = compiler_id(checks)
        except Exception:  # noqa: BLE001 - no usable emulation compiler: its id is "none"
            emu = "none"
        ids["solution"] = emu + (" | ptxas " + nv if resources else "")
    return ids


class BuildScheduler:
    """See the module docstring. `compile_pool` has submit(*build_args) and submit_batch(*batch_args)
    (kernels_harness.run.workers.CompilePool); `workers` is its size."""

    def __init__(self, compile_pool, out_dir: str, backend: str, *, arch: str = "sm_90", checks: bool = True,
                 resources: bool = True, timeout_s: float = 120.0, batch_size: int = 16,
                 cache: BuildCache | None = None, workers: int = 1):
        self.pool, self.out_dir, self.backend = compile_pool, out_dir, backend
        self.arch, self.checks, self.resources, self.timeout_s = arch, checks, resources, timeout_s
        self.batch_size, self.cache, self.workers = batch_size, cache, max(1, workers)
        self._futures: dict[str, Future] = {}
        self._queue: list[tuple[str, str, str, Future]] = []
        self._lock = threading.Lock()
        self._ids: dict[str, str] | None = None
        self._nbatch = 0
        self.done_at: list[float] = []  # time.perf_counter() when each build's Future was answered
        self.stats = {"requests": 0, "memory_hits": 0, "disk_hits": 0, "alone_builds": 0, "batches": 0,
                      "batched_members": 0, "batch_rejects": 0}

    # ---- keys -----------------------------------------------------------------------------------------
    def key(self, kind: str, source: str, entry: str) -> str:
        if self._ids is None:
            self._ids = compiler_ids(self.backend, self.arch, self.checks, self.resources)
        return build_key(kind, self.backend, source, entry, compiler=self._ids.get(kind, ""), arch=self.arch,
                         checks=self.checks, resources=self.resources and kind == "solution")

    def _legacy_key(self, kind: str, source: str) -> str:
        return hashlib.sha256("\0".join([kind, self.backend, self.arch, str(self.checks), source])
                              .encode()).hexdigest()

    # ---- requests -------------------------------------------------------------------------------------
    def request(self, kind: str, source: str, entry: str) -> Future:
        """The Future of this build (one per distinct build, across calls)."""
        legacy = self.batch_size <= 1 and self.cache is None
        key = self._legacy_key(kind, source) if legacy else self.key(kind, source, entry)
        with self._lock:
            self.stats["requests"] += 1
            fut = self._futures.get(key)
            if fut is not None and not (fut.done() and _FAILED_WORKER in (fut.result().get("log") or "")):
                self.stats["memory_hits"] += 1
                return fut
            hit = self.cache.get(key, self.out_dir) if self.cache is not None else None
            fut = Future()
            self._futures[key] = fut
            if hit is not None:
                self.stats["disk_hits"] += 1
                hit.setdefault("symbol", entry)
                fut.set_result(hit)
                return fut
            if kind == "solution" and self.batch_size > 1 and not batch_lib.unbatchable(source, entry):
                self._queue.append((key, source, entry, fut))
                return fut
        self._alone(key, kind, source, entry, fut)
        return fut

    def rebuild_alone(self, kind: str, source: str, entry: str) -> Future:
        """A fresh build of one source in a library of its own (not cached: for retries)."""
        fut: Future = Future()
        self._alone(self.key(kind, source, entry) + "_alone", kind, source, entry, fut, store=False)
        return fut

    def _alone(self, key: str, kind: str, source: str, entry: str, fut: Future, store: bool = True) -> None:
        self.stats["alone_builds"] += 1
        out = os.path.join(self.out_dir, f"{kind}_{key[:24]}.so")
        job = self.pool.submit(kind, self.backend, source, out, self.timeout_s, self.arch, self.checks,
                               self.resources and kind == "solution")

        def done(f: Future) -> None:
            try:
                rec = f.result()
            except Exception as e:  # noqa: BLE001 - the compile thread itself failed
                rec = {"ok": False, "log": f"{_FAILED_WORKER}: {type(e).__name__}: {e}", "path": None,
                       "resources": {}, "seconds": 0.0}
            rec.setdefault("symbol", entry)
            rec.setdefault("batch_size", 1)
            if store and self.cache is not None:
                self.cache.put(key, rec)
            self.done_at.append(time.perf_counter())
            fut.set_result(rec)
        job.add_done_callback(done)

    # ---- batches --------------------------------------------------------------------------------------
    def flush(self) -> None:
        """Submits every queued solution, in batches (see the module docstring)."""
        with self._lock:
            queue, self._queue = self._queue, []
        if not queue:
            return
        size = max(2, min(self.batch_size, math.ceil(len(queue) / self.workers)))
        for lo in range(0, len(queue), size):
            chunk = queue[lo:lo + size]
            if len(chunk) == 1:
                key, source, entry, fut = chunk[0]
                self._alone(key, "solution", source, entry, fut)
                continue
            self._submit_batch(chunk)

    def _submit_batch(self, chunk: list) -> None:
        self._nbatch += 1
        self.stats["batches"] += 1
        out = os.path.join(self.out_dir, f"batch_{os.getpid()}_{self._nbatch}.so")
        members = [(source, entry, *batch_lib.names_for(key)) for key, source, entry, _ in chunk]
        job = self.pool.submit_batch(self.backend, members, out, self.timeout_s, self.arch, self.checks,
                                     self.resources)

        def done(f: Future) -> None:
            try:
                res = f.result()
            except Exception:  # noqa: BLE001 - the compile worker died: every member is built alone below
                res = {}
            built = res.get("built") if isinstance(res, dict) else None
            if built is None:  # the compile worker died or timed out: everyone alone
                built, alone = {}, list(range(len(chunk)))
            else:
                alone = list(res.get("alone", []))
            self.stats["batched_members"] += len(built)
            self.stats["batch_rejects"] += len(alone)
            for k, rec in built.items():
                key, _, _, fut = chunk[int(k)]
                if self.cache is not None:
                    self.cache.put(key, rec)
                self.done_at.append(time.perf_counter())
                fut.set_result(rec)
            for k in alone:
                key, source, entry, fut = chunk[k]
                self._alone(key, "solution", source, entry, fut)
        job.add_done_callback(done)
