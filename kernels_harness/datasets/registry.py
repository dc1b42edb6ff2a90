"""All task families, split assignment and the deterministic generator.

    from kernels_harness.datasets import registry
    registry.counts(seed=0)            # {"c2cuda": {"total": ..., "families": {...}}, ...} without building
    for task in registry.generate(seed=0, families=["stencil"]): ...

Splits: whole families are held out for `test` (HELD_OUT); of the rest, a stable hash of the task id
puts VAL_PERCENT percent into `val` and the others into `train`.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
from collections.abc import Iterable, Iterator

from kernels_harness.datasets import base as B
from kernels_harness.datasets.c2cuda import (
    conv,
    elementwise,
    gather,
    histogram,
    image,
    linalg,
    nbody,
    polybench,
    reductions,
    scans,
    sorting,
    spmv,
    stencils,
    transpose,
)
from kernels_harness.datasets.torch2cuda import families as T
from kernels_harness.tasks.errors import TaskError
from kernels_harness.tasks.schema import Task

FAMILIES: tuple[B.Family, ...] = (
    B.Family("elementwise", "c2cuda", "maps and their compositions", elementwise.variants, elementwise.build),
    B.Family("reduction", "c2cuda", "sum/max/min/argmax/norms along an axis", reductions.variants, reductions.build),
    B.Family("scan", "c2cuda", "inclusive/exclusive prefix sums, maxima, minima", scans.variants, scans.build),
    B.Family("histogram", "c2cuda", "counts and weighted histograms", histogram.variants, histogram.build),
    B.Family("gather_scatter", "c2cuda", "gather, scatter, index_add, masked copy", gather.variants, gather.build),
    B.Family("stencil", "c2cuda", "1-D/2-D/3-D Jacobi, heat, Laplacian", stencils.variants, stencils.build),
    B.Family("conv", "c2cuda", "1-D/2-D/depthwise/multi-channel convolutions", conv.variants, conv.build),
    B.Family("matvec", "c2cuda", "dense matrix-vector products", linalg.matvec_variants, linalg.matvec_build),
    B.Family("matmul", "c2cuda", "dense matrix-matrix products", linalg.matmul_variants, linalg.matmul_build),
    B.Family("polybench", "c2cuda", "PolyBench linear-algebra kernels", polybench.variants, polybench.build),
    B.Family("transpose", "c2cuda", "transposes and layout changes", transpose.variants, transpose.build),
    B.Family("spmv", "c2cuda", "sparse matrix-vector products (CSR, ELL)", spmv.variants, spmv.build),
    B.Family("sort_topk", "c2cuda", "row sorts and top-k", sorting.variants, sorting.build),
    B.Family("nbody", "c2cuda", "n-body and other all-pairs interactions", nbody.variants, nbody.build),
    B.Family("image", "c2cuda", "blur, Sobel, resize, grayscale", image.variants, image.build),
    B.Family("elementwise_chain", "torch2cuda", "fused element-wise op chains", T.elementwise_variants,
             T.elementwise_build),
    B.Family("reduction_chain", "torch2cuda", "op chain then a last-axis reduction", T.row_variants("reduction"),
             T.row_build),
    B.Family("softmax", "torch2cuda", "softmax / log_softmax between op chains", T.row_variants("softmax"),
             T.row_build),
    B.Family("normalization", "torch2cuda", "LayerNorm / RMSNorm then ops", T.row_variants("norm"), T.row_build),
    B.Family("linear_epilogue", "torch2cuda", "nn.Linear with an epilogue", T.linear_variants, T.linear_build),
    B.Family("conv_epilogue", "torch2cuda", "nn.Conv2d with an epilogue", T.conv_variants, T.conv_build),
)
BY_NAME = {f.name: f for f in FAMILIES}
HELD_OUT = {"c2cuda": ("scan", "nbody"), "torch2cuda": ("normalization",)}
VAL_PERCENT = 6
DEFAULT_SEED = 0


def split_of(task_id: str, family: str, track: str) -> str:
    if family in HELD_OUT.get(track, ()):
        return "test"
    h = int(hashlib.sha1(task_id.encode()).hexdigest()[:8], 16) % 100
    return "val" if h < VAL_PERCENT else "train"


def select(families: Iterable[str] | None = None, tracks: Iterable[str] | None = None) -> list[B.Family]:
    """Families by name and/or track; unknown names raise TaskError listing the known ones."""
    fams = list(FAMILIES)
    if families:
        names = list(families)
        bad = [n for n in names if n not in BY_NAME]
        if bad:
            raise TaskError(f"unknown families {bad}; choose from {', '.join(BY_NAME)}")
        fams = [BY_NAME[n] for n in names]
    if tracks:
        fams = [f for f in fams if f.track in set(tracks)]
    return fams


@functools.lru_cache(maxsize=64)
def variants(family: str, seed: int = DEFAULT_SEED) -> tuple:
    """The parameter dicts of a family (cached: cheap, no code generation)."""
    fam = BY_NAME[family]
    return tuple(fam.variants(B.family_rng(seed, family)))


def build(family: str, params: dict) -> Task:
    """One program of the family as a Task with its split."""
    fam = BY_NAME[family]
    task = fam.build(params)
    return dataclasses.replace(task, split=split_of(task.id, fam.name, fam.track))


def generate(seed: int = DEFAULT_SEED, families: Iterable[str] | None = None,
             tracks: Iterable[str] | None = None, limit_per_family: int | None = None) -> Iterator[Task]:
    """Every program of the selected families, in a fixed order."""
    for fam in select(families, tracks):
        vs = variants(fam.name, seed)
        for params in vs[:limit_per_family] if limit_per_family else vs:
            yield build(fam.name, params)


def counts(seed: int = DEFAULT_SEED) -> dict:
    """Programs per track and family, and held-out families, without generating code."""
    out: dict = {}
    for fam in FAMILIES:
        t = out.setdefault(fam.track, {"total": 0, "families": {}, "held_out_for_test": list(HELD_OUT[fam.track])})
        n = len(variants(fam.name, seed))
        t["families"][fam.name] = n
        t["total"] += n
    return out
