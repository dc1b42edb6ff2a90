"""Builds a CUDA solution into a shared library that runs on the CPU (backend "cpu").

The source is rewritten (rewrite.py), compiled by g++ with the emulation header force-included, and
linked with the emulation runtime (include/cudaperf_emu_runtime.h). The runtime object and a precompiled
header are built once per mode and cached under $CUDAPERF_CACHE/emulation (CUDAPERF_EMU_NO_PCH=1: no PCH).

Checks mode (`checks=True`, the default) builds with AddressSanitizer: every out-of-bounds access to an
array from cudaMalloc, to an array the harness passed in (its numpy buffers are heap blocks under the
preloaded ASan allocator) or to shared memory aborts the process with an ASan report. Such a
library must be loaded in a process started with `asan.asan_environment()` (LD_PRELOAD of libasan);
the harness does that in its worker subprocess and turns the report into a `runtime_error` line with
`asan.summarize_report`. Barrier divergence and __trap are caught in both modes and reported through
cudaGetLastError / cudaperf_emu_last_error, not by a hang.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from kernels_harness.build.nvcc import BuildResult
from kernels_harness.emulation.rewrite import UnsupportedConstruct, rewrite

INCLUDE_DIR = Path(__file__).resolve().parent / "include"
RUNTIME_SOURCE = INCLUDE_DIR / "cudaperf_emu_runtime.h"
COMMON_FLAGS = ("-std=c++17", "-O2", "-fPIC", "-pthread", "-fno-strict-aliasing", "-Wno-unknown-pragmas",
                "-Wno-attributes")
CHECK_FLAGS = ("-fsanitize=address", "-fno-omit-frame-pointer", "-g1")


class CompilerMissing(RuntimeError):
    """No host C++ compiler: the message says what to install."""


def find_cxx() -> str:
    """The host C++ compiler: $CUDAPERF_CXX, else g++ on PATH."""
    cxx = os.environ.get("CUDAPERF_CXX") or shutil.which("g++")
    if not cxx:
        raise CompilerMissing("the cpu backend needs a C++17 compiler: install g++ (apt-get install g++) "
                              "or point CUDAPERF_CXX at one")
    return cxx


def cache_dir() -> Path:
    """<cache_root()>/emulation (build.cache.cache_root; a temp dir if that is not writable)."""
    from kernels_harness.build.cache import cache_root
    for path in (cache_root() / "emulation", Path(tempfile.gettempdir()) / f"cudaperf-emulation-{os.getuid()}"):
        try:
            path.mkdir(parents=True, exist_ok=True)
            if os.access(path, os.W_OK):
                return path
        except OSError:
            continue
    raise RuntimeError("no writable cache directory for the emulation runtime; set CUDAPERF_CACHE to one")


def _compiler_id(cxx: str) -> str:
    try:
        return subprocess.run([cxx, "--version"], check=False, capture_output=True, text=True, timeout=30).stdout.split("\n")[0]
    except (OSError, subprocess.SubprocessError):
        return cxx


def _unique_tmp(directory: Path, suffix: str) -> Path:
    """A fresh file name in `directory` (builds of one process may run in several threads)."""
    fd, name = tempfile.mkstemp(prefix=".tmp-", suffix=suffix, dir=directory)
    os.close(fd)
    return Path(name)


def _mode_key(cxx: str, flags: tuple) -> str:
    """A hash of the emulation headers, the compiler and the flags (names cached artifacts)."""
    h = hashlib.sha256()
    for p in sorted(INCLUDE_DIR.glob("*.h")):
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    h.update("\0".join((_compiler_id(cxx), *flags)).encode())
    return h.hexdigest()[:16]


def precompiled_header_dir(checks: bool, timeout_s: float = 300) -> Path | None:
    """A directory holding cudaperf_emu.h.gch for this mode (built on first use), or None if g++ cannot
    make one; with it first on the include path, each solution compiles about twice as fast."""
    cxx = find_cxx()
    flags = COMMON_FLAGS + (CHECK_FLAGS if checks else ())
    out_dir = cache_dir() / f"pch-{'checks' if checks else 'fast'}-{_mode_key(cxx, flags)}"
    gch = out_dir / "cudaperf_emu.h.gch"
    if gch.is_file():
        return out_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = _unique_tmp(out_dir, ".gch")
    cmd = [cxx, *flags, "-w", f"-I{INCLUDE_DIR}", "-x", "c++-header", str(INCLUDE_DIR / "cudaperf_emu.h"), "-o", str(tmp)]
    try:
        proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=timeout_s, env=_c_locale())
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0 or not tmp.is_file():
        tmp.unlink(missing_ok=True)
        return None
    os.replace(tmp, gch)
    return out_dir


def runtime_object(checks: bool, timeout_s: float = 300) -> Path:
    """The compiled emulation runtime for this mode (built on first use, cached by content hash)."""
    cxx = find_cxx()
    flags = COMMON_FLAGS + (CHECK_FLAGS if checks else ())
    out = cache_dir() / f"runtime-{'checks' if checks else 'fast'}-{_mode_key(cxx, flags)}.o"
    if out.is_file():
        return out
    tmp = _unique_tmp(out.parent, ".o")
    cmd = [cxx, *flags, "-fvisibility=hidden", f"-I{INCLUDE_DIR}", "-x", "c++", "-c", str(RUNTIME_SOURCE),
           "-o", str(tmp)]
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=timeout_s, env=_c_locale())
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise RuntimeError("the emulation runtime does not compile with " + cxx + ":\n" + proc.stderr[-4000:])
    os.replace(tmp, out)
    return out


def _c_locale() -> dict:
    env = dict(os.environ)
    env["LC_ALL"] = "C"
    return env


def _first_error(log: str) -> str:
    for line in log.splitlines():
        if re.search(r"\berror\b", line) and not line.startswith("In file included"):
            return line.strip()
    return log.strip().splitlines()[0] if log.strip() else "the host compiler failed without a message"


def build_shared_library(source: str, out_path: str | Path, *, checks: bool = True,
                         timeout_s: float = 120) -> BuildResult:
    """Compiles a CUDA solution for the cpu backend into the shared library `out_path`.

    Never raises for a bad source: returns `ok=False` with a log whose first line names the
    unsupported construct or the first compiler error (as `solution.cu:LINE:COL: error: ...`).
    Raises CompilerMissing when there is no host compiler.
    """
    t0 = time.perf_counter()
    try:
        rewritten = rewrite(source)
    except UnsupportedConstruct as e:
        return BuildResult(ok=False, log=str(e), path=None, seconds=time.perf_counter() - t0)
    res = compile_rewritten(rewritten.source, out_path, checks=checks, timeout_s=timeout_s)
    res.seconds = time.perf_counter() - t0
    return res


def compile_rewritten(text: str, out_path: str | Path, *, checks: bool = True, timeout_s: float = 120,
                      trim: bool = True) -> BuildResult:
    """Compiles already rewritten source (rewrite.rewrite, or several combined by
    kernels_harness.build.batch) into `out_path`; `trim=False` keeps the whole log, first line unchanged."""
    t0 = time.perf_counter()
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    cxx = find_cxx()
    try:
        rt = runtime_object(checks)
        pch = precompiled_header_dir(checks) if os.environ.get("CUDAPERF_EMU_NO_PCH") != "1" else None
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        return BuildResult(ok=False, log=f"the emulation runtime failed to build: {e}", path=None,
                           seconds=time.perf_counter() - t0)
    flags = COMMON_FLAGS + (CHECK_FLAGS if checks else ())
    with tempfile.TemporaryDirectory(prefix="cudaperf_emu_") as tmp:
        src = Path(tmp) / "solution.cu"
        src.write_text(text)
        tmp_out = Path(tmp) / "solution.so"
        cmd = [cxx, *flags, "-shared", "-Wl,-Bsymbolic", *([f"-I{pch}"] if pch else []), f"-I{INCLUDE_DIR}",
               "-include", "cudaperf_emu.h",
               "-x", "c++", "solution.cu", "-x", "none", str(rt), "-o", str(tmp_out)]
        try:
            proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=timeout_s, cwd=tmp,
                                  env=_c_locale(), stdin=subprocess.DEVNULL)
            rc, log = proc.returncode, proc.stdout + proc.stderr
        except subprocess.TimeoutExpired:
            rc, log = -1, f"the host compiler timed out after {timeout_s:.0f} s"
        log = log.replace(str(INCLUDE_DIR) + "/", "<emulation>/").replace(tmp + "/", "")
        ok = rc == 0 and tmp_out.is_file()
        if ok:  # a new inode: a process that has the old library loaded keeps a valid mapping
            staging = _unique_tmp(out_path.parent, ".so")
            shutil.copyfile(tmp_out, staging)
            os.replace(staging, out_path)
    if not ok and trim:
        log = _first_error(log) + "\n" + log[-8000:]
    return BuildResult(ok=ok, log=log, path=out_path if ok else None, seconds=time.perf_counter() - t0)


def compiler_id(checks: bool = True) -> str:
    """The host compiler, its flags and the emulation headers, as one string (a build cache key part)."""
    cxx = find_cxx()
    return f"{_compiler_id(cxx)} {_mode_key(cxx, COMMON_FLAGS + (CHECK_FLAGS if checks else ()))}"
