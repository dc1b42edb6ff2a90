"""What the static analysis records: accesses, barriers, shared arrays, per-kernel summaries.

Plain dataclasses (see static.py for how they are filled) and the shared-memory bank model: 32 banks
of 4-byte words, one warp request is served in as many passes as the most-loaded bank has distinct
words (identical words are broadcast).
"""
from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

from kernels_harness.features.indexing import Form, is_sym

LOOP_WEIGHT = 8  # an access in a loop counts this many times per nesting level (up to 3)


@dataclasses.dataclass
class Access:
    kind: str                 # load | store | atomic
    space: str                # global | shared
    array: str
    line: int
    text: str
    index: Form               # linear index in elements (global) / of the last dimension (shared)
    elem_size: int
    loop_depth: int
    vector: bool = False
    readonly: bool = False
    fills_shared: bool = False   # a global load whose value is stored to shared memory
    indices: tuple = ()          # shared: one Form per dimension
    pattern: str = ""            # coalescing class (global) or "" (shared)
    sectors: float = float("nan")
    ideal_sectors: float = float("nan")
    bank_degree: float = float("nan")   # shared: max distinct words one bank serves for one warp request
    coop_loops: int = 0          # enclosing loops that spread work over threads (start at a thread index)

    @property
    def weight(self) -> float:
        return float(LOOP_WEIGHT ** min(self.loop_depth, 3))

    def to_dict(self) -> dict:
        d = {k: getattr(self, k) for k in ("kind", "space", "array", "line", "text", "elem_size", "loop_depth",
                                           "vector", "readonly", "pattern")}
        d["tx_stride"] = _coef_str(self.index.tx)
        for k in ("sectors", "ideal_sectors", "bank_degree"):
            v = getattr(self, k)
            d[k] = None if math.isnan(v) else v
        return d


def _coef_str(c) -> str | float | None:
    if c is None or is_sym(c):
        return None if c is None else "symbolic"
    return float(c[0])


@dataclasses.dataclass
class Barrier:
    line: int
    loop_depth: int
    divergent: bool
    redundant: bool = False
    reason: str = ""


@dataclasses.dataclass
class SharedArray:
    name: str
    dims: list                # ints, or None where unknown / dynamic
    elem_size: int
    dynamic: bool
    padded: bool

    @property
    def bytes(self) -> int | None:
        if self.dynamic or any(d is None for d in self.dims):
            return None
        return math.prod(self.dims) * self.elem_size


@dataclasses.dataclass
class KernelStatic:
    name: str
    line: int
    params: list
    launch_bounds: tuple = ()
    accesses: list = dataclasses.field(default_factory=list)
    barriers: list = dataclasses.field(default_factory=list)
    shared: list = dataclasses.field(default_factory=list)
    warp_primitives: list = dataclasses.field(default_factory=list)
    syncwarp: int = 0
    unroll_pragmas: int = 0
    loops: int = 0
    grid_stride: bool = False
    smem_tree_reduction: bool = False
    block: tuple = (256, 1, 1)       # block shape assumed for the warp's lanes
    block_known: bool = False

    def global_accesses(self, kinds=("load", "store")) -> list[Access]:
        return [a for a in self.accesses if a.space == "global" and a.kind in kinds]

    def shared_accesses(self) -> list[Access]:
        return [a for a in self.accesses if a.space == "shared"]


@dataclasses.dataclass
class StaticAnalysis:
    kernels: list                # [KernelStatic]
    launches: list               # [parse.StaticLaunch]
    note: str = ""               # why something could not be analysed
    macros: dict = dataclasses.field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.note and bool(self.kernels)


def bank_degree(arr: SharedArray, idxs: list, block) -> float:
    """The worst number of distinct 4-byte words one bank must serve for one warp (1 = conflict-free)."""
    if not idxs or any(not f.affine for f in idxs):
        return float("nan")
    dims = arr.dims if len(arr.dims) == len(idxs) else [None] * (len(idxs) - 1) + [None]
    strides = []
    acc = Fraction(1)
    for d in reversed(dims[1:] if len(dims) > 1 else []):
        strides.insert(0, acc * d if d is not None else None)
        acc = acc * d if d is not None else acc
    strides = [None if s is None else s for s in strides] + [Fraction(1)]
    if any(s is None for s in strides[:-1]) and len(idxs) > 1:
        return float("nan")
    coefs = []
    for axis in range(3):
        c = Fraction(0)
        for f, s in zip(idxs, strides):
            fc = f.t[axis]
            if is_sym(fc):
                return float("nan")
            c += fc[0] * s
        coefs.append(c)
    bx, by, bz = (max(1, int(b)) for b in block)
    words_per_elem = max(1, arr.elem_size // 4)
    banks: dict[int, set] = {}
    for lane in range(min(32, bx * by * bz)):
        tid = (lane % bx, (lane // bx) % by, lane // (bx * by))
        off = math.floor(sum(c * t for c, t in zip(coefs, tid)))
        for w in range(words_per_elem):
            word = off * words_per_elem + w
            banks.setdefault(word % 32, set()).add(word)
    worst = max(len(v) for v in banks.values())
    return float(worst) / words_per_elem if arr.elem_size > 4 else float(worst)
