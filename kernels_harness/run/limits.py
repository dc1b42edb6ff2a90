"""Process isolation: resource limits, a scrubbed environment, a child subreaper, child detection.

Workers (execution and compilation) call `apply_limits` on themselves at start; anything they spawn
(nvcc, a candidate's fork) inherits the limits. `scrubbed_env` keeps only what compilers and CUDA
need and drops anything that looks like a secret.
"""
from __future__ import annotations

import ctypes
import dataclasses
import os
import resource
import signal

_KEEP = {"PATH", "LANG", "LC_ALL", "LC_CTYPE", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "CUDAPERF_NVCC",
         "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "PYTHONPATH",
         "VIRTUAL_ENV", "CC", "CXX", "TZ"}
_KEEP_PREFIX = ("NUMBA_", "CUPY_", "CUDA_", "NVIDIA_", "CUDAPERF_", "OMP_")
_SECRET_HINTS = ("KEY", "TOKEN", "SECRET", "PASSW", "CREDENTIAL", "AUTH", "COOKIE", "SESSION", "PRIVATE")


@dataclasses.dataclass(frozen=True)
class Limits:
    """Per-process limits. None means unlimited (address space must stay unlimited for CUDA)."""
    address_space_bytes: int | None = None
    cpu_seconds: int | None = 3600
    file_size_bytes: int | None = 64 << 20
    extra_processes: int | None = 256     # RLIMIT_NPROC = tasks the user runs now + this


def is_secret(name: str) -> bool:
    up = name.upper()
    return any(h in up for h in _SECRET_HINTS)


def scrubbed_env(home: str, extra: dict | None = None, base: dict | None = None) -> dict:
    """The environment of a worker: a whitelist of the current one, HOME/TMPDIR = its private dir."""
    base = os.environ if base is None else base
    env = {k: v for k, v in base.items()
           if (k in _KEEP or k.startswith(_KEEP_PREFIX)) and not is_secret(k)}
    # CuPy's kernel cache is the harness's own (its kernels, not the candidate's): shared across workers
    cupy_cache = base.get("CUPY_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cupy", "kernel_cache")
    env.update(HOME=home, TMPDIR=home, CUPY_CACHE_DIR=cupy_cache,
               NUMBA_CACHE_DIR=os.path.join(home, "numba_cache"), PYTHONDONTWRITEBYTECODE="1",
               PYTHONUNBUFFERED="1")
    env.update(extra or {})
    return env


def user_task_count() -> int:
    """Threads of all processes of this user (what RLIMIT_NPROC counts)."""
    uid, n = os.getuid(), 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            if os.stat(f"/proc/{pid}").st_uid == uid:
                n += len(os.listdir(f"/proc/{pid}/task"))
        except OSError:
            continue
    return n


def _set(which: int, value: int | None) -> None:
    if value is None:
        return
    _, hard = resource.getrlimit(which)
    value = int(value) if hard == resource.RLIM_INFINITY else min(int(value), hard)
    resource.setrlimit(which, (value, hard))


def apply_limits(limits: Limits) -> None:
    """Applies `limits` to the calling process; no core dumps. Never raises for an unsupported limit."""
    for which, value in ((resource.RLIMIT_CORE, 0), (resource.RLIMIT_AS, limits.address_space_bytes),
                         (resource.RLIMIT_CPU, limits.cpu_seconds),
                         (resource.RLIMIT_FSIZE, limits.file_size_bytes)):
        try:
            _set(which, value)
        except (ValueError, OSError):
            pass
    if limits.extra_processes is not None and os.getuid() != 0:
        try:
            _set(resource.RLIMIT_NPROC, user_task_count() + limits.extra_processes)
        except (ValueError, OSError):
            pass


def become_subreaper() -> None:
    """Orphaned descendants (a daemonising fork) are re-parented to this process, so we can see them."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except Exception:  # noqa: BLE001, S110 - best effort: not Linux, or prctl refused
        pass


def children(pid: int | None = None) -> list[int]:
    """Pids of the direct children of `pid` (default: this process), from /proc."""
    pid = os.getpid() if pid is None else pid
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return out


def kill_children() -> int:
    """SIGKILLs and reaps every child of this process; returns how many there were."""
    kids = children()
    for k in kids:
        try:
            os.kill(k, signal.SIGKILL)
        except OSError:
            pass
    for k in kids:
        try:
            os.waitpid(k, 0)
        except OSError:
            pass
    return len(kids)
