"""Compile jobs, run in the pool's compile worker processes (never in the caller's process).

`build(kind, backend, source, out_path)` turns one translation unit into a shared library:
  kind "solution":    a CUDA solution; backend "cuda" -> nvcc (kernels_harness.build.nvcc),
                      backend "cpu" -> the emulation layer (kernels_harness.emulation; `checks`
                      builds with AddressSanitizer, so the worker must preload libasan; with
                      `resources`, ptxas registers/shared memory are read too, for the features)
  kind "c_reference": a task's C reference -> gcc (as C, else as C++ wrapped in extern "C")
Returns a plain dict {ok, log, path, resources, seconds} that crosses process boundaries.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

MAX_LOG = 20000


def build(kind: str, backend: str, source: str, out_path: str, timeout_s: float = 120.0,
          arch: str = "sm_90", checks: bool = True, resources: bool = True) -> dict:
    t0 = time.perf_counter()
    try:
        if kind == "c_reference":
            res = build_c_reference(source, out_path, timeout_s)
        elif backend == "cuda":
            from kernels_harness.build import nvcc
            r = nvcc.build_shared(source, out_path, arch=arch, timeout_s=timeout_s)
            res = {"ok": r.ok, "log": r.log, "path": str(r.path) if r.path else None, "resources": r.resources}
        elif backend == "cpu":
            try:
                from kernels_harness.run.backends import emulation_module
                emulation = emulation_module()
                if not hasattr(emulation, "build_shared_library"):
                    raise ImportError("kernels_harness.emulation has no build_shared_library yet")
            except ImportError as e:
                return {"ok": False, "setup_error": True, "log": f"the cpu backend is not available ({e})",
                        "path": None, "resources": {}, "seconds": time.perf_counter() - t0}
            r = emulation.build_shared_library(source, out_path, checks=checks, timeout_s=timeout_s)
            res = {"ok": bool(r.ok), "log": r.log, "path": str(r.path) if r.ok and r.path else None,
                   "resources": dict(getattr(r, "resources", {}) or {})}
            if res["ok"] and resources and not res["resources"]:
                res["resources"] = _ptxas_resources(source, arch, timeout_s)
        else:
            raise ValueError(f"unknown backend {backend!r}")
    except Exception as e:  # a compiler that is missing or crashes is a failed build, not a crash
        res = {"ok": False, "log": f"{type(e).__name__}: {e}", "path": None, "resources": {},
               "setup_error": type(e).__name__ == "CompilerNotFound"}
    res["log"] = (res.get("log") or "")[-MAX_LOG:]
    res["seconds"] = time.perf_counter() - t0
    return res


def _ptxas_resources(source: str, arch: str, timeout_s: float) -> dict:
    """Registers and shared memory per kernel from ptxas, for the cpu backend's features ({} if no nvcc)."""
    try:
        from kernels_harness.build import nvcc
        return nvcc.resource_usage(source, arch=arch, timeout_s=timeout_s)
    except Exception:  # no nvcc, or a source the emulation accepts and nvcc does not
        return {}


def _host_cc(name: str) -> str:
    for cand in (os.environ.get("CC" if name == "gcc" else "CXX"), name, "cc" if name == "gcc" else "c++"):
        if cand and shutil.which(cand):
            return cand
    raise RuntimeError(f"no host compiler {name!r} on PATH; install gcc/g++ to build the C reference")


def build_c_reference(source: str, out_path: str, timeout_s: float = 120.0) -> dict:
    """Builds the task's C reference into a shared library (host code; args are host pointers)."""
    Path(out_path).parent.mkdir(parents=True, exist_ok=True)
    logs = []
    with tempfile.TemporaryDirectory(prefix="cudaperf_cref_") as tmp:
        attempts = [(_host_cc("gcc"), "ref.c", source, ["-x", "c", "-std=gnu11"])]
        includes = "\n".join(ln for ln in source.splitlines() if ln.lstrip().startswith("#"))
        body = "\n".join(ln if not ln.lstrip().startswith("#") else "" for ln in source.splitlines())
        attempts.append((_host_cc("g++"), "ref.cpp", f'{includes}\nextern "C" {{\n{body}\n}}\n',
                         ["-x", "c++", "-std=c++17"]))
        for cc, name, text, lang in attempts:
            src = Path(tmp) / name
            src.write_text(text)
            cmd = [cc, *lang, "-O2", "-fPIC", "-shared", "-o", str(out_path), str(src), "-lm"]
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=tmp,
                                   stdin=subprocess.DEVNULL)
            except subprocess.TimeoutExpired:
                logs.append(f"{cc} timed out after {timeout_s:.0f} s")
                continue
            logs.append(re.sub(re.escape(tmp) + "/?", "", p.stdout + p.stderr))
            if p.returncode == 0 and Path(out_path).is_file():
                return {"ok": True, "log": logs[-1], "path": str(out_path), "resources": {}}
    return {"ok": False, "log": "\n".join(logs), "path": None, "resources": {}}
