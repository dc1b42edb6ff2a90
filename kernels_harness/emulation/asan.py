"""AddressSanitizer plumbing for checks-mode libraries of the cpu backend.

A library built with `checks=True` links ASan; the process that loads it must have ASan's runtime
preloaded. Start the worker with `env=asan_environment()`; if a kernel touches memory outside an
array, ASan prints a report to stderr and the worker exits with ASAN_EXIT_CODE; `summarize_report(stderr)`
turns that into one line for EvalResult.runtime_error (it also reads the watchdog's and the fault
handler's lines of non-ASan libraries), e.g.
"out-of-bounds write of 4 bytes in kernel `scale` block (3,0,0) thread (255,0,0) at solution.cu:7
(heap-buffer-overflow, 0 bytes after a 4096-byte array)".
"""
from __future__ import annotations

import functools
import os
import re
import subprocess

from kernels_harness.emulation.build import find_cxx

ASAN_EXIT_CODE = 86
ASAN_OPTIONS = (f"detect_leaks=0:halt_on_error=1:abort_on_error=0:exitcode={ASAN_EXIT_CODE}:print_summary=1:"
                "allocator_may_return_null=1:detect_odr_violation=0:handle_segv=1:symbolize=1")


@functools.lru_cache(maxsize=1)
def libasan_path() -> str:
    """Path of the libasan.so that matches the host compiler."""
    out = subprocess.run([find_cxx(), "-print-file-name=libasan.so"], check=False, capture_output=True, text=True,
                         timeout=30).stdout.strip()
    if not out or not os.path.isabs(out):
        raise RuntimeError("the host compiler has no AddressSanitizer runtime (libasan.so); install libasan "
                           "or build with checks=False")
    return os.path.realpath(out)


@functools.lru_cache(maxsize=1)
def libstdcxx_path() -> str:
    """Path of the host compiler's libstdc++ (preloaded too, so that ASan intercepts C++ throws)."""
    out = subprocess.run([find_cxx(), "-print-file-name=libstdc++.so.6"], check=False, capture_output=True, text=True,
                         timeout=30).stdout.strip()
    return os.path.realpath(out) if out and os.path.isabs(out) else ""


def asan_environment(base: dict | None = None) -> dict:
    """An environment for a subprocess that loads checks-mode libraries (LD_PRELOAD + ASAN_OPTIONS)."""
    env = dict(os.environ if base is None else base)
    pre = env.get("LD_PRELOAD", "")
    libs = [libasan_path(), libstdcxx_path()] + ([pre] if pre else [])
    env["LD_PRELOAD"] = ":".join(x for x in libs if x)
    env["ASAN_OPTIONS"] = ASAN_OPTIONS
    return env


_KIND = re.compile(r"ERROR: AddressSanitizer: ([\w-]+)")
_ACCESS = re.compile(r"(READ|WRITE) of size (\d+)")
_REGION = re.compile(r"is located (\d+) bytes (to the left|to the right|inside|after|before) of (\d+)-byte region")
_FRAME = re.compile(r"#\d+ 0x[0-9a-f]+ in (\S+).*?(solution\.cu:\d+)")
_WATCHDOG = re.compile(r"cudaperf-emu: watchdog: (kernel `[^`]*` ran longer than [0-9.e+-]+ s)")
_CONTEXT = re.compile(r"cudaperf-emu: fault in (kernel `[^`]*` block \(\d+,\d+,\d+\) thread \(\d+,\d+,\d+\))")


def summarize_report(stderr: str) -> str:
    """One line describing the first ASan report, watchdog expiry or emulator fault in `stderr`; "" if none."""
    dog = _WATCHDOG.search(stderr)
    if dog:
        return "timeout: " + dog.group(1)
    kind = _KIND.search(stderr)
    ctx = _CONTEXT.search(stderr)
    if not kind:
        return ("memory fault in " + ctx.group(1)) if ctx else ""
    parts = []
    acc = _ACCESS.search(stderr)
    what = {"heap-buffer-overflow": "out-of-bounds", "stack-buffer-overflow": "out-of-bounds (local array)",
            "global-buffer-overflow": "out-of-bounds (global array)", "heap-use-after-free": "use-after-free",
            "SEGV": "invalid address"}.get(kind.group(1), kind.group(1))
    parts.append(f"{what} {acc.group(1).lower()} of {acc.group(2)} bytes" if acc else what)
    if ctx:
        parts.append("in " + ctx.group(1))
    frame = _FRAME.search(stderr)
    if frame:
        parts.append("at " + frame.group(2))
    reg = _REGION.search(stderr)
    detail = kind.group(1)
    if reg:
        side = {"to the right": "after", "to the left": "before"}.get(reg.group(2), reg.group(2))
        detail += f", {reg.group(1)} bytes {side} a {reg.group(3)}-byte array"
    return " ".join(parts) + f" ({detail})"
