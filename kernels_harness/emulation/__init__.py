"""The cpu backend: CUDA C++ solutions compiled by the host compiler and run with CUDA semantics.

    from kernels_harness.emulation import build_shared_library, EmulatedLibrary
    res = build_shared_library(source, "sol.so", checks=False)   # BuildResult(ok, log, path, seconds)
    lib = EmulatedLibrary(res.path); fn = lib.entry("saxpy")

See build.py (modes, AddressSanitizer), rewrite.py (what is rewritten), library.py (the ctypes wrapper)
and include/ (the emulation header and runtime).
"""
from kernels_harness.build.nvcc import BuildResult
from kernels_harness.emulation.asan import (
           ASAN_EXIT_CODE,
           asan_environment,
           summarize_report,
)
from kernels_harness.emulation.build import (
           CompilerMissing,
           build_shared_library,
           runtime_object,
)
from kernels_harness.emulation.library import (
           WATCHDOG_EXIT_CODE,
           EmulatedLibrary,
           LibraryLoadError,
)
from kernels_harness.emulation.rewrite import UnsupportedConstruct, rewrite

__all__ = [
           "ASAN_EXIT_CODE",
           "WATCHDOG_EXIT_CODE",
           "BuildResult",
           "CompilerMissing",
           "EmulatedLibrary",
           "LibraryLoadError",
           "UnsupportedConstruct",
           "asan_environment",
           "build_shared_library",
           "rewrite",
           "runtime_object",
           "summarize_report",
]
