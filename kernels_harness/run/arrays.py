"""Harness-owned arrays: numpy dtypes of the task schema, guard zones, poison, and output comparison.

Every array the harness hands to a candidate lives inside a larger buffer: GUARD_BYTES before and after
it are filled with a canary pattern that is a NaN for every float dtype and a large value for integers.
A write out of bounds changes a canary (checked after the call); a read out of bounds reads NaN, so the
result is wrong. Outputs are poisoned with the same kind of pattern before every call, so a kernel that
writes nothing cannot pass. All functions take the array module `xp` (numpy on the cpu backend, cupy
on the cuda backend), so the comparison runs where the data is and large arrays never reach the host.
"""
from __future__ import annotations

import dataclasses

import numpy as np

GUARD_BYTES = 4096
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
        xp, pat = self.xp, pattern(self.base.itemsize)
        head = self.bits(self.base[:self.guard])
        tail = self.bits(self.base[self.guard + self.n:])
        return bool(xp.all(head == pat)) and bool(xp.all(tail == pat))

    def poison(self, variant: int = 0) -> None:
        """Fills the visible array with the poison pattern (the trial's variant)."""
        self.bits(self.base[self.guard:self.guard + self.n])[...] = pattern(self.base.itemsize, variant)


def allocate(xp, dtype: np.dtype, shape: tuple, guard_bytes: int = GUARD_BYTES) -> Guarded:
    """A guarded array of `shape` and `dtype` whose canaries are set; contents are the canary too.

    guard_bytes=0 gives an exact-size buffer (for AddressSanitizer, which guards heap blocks itself).
    """
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    itemsize = np.dtype(dtype).itemsize
    guard = max(guard_bytes // itemsize, 1) if guard_bytes else 0
    base = xp.empty(guard * 2 + n, dtype=dtype)
    base.view(_UINT[itemsize])[...] = pattern(itemsize)
    view = base[guard:guard + n].reshape(shape)
    return Guarded(base=base, view=view, guard=guard, n=n, xp=xp)


def bitwise_equal(xp, a, b) -> bool:
    """True when two arrays of the same dtype and shape hold the same bits (NaN payloads included)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    u = _UINT[a.dtype.itemsize]
    return bool(xp.array_equal(a.reshape(-1).view(u), b.reshape(-1).view(u)))


def compare(xp, out, ref, atol: float, rtol: float) -> dict:
    """Checks `out` against `ref` elementwise: |out - ref| <= atol + rtol * |ref|.

    out, ref: xp arrays of one shape and dtype. NaN in `out` passes only where `ref` has NaN; +-Inf only
    where `ref` has the same infinity. Integers and bool compare exactly unless atol > 0.
    Returns {"ok": bool, "bad": int (failing elements), "nonfinite": int (NaN/Inf where ref is finite),
    "max_abs_err": float | None, "max_rel_err": float | None, "first_bad": int | None (flat index)}.
    """
    o = out.reshape(-1)
    r = ref.reshape(-1)
    if o.size == 0:
        return {"ok": True, "bad": 0, "nonfinite": 0, "max_abs_err": 0.0, "max_rel_err": 0.0, "first_bad": None}
    if is_float(o.dtype):
        o64, r64 = o.astype(xp.float64), r.astype(xp.float64)
        rfin, ofin = xp.isfinite(r64), xp.isfinite(o64)
        both = rfin & ofin
        absr = xp.where(rfin, xp.abs(xp.where(rfin, r64, 0.0)), 0.0)
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
            "max_rel_err": max_rel if nonfinite == 0 else None, "first_bad": first}
