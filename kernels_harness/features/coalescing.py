"""Coalescing of one global access: the 32-byte sectors a warp touches for its 32 threads.

From the index Form (see indexing.py), the element size and the block shape, the addresses of the 32
lanes of the first warp are enumerated (lane l has threadIdx = (l % bx, l / bx % by, ...)); a stride
only known symbolically (a parameter such as `cols`) is taken as at least one sector apart, as it is
for any realistic size. The estimate is comparable with Nsight Compute's sectors per request
(`l1tex__t_sectors_pipe_lsu_mem_global_op_{ld,st}.sum` / `..._requests_...`).
"""
from __future__ import annotations

import math
from fractions import Fraction

from kernels_harness.features.indexing import ZERO, Form, is_sym

SECTOR = 32
WARP = 32
KINDS = ("unit", "uniform", "strided_const", "strided_param", "indirect", "unknown")
# A symbolic stride stands for a stride of this many elements: large, sector-aligned (as row pitches
# of real arrays mostly are) and different per axis.
_SYM_STRIDE = (1 << 12, 1 << 20, 1 << 28)


def classify(f: Form, block: tuple = (256, 1, 1)) -> str:
    """unit | uniform | strided_const | strided_param | indirect | unknown, for the warp's fastest axes."""
    axes = _warp_axes(block)
    coefs = [f.t[a] for a in axes]
    if any(c is None for c in coefs):
        return "indirect" if f.indirect else "unknown"
    if all(c == ZERO for c in coefs):
        return "uniform"
    if any(is_sym(c) for c in coefs):
        return "strided_param"
    lead = coefs[0] if coefs[0] != ZERO else next(c for c in coefs if c != ZERO)
    return "unit" if abs(lead[0]) <= 1 else "strided_const"


def _warp_axes(block) -> list[int]:
    """The thread axes that vary inside one warp."""
    bx, by = max(1, block[0]), max(1, block[1])
    axes = [0]
    if bx < WARP:
        axes.append(1)
        if bx * by < WARP:
            axes.append(2)
    return axes


def sectors(f: Form, elem_size: int, block: tuple = (256, 1, 1)) -> tuple[float, float]:
    """(sectors one warp request touches, the fewest that could hold its distinct bytes); NaN if unknown."""
    if not f.affine:
        if f.indirect:  # a gather: assume every lane in its own sector
            return float(WARP * max(1, math.ceil(elem_size / SECTOR))), float(math.ceil(WARP * elem_size / SECTOR))
        return float("nan"), float("nan")
    bx, by, bz = (max(1, int(b)) for b in block)
    lanes = min(WARP, bx * by * bz)
    offsets = set()
    for lane in range(lanes):
        tid = (lane % bx, (lane // bx) % by, lane // (bx * by))
        off = Fraction(0)
        for axis, (a, b) in enumerate(f.t):
            off += math.floor(a * tid[axis]) + math.floor(b * tid[axis]) * _SYM_STRIDE[axis]
        offsets.add(math.floor(off))
    touched = set()
    for o in offsets:
        start = o * elem_size
        for byte in range(start, start + elem_size, SECTOR):
            touched.add(byte // SECTOR)
        touched.add((start + elem_size - 1) // SECTOR)
    ideal = math.ceil(len(offsets) * elem_size / SECTOR)
    return float(len(touched)), float(max(1, ideal))


def efficiency(f: Form, elem_size: int, block: tuple = (256, 1, 1)) -> float:
    """Useful fraction of the transferred sectors, in [0, 1] (NaN when the index is not understood)."""
    got, ideal = sectors(f, elem_size, block)
    if math.isnan(got):
        return float("nan")
    return min(1.0, ideal / got)
