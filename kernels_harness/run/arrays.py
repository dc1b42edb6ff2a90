"""Harness-owned arrays: numpy dtypes of the task schema, guard zones, poison, and output comparison.

Every array the harness hands to a candidate lives inside a larger buffer with a guard zone before and
after it, filled with a canary pattern that is a NaN for every float dtype and a large value for
integers. A guard zone is `guard_elements(n, itemsize)` elements: at least GUARD_BYTES, and as large as
the array itself up to GUARD_MAX_BYTES, so an index computed with a wrong stride or bound (up to twice
the length) still lands in it. After every call `first_out_of_bounds` names the array and the offset of
the first changed canary ("wrote y[1000003] (3 elements past the end of y, length 1000000)"), and the
verdict is `wrong`.

What is caught: any write into [start - G, start) or [end, end + G) (G the guard zone); a write further
away when it lands in another harness array (its canaries, its data: inputs are checked unchanged,
outputs against the reference), when it faults (cuda: unmapped memory is cudaErrorIllegalAddress;
cpu: under AddressSanitizer a heap-buffer-overflow ends the worker), both `runtime_error`. Not caught:
a write that skips the guard zone and lands in memory the harness does not check (free blocks of
CuPy's pool, the candidate's own allocations); a read out of bounds is caught only through its effect
(it reads NaN canaries, so the result is wrong). Outputs are poisoned with the same kind of pattern
before every call, so a kernel that writes nothing cannot pass. All functions take the array module
`xp` (numpy on the cpu backend, cupy on the cuda backend), so the comparison runs where the data is
and large arrays never reach the host.

The comparison (`compare`) is scale-aware: see its docstring.
"""
from __future__ import annotations

import dataclasses

import numpy as np

GUARD_BYTES = 4096
GUARD_MAX_BYTES = 2 << 20
# cudaMalloc's alignment: every array the candidate sees starts on it (float4 / vector loads rely on it)
ALIGN_BYTES = 256
# The comparison's absolute tolerance is at most this fraction of the reference's largest magnitude, so
# an output without information (zeros, a constant) cannot pass because every reference value is below
# the task's atol (KernelBench softmax over 393,216 columns: values ~1e-5 against atol 1e-4).
ATOL_SCALE = 1e-2
# Canary / poison bit patterns by item size: NaN for float16/bfloat16/float32/float64, large for ints.
_PATTERNS = {1: (0xA5, 0x5A), 2: (0x7FA5, 0xFFDA), 4: (0x7FA5A5A5, 0xFFDADADA),
             8: (0x7FF5A5A5A5A5A5A5, 0xFFFADADADADADADA)}
_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def np_dtype(name: str) -> np.dtype:
    """numpy dtype of a schema dtype name (bfloat16 through ml_dtypes)."""
    if name == "bfloat16":
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def storage_dtype(xp, dtype: np.dtype) -> np.dtype:
    """The dtype an array of `dtype` is stored with under `xp`: CuPy has no bfloat16, so on the device
    bfloat16 arrays hold their uint16 bits (the kernel sees the same bytes)."""
    if xp is not np and dtype.name == "bfloat16":
        return np.dtype(np.uint16)
    return dtype


def as_values(xp, a, dtype_name: str):
    """`a` as comparable numbers: bfloat16 bits (uint16 storage) become float32; others unchanged."""
    if dtype_name == "bfloat16" and a.dtype == np.uint16:
        return (a.astype(xp.uint32) << 16).view(xp.float32)
    return a


def is_float(dtype: np.dtype) -> bool:
    return dtype.kind == "f" or dtype.name == "bfloat16"


def pattern(itemsize: int, variant: int = 0):
    """The canary (variant 0) or the alternative poison (variant 1) for an item size, as an unsigned
    numpy scalar (CuPy cannot take Python ints above 2**63 - 1)."""
    return _UINT[itemsize](_PATTERNS[itemsize][variant % 2])


@dataclasses.dataclass
class Guarded:
    """An array of `shape` inside a buffer with canary zones on both sides.

    base: 1-D xp array of `guard + n + guard` elements; view: the `shape` array the kernel sees.
    """
    base: object
    view: object
    guard: int
    n: int
    xp: object

    @property
    def ptr(self) -> int:
        """Address of the first element of `view` (a host or device pointer)."""
        if self.xp is np:
            return int(self.base.ctypes.data) + self.guard * self.base.itemsize
        return int(self.base.data.ptr) + self.guard * self.base.itemsize

    def bits(self, part):
        return part.view(_UINT[self.base.itemsize])

    def guards_intact(self) -> bool:
        """True when neither canary zone was written."""
        return self.first_out_of_bounds() is None

    def first_out_of_bounds(self) -> int | None:
        """Index (relative to the array's first element) of the changed canary nearest to the array, or
        None when both guard zones are intact: n + k for a write k + 1 elements past the end of an array
        of n elements, -k for a write k elements before its start."""
        xp, pat = self.xp, pattern(self.base.itemsize)
        if self.guard == 0:
            return None
        tail = self.bits(self.base[self.guard + self.n:]) != pat
        if bool(xp.any(tail)):
            return self.n + int(xp.argmax(tail.astype(xp.uint8)))
        head = self.bits(self.base[:self.guard]) != pat
        if bool(xp.any(head)):
            last = self.guard - 1 - int(xp.argmax(head[::-1].astype(xp.uint8)))
            return last - self.guard
        return None

    def poison(self, variant: int = 0) -> None:
        """Fills the visible array with the poison pattern (the trial's variant)."""
        self.bits(self.base[self.guard:self.guard + self.n])[...] = pattern(self.base.itemsize, variant)


def guard_elements(n: int, itemsize: int, guard_bytes: int = GUARD_BYTES) -> int:
    """Elements of one guard zone of an n-element array: max(guard_bytes, min(n bytes, GUARD_MAX_BYTES)).
    guard_bytes=0: no guard zone."""
    if not guard_bytes:
        return 0
    g = max(guard_bytes // itemsize, min(n, GUARD_MAX_BYTES // itemsize), 1)
    step = max(1, ALIGN_BYTES // itemsize)  # whole multiples of ALIGN_BYTES: the array after it stays aligned
    return -(-g // step) * step


def describe_out_of_bounds(name: str, offset: int, n: int) -> str:
    """'wrote y[1000003] (4 elements past the end of y, length 1000000)' for a changed canary."""
    if offset < 0:
        where = f"{-offset} element{'s' if offset < -1 else ''} before the start of {name}"
    else:
        k = offset - n + 1
        where = f"{k} element{'s' if k > 1 else ''} past the end of {name}"
    return f"wrote {name}[{offset}] ({where}, length {n})"


def allocate(xp, dtype: np.dtype, shape: tuple, guard_bytes: int = GUARD_BYTES) -> Guarded:
    """A guarded array of `shape` and `dtype` whose canaries are set; contents are the canary too.

    The guard zones are `guard_elements(n, itemsize, guard_bytes)` long on each side. guard_bytes=0
    gives an exact-size buffer. The array starts on ALIGN_BYTES, as one from cudaMalloc does.
    """
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    itemsize = np.dtype(dtype).itemsize
    guard = guard_elements(n, itemsize, guard_bytes)
    pad = max(1, ALIGN_BYTES // itemsize)
    raw = xp.empty(guard * 2 + n + pad, dtype=dtype)
    addr = int(raw.ctypes.data) if xp is np else int(raw.data.ptr)
    off = ((-addr) % ALIGN_BYTES) // itemsize  # the buffer starts on ALIGN_BYTES, so the array does too
    base = raw[off:off + guard * 2 + n]
    base.view(_UINT[itemsize])[...] = pattern(itemsize)
    view = base[guard:guard + n].reshape(shape)
    return Guarded(base=base, view=view, guard=guard, n=n, xp=xp)


def bitwise_equal(xp, a, b) -> bool:
    """True when two arrays of the same dtype and shape hold the same bits (NaN payloads included)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    u = _UINT[a.dtype.itemsize]
    return bool(xp.array_equal(a.reshape(-1).view(u), b.reshape(-1).view(u)))


def reference_scale(xp, ref) -> float:
    """The largest finite magnitude of a float reference (0.0 when none; 1.0 for non-float dtypes)."""
    r = ref.reshape(-1)
    if r.size == 0 or not is_float(r.dtype):
        return 1.0
    r64 = r.astype(xp.float64)
    return float(xp.abs(xp.where(xp.isfinite(r64), r64, 0.0)).max())


def effective_atol(atol: float, scale: float) -> float:
    """The absolute tolerance used against a reference of largest magnitude `scale`: the task's atol,
    but at most ATOL_SCALE * scale (an all-zero reference keeps the task's atol). The device comparison
    (kernels_harness.run.device_kernels) uses this same function."""
    return float(atol) if scale <= 0 else min(float(atol), ATOL_SCALE * float(scale))


def compare(xp, out, ref, atol: float, rtol: float) -> dict:
    """Checks `out` against `ref` at the reference's scale: |out - ref| <= atol' + rtol * |ref| elementwise,
    with atol' = effective_atol(atol, max |ref|) (the task's atol, but at most 1% of the reference's largest
    magnitude), so an output without information - zeros, a constant - fails where the reference's values
    are all below the task's atol but vary. Where the reference's magnitude is above 100 * atol nothing
    changes: honest float32 kernels (other summation orders, fused multiply-adds) keep passing.

    out, ref: xp arrays of one shape and dtype. NaN in `out` passes only where `ref` has NaN; +-Inf only
    where `ref` has the same infinity. Integers and bool compare exactly unless atol > 0 (no scaling).
    Returns {"ok": bool, "bad": int (failing elements), "nonfinite": int (NaN/Inf where ref is finite),
    "max_abs_err": float | None, "max_rel_err": float | None, "first_bad": int | None (flat index),
    "atol": float (the atol used), "scale": float (max |ref|)}.
    """
    o = out.reshape(-1)
    r = ref.reshape(-1)
    if o.size == 0:
        return {"ok": True, "bad": 0, "nonfinite": 0, "max_abs_err": 0.0, "max_rel_err": 0.0, "first_bad": None,
                "atol": float(atol), "scale": 0.0}
    scale = 1.0
    if is_float(o.dtype):
        o64, r64 = o.astype(xp.float64), r.astype(xp.float64)
        rfin, ofin = xp.isfinite(r64), xp.isfinite(o64)
        both = rfin & ofin
        absr = xp.where(rfin, xp.abs(xp.where(rfin, r64, 0.0)), 0.0)
        scale = float(absr.max())
        atol = effective_atol(atol, scale)
        diff = xp.abs(xp.where(both, o64, 0.0) - xp.where(both, r64, 0.0))
        same_nonfinite = ~rfin & ((xp.isnan(r64) & xp.isnan(o64)) | (r64 == o64))
        bad = (both & (diff > atol + rtol * absr)) | (~both & ~same_nonfinite)
        nonfinite = int(xp.count_nonzero(rfin & ~ofin))
        rel = diff / xp.maximum(absr, 1e-30)
        max_abs, max_rel = float(diff.max()), float(xp.where(both, rel, 0.0).max())
    else:
        o64, r64 = o.astype(xp.float64), r.astype(xp.float64)
        diff = xp.abs(o64 - r64)
        bad = diff > atol
        nonfinite = 0
        max_abs = float(diff.max())
        max_rel = float((diff / xp.maximum(xp.abs(r64), 1.0)).max())
    n_bad = int(xp.count_nonzero(bad))
    first = int(xp.argmax(bad)) if n_bad else None
    return {"ok": n_bad == 0, "bad": n_bad, "nonfinite": nonfinite,
            "max_abs_err": max_abs if nonfinite == 0 else None,
            "max_rel_err": max_rel if nonfinite == 0 else None, "first_bad": first,
            "atol": float(atol), "scale": scale}


def no_information(xp, out, inputs: dict) -> str:
    """Why a (failing) output carries no information, for the verdict's sentence: "is constant (0)" or
    "is a copy of input 'x'", else "". out: xp array; inputs: name -> xp array (the call's inputs)."""
    o = out.reshape(-1)
    if o.size > 1:
        u = _UINT.get(o.dtype.itemsize)
        if u is not None and bool(xp.all(o.view(u) == o.view(u)[0])):
            return f"is constant ({float(o[0].astype(xp.float64)):.6g})" if o.dtype.kind in "fiub" else "is constant"
    for name, a in inputs.items():
        if a.shape == out.shape and a.dtype == out.dtype and bitwise_equal(xp, out, a):
            return f"is a copy of input {name!r}"
    return ""
