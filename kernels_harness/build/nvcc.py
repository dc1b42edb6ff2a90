"""The CUDA compiler: find nvcc, build a solution into a shared library, read its resource use.

nvcc is taken from, in order: $CUDAPERF_NVCC, PATH, $CUDA_HOME/bin, /usr/local/cuda/bin, and the PyPI
packages nvidia-cuda-nvcc + nvidia-cuda-runtime + nvidia-cuda-cccl (declared dependencies), so that a
machine with no CUDA toolkit still compiles for sm_90 and reads registers and shared memory from ptxas.
Nothing here runs generated code: compilation is a subprocess with a timeout.
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEFAULT_ARCH = "sm_90"
# --expt-relaxed-constexpr as in PyTorch's extension builds (KernelBench's own): honest kernels call std::max,
# std::min and std::sqrt, constexpr host functions that nvcc refuses in device code without it
DEFAULT_FLAGS = ("-O3", "-std=c++17", "--expt-relaxed-constexpr", "-Xptxas", "-v", "-lineinfo")


class CompilerNotFound(RuntimeError):
    """No nvcc anywhere: the message says how to get one."""


@dataclasses.dataclass
class BuildResult:
    ok: bool
    log: str
    path: Path | None = None
    resources: dict = dataclasses.field(default_factory=dict)  # kernel -> resource dict
    seconds: float = 0.0


def _pip_nvcc() -> Path | None:
    """nvcc from the nvidia-cuda-nvcc wheel (nvidia/cu13/bin/nvcc or nvidia/cuda_nvcc/bin/nvcc)."""
    for base in map(Path, sys.path):
        for sub in ("nvidia/cu13/bin/nvcc", "nvidia/cuda_nvcc/bin/nvcc"):
            cand = base / sub
            if cand.is_file() and os.access(cand, os.X_OK):
                return cand
    return None


def find_nvcc(allow_path: bool = True) -> Path:
    """Path of the nvcc to use; raises CompilerNotFound with what to install."""
    env = os.environ.get("CUDAPERF_NVCC")
    if env:
        if Path(env).is_file():
            return Path(env)
        raise CompilerNotFound(f"CUDAPERF_NVCC={env} is not a file; point it at an nvcc binary or unset it")
    if allow_path:
        hit = shutil.which("nvcc")
        if hit:
            return Path(hit)
        for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
            if home and (Path(home) / "bin" / "nvcc").is_file():
                return Path(home) / "bin" / "nvcc"
    pip = _pip_nvcc()
    if pip:
        return pip
    raise CompilerNotFound("no nvcc found on PATH, in CUDA_HOME or in site-packages; install the CUDA toolkit "
                           "or `pip install nvidia-cuda-nvcc nvidia-cuda-runtime nvidia-cuda-cccl`")


_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(\w+)'")
_PROPS = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(?:, used (\d+) barriers)?(?:, (\d+) bytes smem)?(?:, (\d+) bytes cmem\[0\])?")


def demangle(names: list[str]) -> dict[str, str]:
    """mangled -> demangled C++ names (identity where c++filt is missing)."""
    tool = shutil.which("c++filt")
    if not tool or not names:
        return {n: n for n in names}
    out = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True, timeout=30,
                         check=False).stdout
    lines = out.splitlines()
    return {n: (lines[i] if i < len(lines) else n) for i, n in enumerate(names)}


def kernel_base_name(demangled: str) -> str:
    """`void ns::k<float, 4>(float const*, int)` -> `k` (the name a launch record carries)."""
    head = demangled.split("(", 1)[0]
    depth, cut = 0, len(head)
    for i, ch in enumerate(head):  # drop template arguments
        if ch == "<":
            if depth == 0:
                cut = min(cut, i)
            depth += 1
        elif ch == ">":
            depth -= 1
    head = head[:cut].strip().split()[-1] if head[:cut].strip() else head
    return head.split("::")[-1]


def parse_ptxas(log: str) -> dict[str, dict]:
    """Per-kernel resources from `-Xptxas -v` output, keyed by the kernel's base name.

    Each value: {registers, barriers, smem_static, cmem, stack_frame, spill_stores, spill_loads,
    mangled, signature, arch}. Device functions that are not entries are skipped.
    """
    recs: dict[str, dict] = {}
    current = None
    for line in log.splitlines():
        m = _ENTRY.search(line)
        if m:
            current = m.group(1)
            recs.setdefault(current, {"mangled": current, "arch": m.group(2)})
            continue
        m = _PROPS.search(line)
        if m:
            current = m.group(1) if m.group(1) in recs else current
            continue
        m = _FRAME.search(line)
        if m and current in recs:
            recs[current].update(stack_frame=int(m.group(1)), spill_stores=int(m.group(2)),
                                 spill_loads=int(m.group(3)))
            continue
        m = _USED.search(line)
        if m and current in recs:
            recs[current].update(registers=int(m.group(1)), barriers=int(m.group(2) or 0),
                                 smem_static=int(m.group(3) or 0), cmem=int(m.group(4) or 0))
    names = demangle(list(recs))
    out: dict[str, dict] = {}
    for mangled, rec in recs.items():
        sig = names[mangled]
        rec = {"registers": 0, "barriers": 0, "smem_static": 0, "cmem": 0, "stack_frame": 0,
               "spill_stores": 0, "spill_loads": 0, **rec, "signature": sig}
        base = kernel_base_name(sig)
        key = base if base not in out else sig
        out[key] = rec
    return out


def _run(cmd: list[str], timeout_s: float, cwd: str) -> tuple[int, str]:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=cwd,
                              stdin=subprocess.DEVNULL, check=False)
    except subprocess.TimeoutExpired:
        return -1, f"nvcc timed out after {timeout_s:.0f} s"
    return proc.returncode, (proc.stdout + proc.stderr)


def build_shared(source: str, out_path: str | Path, arch: str = DEFAULT_ARCH, extra_flags=(),
                 timeout_s: float = 120.0, trim: bool = True) -> BuildResult:
    """Compiles one CUDA translation unit into a shared library at `out_path`.

    Never raises for a bad source: `ok=False` and the compiler log (`trim=False`: the whole log, for
    kernels_harness.build.batch to read). Raises CompilerNotFound if no nvcc.
    """
    nvcc = str(find_nvcc())
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="cudaperf_nvcc_") as tmp:
        src = Path(tmp) / "solution.cu"
        src.write_text(source)
        cmd = [nvcc, f"-arch={arch}", "-shared", "-Xcompiler", "-fPIC", *DEFAULT_FLAGS, *extra_flags,
               "-o", str(out_path), str(src)]
        rc, log = _run(cmd, timeout_s, tmp)
    log = log.replace(str(src), "solution.cu")
    ok = rc == 0 and out_path.is_file()
    return BuildResult(ok=ok, log=_trim_log(log, ok) if trim else log, path=out_path if ok else None,
                       resources=parse_ptxas(log) if ok else {}, seconds=time.perf_counter() - t0)


_VERSION: dict[str, str] = {}


def compiler_id(arch: str = DEFAULT_ARCH) -> str:
    """nvcc's path and version line, the default flags and the arch (a build cache key part)."""
    nvcc = str(find_nvcc())
    if nvcc not in _VERSION:
        try:
            out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60, check=False).stdout
        except (OSError, subprocess.TimeoutExpired):
            out = ""
        _VERSION[nvcc] = nvcc + " " + (out.strip().splitlines() or ["?"])[-1]
    return " ".join([_VERSION[nvcc], arch, *DEFAULT_FLAGS])


def _trim_log(log: str, ok: bool) -> str:
    if ok:
        return log
    errors = [ln for ln in log.splitlines() if "error" in ln.lower()]
    return "\n".join(errors[:20] + ["--- full log ---", log[-8000:]]) if errors else log[-8000:]


_CACHE: dict[str, dict] = {}


def resource_usage(source: str, arch: str = DEFAULT_ARCH, extra_flags=(), timeout_s: float = 120.0) -> dict:
    """Registers, shared memory, stack and spills per kernel, from ptxas (device code only: a cubin).

    Returns {kernel_base_name: {registers, smem_static, spill_stores, spill_loads, stack_frame, cmem,
    barriers, signature, mangled, arch}}; raises ValueError with the first compiler errors if the
    source does not compile.
    """
    key = hashlib.sha256("\0".join([source, arch, *extra_flags]).encode()).hexdigest()
    if key in _CACHE:
        return _CACHE[key]
    rc, log = ptxas_log(source, arch, extra_flags, timeout_s)
    if rc != 0:
        raise ValueError("the source does not compile for " + arch + ": " + _trim_log(log, False)[:2000])
    _CACHE[key] = parse_ptxas(log)
    return _CACHE[key]


def ptxas_log(source: str, arch: str = DEFAULT_ARCH, extra_flags=(), timeout_s: float = 120.0) -> tuple[int, str]:
    """(return code, log) of compiling `source`'s device code to a cubin with `-Xptxas -v`."""
    nvcc = str(find_nvcc())
    with tempfile.TemporaryDirectory(prefix="cudaperf_ptxas_") as tmp:
        src = Path(tmp) / "solution.cu"
        src.write_text(source)
        cmd = [nvcc, f"-arch={arch}", "-cubin", *DEFAULT_FLAGS, *extra_flags, "-o",
               str(Path(tmp) / "solution.cubin"), str(src)]
        return _run(cmd, timeout_s, tmp)
