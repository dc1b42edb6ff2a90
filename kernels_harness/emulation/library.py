"""EmulatedLibrary: a solution library built for the cpu backend, loaded with ctypes.

    lib = EmulatedLibrary("sol.so")
    fn = lib.entry("saxpy"); fn.argtypes = [...]; rc = fn(..., None)   # cudaError_t, 0 on success
    lib.launches()   -> [{"kernel": "saxpy_kernel", "grid": (40, 1, 1), "block": (256, 1, 1), "smem": 0}]
    lib.last_error() -> "" or the message of the last kernel fault (barrier divergence, __trap, bad launch)
    lib.reset()      -> clears launch records and the (sticky) error state
    lib.set_watchdog(s) -> a launch longer than s seconds ends the process (exit code 87, message on stderr)

Arrays are plain host pointers on this backend (e.g. `arr.ctypes.data`), the stream may be None.
"""
from __future__ import annotations

import ctypes
import os
from pathlib import Path

WATCHDOG_EXIT_CODE = 87


class LibraryLoadError(RuntimeError):
    """The library cannot be loaded in this process; the message says what to do."""


def is_checks_build(path: str | Path) -> bool:
    """True if the library was built with checks=True (it links AddressSanitizer)."""
    return b"libasan.so" in Path(path).read_bytes()


def asan_loaded() -> bool:
    """True if AddressSanitizer's runtime is loaded in this process (via LD_PRELOAD)."""
    try:
        return "libasan" in Path("/proc/self/maps").read_text()
    except OSError:
        return False


class EmulatedLibrary:
    """A loaded cpu-backend solution library (see the module docstring)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if not self.path.is_file():
            raise LibraryLoadError(f"{self.path} does not exist; build it with build_shared_library first")
        if is_checks_build(self.path) and not asan_loaded():
            raise LibraryLoadError(f"{self.path.name} was built with checks=True (AddressSanitizer); load it in a "
                                   "process started with kernels_harness.emulation.asan_environment() "
                                   "or rebuild it with checks=False")
        try:
            self._lib = ctypes.CDLL(str(self.path), mode=os.RTLD_LOCAL | os.RTLD_NOW)
        except OSError as e:
            raise LibraryLoadError(f"cannot load {self.path.name}: {e}") from None
        lib = self._lib
        lib.cudaperf_emu_num_launches.restype = ctypes.c_int
        lib.cudaperf_emu_get_launch.restype = ctypes.c_int
        lib.cudaperf_emu_get_launch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int,
                                                ctypes.POINTER(ctypes.c_uint), ctypes.POINTER(ctypes.c_uint),
                                                ctypes.POINTER(ctypes.c_size_t)]
        lib.cudaperf_emu_last_error.restype = ctypes.c_char_p
        lib.cudaperf_emu_set_threads.argtypes = [ctypes.c_int]
        lib.cudaperf_emu_set_watchdog.argtypes = [ctypes.c_double]
        lib.cudaperf_emu_reset.restype = None

    def entry(self, name: str):
        """The exported entry `name` as a ctypes function (restype int = cudaError_t; set argtypes)."""
        try:
            fn = getattr(self._lib, name)
        except AttributeError:
            raise LibraryLoadError(f"the solution does not export `{name}`; declare it as "
                                   f'extern "C" int {name}(..., cudaStream_t stream)') from None
        fn.restype = ctypes.c_int
        return fn

    def launches(self) -> list[dict]:
        """Every kernel launch since the last reset: {kernel, grid (3 ints), block (3 ints), smem (bytes)}."""
        out = []
        name = ctypes.create_string_buffer(256)
        grid, block, smem = (ctypes.c_uint * 3)(), (ctypes.c_uint * 3)(), ctypes.c_size_t()
        for i in range(self._lib.cudaperf_emu_num_launches()):
            if self._lib.cudaperf_emu_get_launch(i, name, 256, grid, block, ctypes.byref(smem)) != 0:
                break
            out.append({"kernel": name.value.decode(), "grid": tuple(grid), "block": tuple(block),
                        "smem": int(smem.value)})
        return out

    def reset(self) -> None:
        """Clears the launch records and the error state (including a sticky kernel fault)."""
        self._lib.cudaperf_emu_reset()

    def last_error(self) -> str:
        """The message of the last kernel fault or launch error, or "" if there was none."""
        return (self._lib.cudaperf_emu_last_error() or b"").decode(errors="replace")

    def set_watchdog(self, seconds: float) -> None:
        """A launch running longer than `seconds` ends the process with WATCHDOG_EXIT_CODE and a message on
        stderr naming the kernel (0: off; also settable with $CUDAPERF_EMU_WATCHDOG_S). For worker processes."""
        self._lib.cudaperf_emu_set_watchdog(float(seconds))

    def threads_started(self) -> int | None:
        """OS threads this library's runtime has started (its block pool, the watchdog); None for a library
        built before the runtime counted them."""
        try:
            fn = self._lib.cudaperf_emu_threads_started
        except AttributeError:
            return None
        fn.restype = ctypes.c_int
        return int(fn())

    def set_threads(self, n: int) -> None:
        """How many host threads run blocks in parallel (0: the default, all cores)."""
        self._lib.cudaperf_emu_set_threads(int(n))
