"""Pool-side handles of worker processes: execution workers (own subprocesses) and the compile pool.

`ExecWorker` starts `python -m kernels_harness.run.worker` in a private temporary directory with a
scrubbed environment and its own session, talks to it over a socket pair, and kills the whole
process group on a hang, a crash or `close()`. `run(job)` returns the protocol's dict or raises
`WorkerLost(kind, message)` with kind "timeout" or "runtime_error"; the caller replaces the worker.
`CompilePool` runs compile jobs (one build, or a batch) in the same kind of worker processes (role "compile").
"""
from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import Future, ThreadPoolExecutor
from multiprocessing.connection import Connection
from pathlib import Path

from kernels_harness.run import limits as limits_lib
from kernels_harness.run.timing import HARNESS_STAGE

_PKG_ROOT = str(Path(__file__).resolve().parents[2])  # the directory that holds kernels_harness/


class WorkerLost(RuntimeError):
    def __init__(self, kind: str, message: str, stage: str = ""):
        super().__init__(message)
        self.kind, self.message, self.stage = kind, message, stage


def _signal_name(rc: int) -> str:
    if rc is not None and rc < 0:
        try:
            return signal.Signals(-rc).name
        except ValueError:
            return f"signal {-rc}"
    return f"exit status {rc}"


class ExecWorker:
    """One execution worker process bound to a backend and device."""

    def __init__(self, backend: str, device: int, root: str, limits: limits_lib.Limits,
                 startup_timeout_s: float = 180.0, use_numba: bool = True, role: str = "exec",
                 asan_memory_mb: int | None = None, sandbox: bool = False, readable: tuple = (),
                 allow_processes: bool = False, nice: int = 0):
        self.backend, self.device, self.root, self.limits, self.role = backend, device, root, limits, role
        self.nice = nice  # added to the worker's niceness (compile workers: below the execution workers)
        self.asan_memory_mb = asan_memory_mb  # cpu backend with checks: preload ASan, cap its allocations
        self.startup_timeout_s, self.use_numba = startup_timeout_s, use_numba
        # kernels_harness.run.sandbox in the worker; readable: the build directories its candidates load from
        self.sandbox, self.readable, self.allow_processes = sandbox, tuple(readable), allow_processes
        self.proc = None
        self.conn = None
        self.tmp = None
        self.jobs = 0
        self.info: dict = {}

    def start(self) -> ExecWorker:
        self.tmp = tempfile.mkdtemp(prefix=f"w{self.device}_", dir=self.root)
        parent, child = socket.socketpair()
        # whatever this process can import, the worker can (user site-packages depend on HOME, which changes)
        paths = [_PKG_ROOT] + [p for p in sys.path if p and os.path.isdir(p)]
        extra = {"PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))}
        if self.backend == "cuda":
            extra["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
        if self.role == "compile":  # the emulation runtime object is cached across builds
            from kernels_harness.build.cache import cache_root
            extra["CUDAPERF_CACHE"] = str(cache_root())
        env = limits_lib.scrubbed_env(self.tmp, extra)
        if self.asan_memory_mb is not None:
            from kernels_harness.emulation import asan_environment
            env = asan_environment(env)
            env["ASAN_OPTIONS"] += (f":max_allocation_size_mb={self.asan_memory_mb}"
                                    f":hard_rss_limit_mb={self.asan_memory_mb}")
        cmd = [sys.executable, "-m", "kernels_harness.run.worker", "--fd", str(child.fileno()),
               "--backend", self.backend, "--device", str(self.device),
               "--limits", json.dumps(self.limits.__dict__)]
        if not self.use_numba:
            cmd.append("--no-numba")
        if self.role != "exec":
            cmd += ["--role", self.role]
        if self.nice:
            cmd += ["--nice", str(self.nice)]
        elif self.sandbox:
            cmd += ["--sandbox", "--readable", json.dumps(list(self.readable))]
            if self.backend == "cuda":  # the GPU lock lives in the pool's directory, outside the worker's own
                from kernels_harness.run.timing import gpu_lock_files, gpu_lock_path
                files = gpu_lock_files(gpu_lock_path(self.root, self.device))
                for f in files:  # Landlock grants rights on files that exist when the sandbox is installed
                    open(f, "a").close()
                cmd += ["--writable-files", json.dumps(files)]
            if self.allow_processes:
                cmd.append("--allow-processes")
        with open(os.path.join(self.tmp, "stderr.log"), "wb") as err:
            self.proc = subprocess.Popen(cmd, pass_fds=[child.fileno()], cwd=self.tmp, env=env,
                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                         start_new_session=True)
        child.close()
        self.conn = Connection(parent.detach())
        kind, payload = self._wait_message(self.startup_timeout_s, "starting")
        if kind != "ready":
            self.close()
            raise RuntimeError(payload if kind == "fatal" else f"the {self.backend} worker did not start ({payload})")
        self.info = payload
        return self

    def _log_tail(self) -> str:
        try:
            text = Path(self.tmp, "worker.log").read_text(errors="replace")[-20000:]
            text += Path(self.tmp, "stderr.log").read_text(errors="replace")[-4000:]
        except OSError:
            return ""
        if self.asan_memory_mb is not None:
            try:
                from kernels_harness.emulation import summarize_report
                report = summarize_report(text)
                if report:
                    return report[:300]
            except ImportError:
                pass
        lines = [ln for ln in text.splitlines() if ln.strip()]
        return lines[-1][:200] if lines else ""

    def _wait_message(self, timeout_s: float, stage: str):
        try:
            if not self.conn.poll(timeout_s):
                return "timeout", f"no answer within {timeout_s:.0f} s while {stage}"
            return self.conn.recv()
        except (EOFError, OSError, ConnectionError):
            try:
                rc = self.proc.wait(timeout=5) if self.proc else None
            except subprocess.TimeoutExpired:
                rc = None
            tail = self._log_tail()
            if rc == 86 and tail:  # kernels_harness.emulation.ASAN_EXIT_CODE: a memory error report
                return "died", f"memory error during {stage}: {tail}"
            if rc == -signal.SIGSYS:  # kernels_harness.run.sandbox killed it
                from kernels_harness.run.sandbox import FORBIDDEN
                return "died", (f"the sandbox stopped the solution during {stage}: it made a system call that "
                                f"solutions may not make ({FORBIDDEN})")
            return "died", f"the worker died ({_signal_name(rc)}) during {stage}" + (f": {tail}" if tail else "")

    def run(self, job, call_timeout_s: float, job_timeout_s: float, op: str = "eval") -> dict:
        """Sends one job; returns its result dict, or raises WorkerLost (the worker is then dead)."""
        self.jobs += 1
        try:
            self.conn.send((op, job))
        except (OSError, ConnectionError):
            raise WorkerLost("runtime_error", "the worker was gone before the job started")
        deadline = time.monotonic() + job_timeout_s
        stage = "loading the solution"
        while True:
            # the solution's own code gets call_timeout_s per call; the harness's own work (inputs, references,
            # checks, waiting for the GPU: stages labelled HARNESS_STAGE) only the job's deadline
            own = call_timeout_s if not stage.startswith(HARNESS_STAGE) else job_timeout_s
            wait = min(own, deadline - time.monotonic())
            kind, payload = self._wait_message(max(wait, 0.0), stage)
            if kind == "progress":
                stage = payload
                continue
            if kind == "result":
                return payload
            self.close()
            if kind == "timeout":
                limit = own if wait >= own else job_timeout_s
                raise WorkerLost("timeout", f"no answer within {limit:.0f} s during {stage}", stage)
            raise WorkerLost("runtime_error", payload, stage)

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def close(self, graceful: bool = False) -> None:
        if self.proc is not None:
            if graceful and self.proc.poll() is None:
                try:
                    self.conn.send(("exit",))
                    self.proc.wait(timeout=5)
                except Exception:  # noqa: BLE001, S110 - best-effort graceful exit: killed below if still alive
                    pass
            if self.proc.poll() is None:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except OSError:
                    pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            try:  # a candidate that forked may have left its own process group
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
        if self.conn is not None:
            try:
                self.conn.close()
            except OSError:
                pass
        if self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)
        self.proc = self.conn = None


class CompilePool:
    """`n` compile worker processes behind a thread pool: `submit(*build_args) -> Future[build dict]`.

    A compile worker that dies or exceeds `timeout_s` (plus a margin) is replaced; the build fails.
    `nice`: added to the compile workers' niceness (their compilers inherit it).
    """

    def __init__(self, n: int, root: str, backend: str, timeout_s: float, limits: limits_lib.Limits | None = None,
                 nice: int = 0):
        self.root, self.backend, self.timeout_s, self.nice = root, backend, timeout_s, nice
        self.limits = limits or limits_lib.Limits(cpu_seconds=None, file_size_bytes=1 << 30)
        self.free: queue.Queue = queue.Queue()
        for _ in range(n):
            self.free.put(None)  # started lazily, on first use
        self.threads = ThreadPoolExecutor(n)

    def _worker(self) -> ExecWorker:
        return ExecWorker(self.backend, 0, self.root, self.limits, role="compile", nice=self.nice).start()

    def _build(self, args: tuple, op: str = "build") -> dict:
        w = self.free.get()
        # a batch may compile a few times (a failed round, then the rest): allow it that long
        limit = (self.timeout_s * (4 if op == "build_batch" else 1)) + 60
        try:
            if w is None:
                w = self._worker()
            return w.run(args, limit, limit, op=op)
        except (WorkerLost, RuntimeError) as e:
            w = None
            return {"ok": False, "log": f"the compiler worker failed: {getattr(e, 'message', e)}", "path": None,
                    "resources": {}, "seconds": 0.0}
        finally:
            if w is not None and not w.alive:
                w.close()
                w = None
            self.free.put(w)

    def submit(self, *args) -> Future:
        """One build: kernels_harness.run.compile.build(*args) in a compile worker."""
        return self.threads.submit(self._build, args)

    def submit_batch(self, *args) -> Future:
        """Several solutions in one library: kernels_harness.run.compile.build_batch(*args)."""
        return self.threads.submit(self._build, args, "build_batch")

    def close(self) -> None:
        self.threads.shutdown(wait=False, cancel_futures=True)
        while not self.free.empty():
            w = self.free.get()
            if w is not None:
                w.close(graceful=True)
