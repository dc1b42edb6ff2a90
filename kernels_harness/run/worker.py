"""The execution worker: `python -m kernels_harness.run.worker --fd N --backend cpu|cuda --device D`.

Started by kernels_harness.run.pool in a private temporary directory with a scrubbed environment. It
limits itself (kernels_harness.run.limits), sends its stdout to /dev/null and its stderr to worker.log,
emptied between jobs once past 1 MiB (a candidate's printf can neither corrupt the protocol nor fill the
disk), becomes a child subreaper, imports every harness module it may need, installs the sandbox
(kernels_harness.run.sandbox: Landlock, seccomp, on cpu a candidate thread) and then answers messages on
the socket `fd` (pickled tuples, multiprocessing.connection framing):
  ("eval", job) -> ("progress", stage)* then ("result", dict from protocol.evaluate_job)
  ("exit",)     -> exits
With `--role compile` it is a compile worker instead: ("build" | "build_batch", args) -> ("result", dict).
It sends ("ready", info) once the backend is up, or ("fatal", reason) and exits.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from multiprocessing.connection import Connection


def _exit_with_parent() -> None:
    """A daemon thread that ends this process when the pool's process is gone (even mid-candidate)."""
    import threading
    parent = os.getppid()

    def watch():
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(3)
    threading.Thread(target=watch, daemon=True, name="parent-watch").start()


def _redirect_output() -> None:
    """stdout (a candidate's printf) goes to /dev/null, stderr (tracebacks, AddressSanitizer's reports) to worker.log."""
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.close(null)
    fd = os.open("worker.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115 - the worker's stdout for its lifetime
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115 - the worker's stderr for its lifetime


def _trim_log(limit: int = 1 << 20) -> None:
    """Empties worker.log between jobs once it passes `limit`: what earlier candidates wrote to stderr must not
    fill it up to the file-size limit, where later reports could no longer be written (the pool reads its tail
    only when a job's worker dies, so between jobs nothing in it is needed)."""
    try:
        if os.fstat(2).st_size > limit:
            os.ftruncate(2, 0)
    except OSError:
        pass


def _setup(backend_name: str, device: int, progress, use_numba: bool):
    from kernels_harness.run.backends import make_backend
    from kernels_harness.run.protocol import Context
    backend = make_backend(backend_name, device)
    ctx = Context(backend=backend, progress=progress)
    info = {"backend": backend_name, "device": device, "pid": os.getpid(), "compare": "numpy", "flush": None}
    if backend_name == "cuda":
        from kernels_harness.run import device_kernels
        from kernels_harness.run.timing import Timer
        flush, info["flush"] = device_kernels.make_flush(backend, use_numba)
        ctx.timer = Timer(backend, flush)
        compare, info["compare"] = device_kernels.make_compare(backend, use_numba)
        probe = backend.cp.arange(1000, dtype=backend.cp.float32)
        try:  # compile the comparison kernel now, not during the first candidate
            if not compare(probe, probe, 0.0, 0.0)["ok"]:
                raise RuntimeError("self-check failed")
            ctx.compare_fn = compare
        except Exception as e:  # noqa: BLE001 - the numba comparison unusable: cupy's is used
            info["compare"] = f"cupy (numba failed: {type(e).__name__})"
        try:  # an optimisation only: a failure here must not stop the worker
            _warm_up_cupy(backend.cp)
        except Exception as e:  # noqa: BLE001 - warm-up is optional: recorded, the worker goes on
            info["warm_up"] = f"{type(e).__name__}: {e}"[:200]
        info["free_memory"] = backend.free_memory()
    return ctx, info


def _preload(backend_name: str, ctx) -> None:
    """Imports the harness modules a job may need and reads its data files, before the sandbox hides them."""
    import importlib
    import pkgutil
    for pkg in ("kernels_harness.run", "kernels_harness.tasks", "kernels_harness.features",
                "kernels_harness.emulation"):
        mod = importlib.import_module(pkg)
        for info in pkgutil.iter_modules(mod.__path__):
            try:
                importlib.import_module(f"{pkg}.{info.name}")
            except Exception:  # noqa: BLE001, S110 - an optional dependency missing: that module is not needed then
                pass
    if backend_name == "cuda":
        from kernels_harness.features import roofline
        ctx.peaks = roofline.load_peaks()


def name_the_user() -> None:
    """Puts the user's name in $USER when no variable holds it. Behind Landlock /etc/passwd is unreadable, so
    getpass.getuser() (torch.compile's cache directory) would fail with "getpwuid(): uid not found: 0": on the
    H100 of 2026-12-07, whose environment had no USER, every torch.compile baseline failed so."""
    if any(os.environ.get(v) for v in ("LOGNAME", "USER", "LNAME", "USERNAME")):
        return
    try:
        import pwd
        os.environ["USER"] = pwd.getpwuid(os.getuid()).pw_name
    except (KeyError, ImportError):
        os.environ["USER"] = f"uid{os.getuid()}"


def _sandbox(args, ctx, info: dict) -> None:
    from kernels_harness.run import sandbox
    _preload(args.backend, ctx)
    name_the_user()
    writable = []
    if args.backend == "cuda":
        writable.append(os.environ.get("CUPY_CACHE_DIR", ""))
    info["sandbox"] = sandbox.install(args.backend, os.getcwd(), json.loads(args.readable), writable,
                                      allow_processes=args.allow_processes,
                                      writable_files=json.loads(args.writable_files))
    if args.backend == "cpu":
        runner = sandbox.CandidateThread(args.fd)
        ctx.backend.runner = runner
        info["sandbox"]["candidate_thread"] = runner.status


def _compile_loop(conn) -> int:
    """("build", args of compile.build) -> ("result", build dict);
    ("build_batch", args of compile.build_batch) -> ("result", {"built", "alone", "seconds"})."""
    import shutil
    import tempfile

    from kernels_harness.run import limits as limits_lib
    from kernels_harness.run.compile import build, build_batch
    home = os.getcwd()  # the worker's private directory (its TMPDIR)
    conn.send(("ready", {"pid": os.getpid(), "role": "compile", "nice": os.nice(0)}))
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return 0
        if msg[0] == "exit":
            return 0
        if msg[0] not in ("build", "build_batch"):
            continue
        # each build gets its own TMPDIR, removed after it: a compiler killed at its timeout leaves its
        # temporary files (g++'s cc*.s) behind
        tmp = tempfile.mkdtemp(prefix="build_", dir=home)
        os.environ["TMPDIR"] = tempfile.tempdir = tmp
        try:
            res = (build if msg[0] == "build" else build_batch)(*msg[1])
        finally:
            # a compiler's timeout kills only the driver (g++, nvcc): its cc1plus/cicc/ptxas go on running and,
            # this worker being a subreaper, end up here; kill and reap them before the next build
            limits_lib.kill_children()
            shutil.rmtree(tmp, ignore_errors=True)
            os.environ["TMPDIR"] = tempfile.tempdir = home
        conn.send(("result", res))


def _warm_up_cupy(cp) -> None:
    """Compiles (or loads from CuPy's cache) the small kernels every job uses, before "ready"."""
    import numpy as np

    from kernels_harness.run import arrays
    for dt in (np.float32, np.float64, np.int32):
        g = arrays.allocate(cp, np.dtype(dt), (1000,))
        g.poison(1)
        g.guards_intact()
        v = g.view.copy()
        arrays.bitwise_equal(cp, g.view, v)
        arrays.compare(cp, v, v, 0.0, 0.0)
    rs = cp.random.RandomState(1)
    rs.uniform(-1, 1, size=1000, dtype=np.float32)
    rs.normal(0, 1, size=1000, dtype=np.float32)
    rs.randint(0, 100, size=1000)
    cp.cuda.runtime.deviceSynchronize()


def _release_device_memory(ctx) -> int:
    """Gives the device memory this job's arrays left in CuPy's pool and PyTorch's cache back to the device (neither
    returns it by itself: a worker that once held a 12 GiB config would keep it from the other workers and from the
    next job's leak check); returns the most they held (CuPy's pool size plus PyTorch's peak reservation, an upper
    bound of the job's device memory)."""
    pool = ctx.backend.cp.get_default_memory_pool()
    held = int(pool.total_bytes())
    pool.free_all_blocks()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        held += int(torch.cuda.max_memory_reserved())
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    return held


def _out_of_memory(e: BaseException) -> bool:
    """CuPy's or PyTorch's out-of-memory error (the harness's own allocations)."""
    return type(e).__name__ == "OutOfMemoryError" or "out of memory" in str(e).lower()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fd", type=int, required=True)
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--limits", default="{}")
    ap.add_argument("--no-numba", action="store_true")
    ap.add_argument("--role", default="exec", choices=("exec", "compile"))
    ap.add_argument("--sandbox", action="store_true", help="install kernels_harness.run.sandbox before jobs")
    ap.add_argument("--readable", default="[]", help="JSON list of extra readable directories (the builds)")
    ap.add_argument("--writable-files", default="[]",
                    help="JSON list of files outside the worker's directory it may write (the GPU lock files)")
    ap.add_argument("--allow-processes", action="store_true", help="the sandbox lets jobs start processes")
    ap.add_argument("--nice", type=int, default=0, help="added to this process's niceness (compile workers)")
    args = ap.parse_args(argv)
    conn = Connection(args.fd)
    _exit_with_parent()
    _redirect_output()
    from kernels_harness.run import limits as limits_lib
    limits_lib.apply_limits(limits_lib.Limits(**json.loads(args.limits)))
    limits_lib.become_subreaper()
    if args.nice:
        try:
            os.nice(args.nice)
        except OSError:  # not permitted here: the same builds, at the usual priority
            pass
    if args.role == "compile":
        return _compile_loop(conn)
    try:
        ctx, info = _setup(args.backend, args.device, lambda s: conn.send(("progress", s)), not args.no_numba)
    except Exception as e:  # noqa: BLE001 - any setup failure is reported to the pool as fatal
        conn.send(("fatal", f"the {args.backend} backend could not start: {type(e).__name__}: {e}"))
        return 1
    if args.sandbox:
        _sandbox(args, ctx, info)
    conn.send(("ready", info))
    from kernels_harness.run.protocol import evaluate_job
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return 0
        if msg[0] == "exit":
            return 0
        if msg[0] != "eval":
            continue
        _trim_log()
        t0 = time.perf_counter()
        free0 = ctx.backend.free_memory() if args.backend == "cuda" else None
        try:
            res = evaluate_job(ctx, msg[1])
        except Exception as e:  # noqa: BLE001 - a harness bug must still answer, not hang the pool
            # the harness's own arrays not fitting beside other processes is no reason to replace the worker
            # (its memory is given back below); anything else might have left it in a bad state
            res = {"status": "runtime_error", "error": f"harness error: {type(e).__name__}: {e}"[:400],
                   "configs": [], "launches": [], "sticky": not _out_of_memory(e), "setup_error": "",
                   "seconds": {}}
        spawned = 0
        for _ in range(3):
            spawned += limits_lib.kill_children()
        if spawned:
            res.update(status="runtime_error", sticky=True,
                       error=f"the solution started {spawned} child process(es); solutions may not fork")
        if free0 is not None:
            try:
                res.setdefault("seconds", {})["device_gib"] = _release_device_memory(ctx) / 2**30
                # against the free memory at this job's start, not the worker's: other processes' use changes
                # over a worker's life (JAX starting beside the pool, other workers' large configs)
                if ctx.backend.free_memory() < free0 - (4 << 30):
                    res["sticky"] = True  # it leaked >4 GiB of device memory: replace the worker
            except Exception:  # noqa: BLE001 - an unknown device state: replace the worker
                res["sticky"] = True
        res.setdefault("seconds", {})["worker"] = time.perf_counter() - t0
        res["worker"] = {k: info[k] for k in ("pid", "compare", "flush") if k in info}
        conn.send(("result", res))


if __name__ == "__main__":
    sys.exit(main())
