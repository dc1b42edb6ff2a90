"""The ranker's structural feature vector of one candidate: `vector(task, source, features) -> float32[F]`.

`features` is the dict of `kernels_harness.features.analyse(...).to_dict()`, i.e. what
`EvalResult.features` holds; it may be empty (a candidate that did not compile), and then only the
task and source-text columns are filled (every `has_*` flag is 0). Nothing time-derived is used: the
roofline fraction (a measured time) and the score's roofline term are left out, so the same vector
can be computed before a candidate runs, and training pairs do not see their own label.

Columns (FEATURE_NAMES, F = len(FEATURE_NAMES)):
  task:    torch2cuda track, compute-bound, log10 FLOPs / bytes of the largest config, log10 intensity
  text:    log2 characters, counts of __global__, launches, for loops, #pragma unroll, vector types,
           __shfl*, __syncthreads, __ldg / __restrict__, atomics, shared declarations
  score:   the structural score over the static and occupancy components, each component and a flag
  static:  access patterns (fractions of unit / uniform / strided / indirect / unknown global accesses),
           loads / stores / atomics, loop depths, barriers, atomics in loops, warp primitives,
           shared-memory tiling, padding, bank conflicts, vector and read-only fractions, grid stride
  ptxas:   registers, spills, static shared memory, stack frame (flag: resources known)
  launch:  theoretical occupancy (min / mean), SM fill, log2 threads per block, log2 blocks
"""
from __future__ import annotations

import math
import re

import numpy as np

from kernels_harness.features import roofline, score

FEATURE_VERSION = 1
COMPONENTS = ("coalescing", "occupancy", "sync", "memory")
PATTERNS = ("unit", "uniform", "strided_const", "strided_param", "indirect", "unknown")
_TEXT = {
    "n_global": r"__global__", "n_launch": r"<<<", "n_for": r"\bfor\s*\(", "n_unroll": r"#\s*pragma\s+unroll",
    "n_vector": r"\b(?:float|double|int|uint)[234]\b", "n_shfl": r"__shfl\w*", "n_sync": r"__syncthreads\s*\(",
    "n_ldg": r"__ldg\b|__restrict__", "n_atomic": r"\batomic\w+\s*\(", "n_shared": r"__shared__",
}
_TEXT_RE = {k: re.compile(v) for k, v in _TEXT.items()}

FEATURE_NAMES: tuple[str, ...] = (
    "task_torch", "task_compute_bound", "task_log_flops", "task_log_bytes", "task_log_intensity",
    "text_log_chars", *[f"text_{k}" for k in _TEXT],
    "has_features", "score_static",
    *[f"comp_{c}" for c in COMPONENTS], *[f"has_{c}" for c in COMPONENTS],
    *[f"pat_{p}" for p in PATTERNS],
    "acc_log_loads", "acc_log_stores", "acc_log_atomics", "acc_log_shared", "acc_max_loop_depth",
    "acc_mean_loop_depth", "n_kernels",
    "sync_log_barriers", "sync_barriers_in_loops", "sync_divergent", "sync_redundant", "sync_log_atomics",
    "sync_atomics_in_loops", "sync_warp_primitives", "sync_smem_tree", "sync_tree_no_shuffle",
    "mem_shared_arrays", "mem_log_shared_bytes", "mem_tiled_reuse", "mem_padded", "mem_bank_free",
    "mem_has_bank", "mem_vector_fraction", "mem_readonly_fraction", "mem_unroll_pragmas", "mem_grid_stride",
    "mem_launch_bounds",
    "has_resources", "res_max_registers", "res_mean_registers", "res_spills", "res_log_smem", "res_log_stack",
    "has_launch_occupancy", "occ_min", "occ_mean", "occ_sm_fill", "launch_log_threads_max", "launch_log_threads_min",
    "launch_log_blocks",
)
NUM_FEATURES = len(FEATURE_NAMES)
_COL = {n: i for i, n in enumerate(FEATURE_NAMES)}


def _num(x, default: float = 0.0) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return default
    return default if math.isnan(v) or math.isinf(v) else v


def _log2p(x) -> float:
    return math.log2(1.0 + max(0.0, _num(x)))


def task_columns(task) -> dict[str, float]:
    """Task-level columns (the same for every candidate of a task)."""
    try:
        roof = roofline.analyse(task, None, roofline.H200_DATASHEET)
    except Exception:  # noqa: BLE001 - an unevaluable task expression leaves the task columns at 0
        roof = {"configs": [], "bound": "memory", "intensity": None}
    cfgs = roof.get("configs") or [{}]
    last = max(cfgs, key=lambda c: _num(c.get("bytes")))
    return {"task_torch": float(getattr(task, "track", "") == "torch2cuda"),
            "task_compute_bound": float(roof.get("bound") == "compute"),
            "task_log_flops": math.log10(1.0 + _num(last.get("flops"))),
            "task_log_bytes": math.log10(1.0 + _num(last.get("bytes"))),
            "task_log_intensity": math.log10(1e-3 + _num(roof.get("intensity")))}


def static_score(features: dict) -> float | None:
    """The structural score without its roofline term (None when the candidate has no features)."""
    comps = {k: v for k, v in (features.get("components") or {}).items() if k != "roofline"}
    if not any(v is not None for v in comps.values()):
        return None
    total, _ = score.combine(comps, features.get("bound") or "memory")
    return total


def vector(task, source: str, features: dict | None, task_cols: dict | None = None) -> np.ndarray:
    """float32[F] (F = NUM_FEATURES) for one candidate; `features` may be None or {}."""
    v = np.zeros(NUM_FEATURES, np.float32)
    f = features or {}
    cols = dict(task_cols if task_cols is not None else task_columns(task))
    src = source or ""
    cols["text_log_chars"] = math.log2(1.0 + len(src))
    for k, rx in _TEXT_RE.items():
        cols[f"text_{k}"] = _log2p(len(rx.findall(src)))
    if f.get("components") is not None:
        cols["has_features"] = 1.0
        s = static_score(f)
        cols["score_static"] = 0.0 if s is None else s
        for c in COMPONENTS:
            val = f["components"].get(c)
            cols[f"comp_{c}"] = _num(val)
            cols[f"has_{c}"] = float(val is not None)
        cols.update(_static_columns(f))
        cols.update(_resource_columns(f.get("resources") or {}))
        cols.update(_launch_columns(f.get("occupancy") or []))
    for k, x in cols.items():
        v[_COL[k]] = x
    return v


def _static_columns(f: dict) -> dict[str, float]:
    out: dict[str, float] = {}
    pats: dict[str, float] = {}
    for k in ((f.get("coalescing") or {}).get("kernels") or {}).values():
        for p, n in (k.get("patterns") or {}).items():
            pats[p] = pats.get(p, 0.0) + _num(n)
    tot = sum(pats.values())
    for p in PATTERNS:
        out[f"pat_{p}"] = pats.get(p, 0.0) / tot if tot else 0.0
    acc = f.get("accesses") or []
    glob = [a for a in acc if a.get("space") == "global"]
    depths = [_num(a.get("loop_depth")) for a in acc]
    out.update(acc_log_loads=_log2p(sum(a.get("kind") == "load" for a in glob)),
               acc_log_stores=_log2p(sum(a.get("kind") == "store" for a in glob)),
               acc_log_atomics=_log2p(sum(a.get("kind") == "atomic" for a in glob)),
               acc_log_shared=_log2p(sum(a.get("space") == "shared" for a in acc)),
               acc_max_loop_depth=max(depths, default=0.0), acc_mean_loop_depth=float(np.mean(depths)) if depths else 0.0,
               n_kernels=_log2p(len(f.get("kernels") or [])))
    s = f.get("sync") or {}
    out.update(sync_log_barriers=_log2p(s.get("barriers")), sync_barriers_in_loops=_log2p(s.get("barriers_in_loops")),
               sync_divergent=_log2p(len(s.get("divergent_barriers") or [])),
               sync_redundant=_log2p(len(s.get("redundant_barriers") or [])),
               sync_log_atomics=_log2p(s.get("global_atomics")),
               sync_atomics_in_loops=_log2p(len(s.get("global_atomics_in_loops") or [])),
               sync_warp_primitives=_log2p(len(s.get("warp_primitives") or [])),
               sync_smem_tree=_log2p(len(s.get("smem_tree_reduction") or [])),
               sync_tree_no_shuffle=_log2p(len(s.get("tree_without_shuffle") or [])))
    m = f.get("memory") or {}
    arrays = m.get("shared_arrays") or []
    bank = m.get("bank_conflict_free")
    out.update(mem_shared_arrays=_log2p(len(arrays)),
               mem_log_shared_bytes=_log2p(sum(_num(a.get("bytes")) for a in arrays)),
               mem_tiled_reuse=float(bool(m.get("smem_tiled_reuse"))), mem_padded=float(bool(m.get("padded"))),
               mem_bank_free=_num(bank, 1.0), mem_has_bank=float(bank is not None),
               mem_vector_fraction=_num(m.get("vector_fraction")), mem_readonly_fraction=_num(m.get("readonly_fraction")),
               mem_unroll_pragmas=_log2p(m.get("unroll_pragmas")), mem_grid_stride=float(bool(m.get("grid_stride"))),
               mem_launch_bounds=float(bool(m.get("launch_bounds"))))
    return out


def _resource_columns(res: dict) -> dict[str, float]:
    if not res:
        return {}
    regs = [_num(r.get("registers")) for r in res.values()]
    return {"has_resources": 1.0, "res_max_registers": max(regs) / 255.0, "res_mean_registers": float(np.mean(regs)) / 255.0,
            "res_spills": float(any(_num(r.get("spill_stores")) or _num(r.get("spill_loads")) for r in res.values())),
            "res_log_smem": _log2p(max(_num(r.get("smem_static")) for r in res.values())),
            "res_log_stack": _log2p(max(_num(r.get("stack_frame")) for r in res.values()))}


def _launch_columns(rows: list) -> dict[str, float]:
    out: dict[str, float] = {}
    threads = [_num(r.get("threads")) for r in rows if _num(r.get("threads")) > 0]
    if threads:
        out["launch_log_threads_max"] = math.log2(max(threads))
        out["launch_log_threads_min"] = math.log2(min(threads))
    blocks = [_num(r.get("grid_blocks")) for r in rows if r.get("grid_blocks")]
    if blocks:
        out["launch_log_blocks"] = _log2p(max(blocks)) / 10.0
    occ = [_num(r.get("occupancy")) for r in rows if r.get("occupancy") is not None]
    if occ:
        fills = [_num(r.get("sm_fill"), 1.0) for r in rows if r.get("occupancy") is not None]
        out.update(has_launch_occupancy=1.0, occ_min=min(occ), occ_mean=float(np.mean(occ)), occ_sm_fill=min(fills))
    return out
