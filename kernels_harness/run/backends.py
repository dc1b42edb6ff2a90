"""Backends of the execution worker: where arrays live and how a solution's entry is called.

A backend has `xp` (the array module), `load(path)` (a loaded library), `entry(lib, name, task,
with_stream)` (a ctypes function), `call(fn, args)` (-> int status), `synchronize()` (raises
DeviceError), `check_library(lib)` (-> error text or ""), `launches(lib)` and `to_host` / `to_device`.
Only the worker process (kernels_harness.run.worker) creates one: generated code runs nowhere else.
"""
from __future__ import annotations

import ctypes
import importlib
import os

import numpy as np

from kernels_harness.run.arrays import GUARD_BYTES

_CTYPES = {"float32": ctypes.c_float, "float64": ctypes.c_double, "int32": ctypes.c_int32,
           "uint32": ctypes.c_uint32, "int64": ctypes.c_int64, "uint64": ctypes.c_uint64,
           "int16": ctypes.c_int16, "int8": ctypes.c_int8, "uint8": ctypes.c_uint8, "bool": ctypes.c_bool,
           "float16": ctypes.c_uint16, "bfloat16": ctypes.c_uint16}


class DeviceError(RuntimeError):
    """An error reported by the device after a call; `sticky` means the worker must be replaced."""

    def __init__(self, message: str, sticky: bool = True):
        super().__init__(message)
        self.sticky = sticky


def emulation_module():
    """The cpu backend's emulation layer (CUDAPERF_EMULATION_MODULE overrides it, for debugging)."""
    return importlib.import_module(os.environ.get("CUDAPERF_EMULATION_MODULE", "kernels_harness.emulation"))


def scalar_arg(dtype: str, value):
    """A Python value converted for ctypes (half-precision scalars are passed as their bits)."""
    if dtype == "float16":
        return int(np.float16(value).view(np.uint16))
    if dtype == "bfloat16":
        from kernels_harness.run.arrays import np_dtype
        return int(np.asarray(value, dtype=np_dtype("bfloat16")).view(np.uint16))
    return value


def set_signature(fn, task, with_stream: bool):
    """Sets argtypes/restype of an entry: arrays as pointers, scalars by value, then the stream."""
    types = [ctypes.c_void_p if a.is_array else _CTYPES[a.dtype] for a in task.signature]
    if with_stream:
        types.append(ctypes.c_void_p)
    fn.argtypes = types
    fn.restype = ctypes.c_int
    return fn


class CpuBackend:
    """The emulation backend: arrays are numpy buffers, the stream is NULL, no timing."""
    name = "cpu"
    can_time = False

    def __init__(self, device: int = 0):
        self._emulation = emulation_module()
        self.xp = np
        self.stream_ptr = None
        # guard zones under AddressSanitizer too: a write just past an array changes a canary and is named
        # ("wrote y[1000]"), one beyond the guard zone is ASan's heap-buffer-overflow (the worker ends)
        self.guard_bytes = GUARD_BYTES
        self.runner = None  # kernels_harness.run.sandbox.CandidateThread: loads and calls happen there

    def load(self, path: str):
        if self.runner is None:
            return self._emulation.EmulatedLibrary(path)
        return self.runner.run(self._emulation.EmulatedLibrary, path)

    def entry(self, lib, name: str, task, with_stream: bool = True):
        try:
            fn = lib.entry(name)
        except (AttributeError, KeyError, OSError, RuntimeError) as e:
            raise LookupError(str(e).splitlines()[0] if str(e) else
                              f"the solution does not export `{task.c_prototype()}`") from None
        return set_signature(fn, task, with_stream)

    def call(self, fn, args: list) -> int:
        if self.runner is None:
            return int(fn(*args, self.stream_ptr))
        return self.runner.run(lambda: int(fn(*args, self.stream_ptr)))

    def thread_mark(self, lib):
        """(threads of this process, threads the library's runtime started), or None if it does not say."""
        own = lib.threads_started() if hasattr(lib, "threads_started") else None
        return None if own is None else (_thread_count(), own)

    def threads_left(self, lib, mark) -> int:
        """Threads started since `mark` that are still running and are not the emulation runtime's."""
        if mark is None:
            return 0
        return max(0, (_thread_count() - mark[0]) - (lib.threads_started() - mark[1]))

    def synchronize(self) -> None:
        return None

    def check_library(self, lib) -> str:
        err = lib.last_error()
        return str(err) if err else ""

    def reset(self, lib) -> None:
        lib.reset()

    def launches(self, lib) -> list:
        try:
            return [dict(x) for x in lib.launches()]
        except Exception:  # noqa: BLE001 - launch records are diagnostics only
            return []

    def to_host(self, a):
        return a

    def to_device(self, a):
        return np.array(a, copy=True)


class CudaBackend:
    """nvcc-built libraries on one GPU: arrays are CuPy device arrays, work goes on one CuPy stream."""
    name = "cuda"
    can_time = True

    def __init__(self, device: int = 0):
        import cupy
        self.cp = cupy
        self.xp = cupy
        self.device = cupy.cuda.Device(device)
        self.device.use()
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self.stream.use()
        self.stream_ptr = int(self.stream.ptr)
        self.guard_bytes = GUARD_BYTES

    def load(self, path: str):
        return ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)

    def entry(self, lib, name: str, task, with_stream: bool = True):
        try:
            fn = getattr(lib, name)
        except AttributeError:
            raise LookupError(f"the solution does not export `{task.c_prototype()}` "
                              "(is it declared extern \"C\"?)") from None
        return set_signature(fn, task, with_stream)

    def call(self, fn, args: list) -> int:
        return int(fn(*args, self.stream_ptr))

    def thread_mark(self, lib):
        return None  # the CUDA runtime starts threads of its own: not counted on this backend

    def threads_left(self, lib, mark) -> int:
        return 0

    def synchronize(self) -> None:
        try:
            self.cp.cuda.runtime.deviceSynchronize()
        except self.cp.cuda.runtime.CUDARuntimeError as e:
            raise DeviceError(f"CUDA error after the call: {e}", sticky=True) from None

    def check_library(self, lib) -> str:
        return ""

    def reset(self, lib) -> None:
        return None

    def launches(self, lib) -> list:
        return []

    def to_host(self, a):
        return self.cp.asnumpy(a)

    def to_device(self, a):
        a = np.asarray(a)
        return self.cp.asarray(a.view(np.uint16) if a.dtype.name == "bfloat16" else a)

    def free_memory(self) -> int:
        """Free device memory plus what CuPy's pool holds (drops only when something else keeps memory)."""
        return int(self.cp.cuda.runtime.memGetInfo()[0]) + int(self.cp.get_default_memory_pool().total_bytes())


def _thread_count() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 0


def make_backend(name: str, device: int = 0):
    if name == "cpu":
        return CpuBackend(device)
    if name == "cuda":
        return CudaBackend(device)
    raise ValueError(f"backend must be 'cpu' or 'cuda', not {name!r}")
