"""Where the pool runs: GPUs visible (without initialising CUDA), the backend to use, stale temporary roots."""
from __future__ import annotations

import glob
import importlib.util
import os
import shutil
import subprocess


class HarnessSetupError(RuntimeError):
    """The harness cannot run as asked (no GPU, no torch, no compiler); one sentence on what to do."""


def gpu_count() -> int:
    """GPUs visible to this process (nvidia-smi), without initialising CUDA here."""
    if not shutil.which("nvidia-smi"):
        import glob
        import re
        n = len([d for d in glob.glob("/dev/nvidia*") if re.fullmatch(r"/dev/nvidia\d+", d)])
        vis = os.environ.get("CUDA_VISIBLE_DEVICES")
        return min(n, len([v for v in vis.split(",") if v.strip()])) if vis is not None else n
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return 0
    n = sum(1 for ln in out.splitlines() if ln.startswith("GPU "))
    vis = os.environ.get("CUDA_VISIBLE_DEVICES")
    if vis is not None:
        n = min(n, len([v for v in vis.split(",") if v.strip()]))
    return n


ROOT_PREFIX, OWNER_FILE = "cudaperf_harness_", "owner.pid"


def sweep_stale_roots(tmp: str) -> int:
    """Removes the temporary roots of pools whose process is gone (killed before close(), e.g. by kill -9);
    returns how many. Roots without an owner file (a pool being created) are left alone."""
    n = 0
    for d in glob.glob(os.path.join(tmp, ROOT_PREFIX + "*")):
        try:
            with open(os.path.join(d, OWNER_FILE)) as f:
                pid = int(f.read().strip())
        except (OSError, ValueError):
            continue
        if pid == os.getpid():
            continue
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            shutil.rmtree(d, ignore_errors=True)
            n += 1
        except OSError:  # alive, someone else's
            continue
    return n


def _asan_available() -> bool:
    """AddressSanitizer's runtime exists (else the cpu backend falls back to guard zones only)."""
    try:
        from kernels_harness.emulation.asan import libasan_path
        return bool(libasan_path())
    except Exception:  # noqa: BLE001 - no usable ASan runtime: guard zones only
        return False


def resolve_backend(backend: str) -> str:
    if backend == "auto":
        return "cuda" if importlib.util.find_spec("cupy") and gpu_count() > 0 else "cpu"
    if backend not in ("cpu", "cuda"):
        raise HarnessSetupError(f"backend must be cpu, cuda or auto, not {backend!r}")
    if backend == "cuda" and not importlib.util.find_spec("cupy"):
        raise HarnessSetupError("the cuda backend needs CuPy; install cupy-cuda13x or use --backend cpu")
    if backend == "cuda" and gpu_count() == 0:
        raise HarnessSetupError("the cuda backend needs an NVIDIA GPU and none is visible; use --backend cpu")
    return backend
