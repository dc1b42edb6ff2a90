"""Compile jobs, run in the pool's compile worker processes (never in the caller's process).

`build(kind, backend, source, out_path)` turns one translation unit into a shared library:
  kind "solution":    a CUDA solution; backend "cuda" -> nvcc (kernels_harness.build.nvcc),
                      backend "cpu" -> the emulation layer (kernels_harness.emulation; `checks`
                      builds with AddressSanitizer, so the worker must preload libasan; with
                      `resources`, ptxas registers/shared memory are read too, for the features)
  kind "c_reference": a task's C reference -> gcc (as C, else as C++ wrapped in extern "C")
Returns a plain dict {ok, log, path, resources, seconds} that crosses process boundaries.

`build_batch(backend, members, out_path)` builds several solutions into one library
(kernels_harness.build.batch): {"built": {k: build dict with "symbol"}, "alone": [k, ...], "seconds"};
the members in "alone" must be built with `build` (their own source, their own log).
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
    except Exception as e:  # noqa: BLE001 - a compiler that is missing or crashes is a failed build, not a crash
        res = {"ok": False, "log": f"{type(e).__name__}: {e}", "path": None, "resources": {},
               "setup_error": type(e).__name__ == "CompilerNotFound"}
    res["log"] = (res.get("log") or "")[-MAX_LOG:]
    res["seconds"] = time.perf_counter() - t0
    return res


def build_batch(backend: str, members: list, out_path: str, timeout_s: float = 120.0, arch: str = "sm_90",
                checks: bool = True, resources: bool = True) -> dict:
    """members: [(source, entry, symbol, namespace)] of kind "solution"; see the module docstring."""
    from kernels_harness.build import batch
    t0 = time.perf_counter()
    ms = [batch.Member(*m) for m in members]
    try:
        if backend == "cuda":
            built, alone = _batch_cuda(ms, out_path, timeout_s, arch)
        elif backend == "cpu":
            built, alone = _batch_cpu(ms, out_path, timeout_s, arch, checks, resources)
        else:
            raise ValueError(f"unknown backend {backend!r}")
    except Exception:  # noqa: BLE001 - a missing compiler, a crash: every member is built alone (and fails there)
        built, alone = {}, list(range(len(ms)))
    secs = time.perf_counter() - t0
    n = max(1, len(built))
    for rec in built.values():
        rec.pop("full_log", None)
        rec.update(ok=True, seconds=secs / n)
        rec["log"] = rec["log"][-MAX_LOG:]
    return {"built": built, "alone": alone, "seconds": secs}


def _batch_cuda(ms, out_path, timeout_s, arch):
    from kernels_harness.build import batch, nvcc

    def compile_text(text, path):
        r = nvcc.build_shared(text, path, arch=arch, timeout_s=timeout_s, trim=False)
        return batch.Compiled(r.ok, r.log, timed_out=not r.ok and "nvcc timed out" in r.log)
    built, alone = batch.build(ms, out_path, compile_text)
    for k, rec in built.items():
        rec["resources"] = batch.member_resources(nvcc.parse_ptxas(rec["log"]), ms[k].namespace)
    return built, alone


def _batch_cpu(ms, out_path, timeout_s, arch, checks, resources):
    from dataclasses import replace

    from kernels_harness.build import batch
    from kernels_harness.emulation.build import compile_rewritten
    from kernels_harness.emulation.rewrite import UnsupportedConstruct, rewrite
    rewritten, index, alone = [], [], []
    for k, m in enumerate(ms):
        try:
            rewritten.append(replace(m, source=rewrite(m.source).source))
            index.append(k)
        except UnsupportedConstruct:
            alone.append(k)  # its own build reports the construct

    def compile_text(text, path):
        r = compile_rewritten(text, path, checks=checks, timeout_s=timeout_s, trim=False)
        return batch.Compiled(r.ok, r.log, timed_out=not r.ok and "compiler timed out" in r.log)
    sub_built, sub_alone = batch.build(rewritten, out_path, compile_text)
    built = {index[j]: rec for j, rec in sub_built.items()}
    alone = sorted(alone + [index[j] for j in sub_alone])
    if resources and built:
        for k, res in _batch_ptxas([ms[k] for k in sorted(built)], arch, timeout_s).items():
            built[sorted(built)[k]]["resources"] = res
    for k, rec in built.items():
        rec.setdefault("resources", {})
        if resources and not rec["resources"]:
            rec["resources"] = _ptxas_resources(ms[k].source, arch, timeout_s)
    return built, alone


def _batch_ptxas(ms, arch, timeout_s) -> dict:
    """{k: ptxas resources} of the members from one nvcc -cubin of them combined ({} where it fails)."""
    from kernels_harness.build import batch, nvcc
    try:
        rc, log = nvcc.ptxas_log(batch.combine(ms), arch, timeout_s=timeout_s)
    except Exception:  # noqa: BLE001 - best effort: the resources are optional
        return {}
    if rc != 0:
        return {}
    return {k: batch.member_resources(nvcc.parse_ptxas(batch.member_log(log, k, m.namespace)), m.namespace)
            for k, m in enumerate(ms)}


def _ptxas_resources(source: str, arch: str, timeout_s: float) -> dict:
    """Registers and shared memory per kernel from ptxas, for the cpu backend's features ({} if no nvcc)."""
    try:
        from kernels_harness.build import nvcc
        return nvcc.resource_usage(source, arch=arch, timeout_s=timeout_s)
    except Exception:  # noqa: BLE001 - no nvcc, or a source the emulation accepts and nvcc does not
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
                                   stdin=subprocess.DEVNULL, check=False)
            except subprocess.TimeoutExpired:
                logs.append(f"{cc} timed out after {timeout_s:.0f} s")
                continue
            logs.append(re.sub(re.escape(tmp) + "/?", "", p.stdout + p.stderr))
            if p.returncode == 0 and Path(out_path).is_file():
                return {"ok": True, "log": logs[-1], "path": str(out_path), "resources": {}}
    return {"ok": False, "log": "\n".join(logs), "path": None, "resources": {}}
