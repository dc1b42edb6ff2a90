"""The structural score: normalised features, weighted by whether the task is memory- or compute-bound.

Each component is a number in [0, 1] (or None when it cannot be measured for this candidate):

  coalescing   sector efficiency of global loads/stores (ideal sectors / sectors moved per warp
               request), averaged with weight 8**loop_depth; Nsight Compute's measured sectors per
               request replace the estimate when given.
  occupancy    theoretical occupancy / target (0.5 for memory-bound, 0.25 for compute-bound: beyond
               that more warps rarely help), times the share of SMs the grid fills (when the grid is
               known), halved when ptxas spills registers.
  sync         1, minus: a barrier in a thread-divergent branch (-> 0, a correctness hazard), 0.2 per
               redundant barrier, 0.4 for global atomics in a loop (0.8 when every thread hits the same
               address), 0.15 for a shared-memory tree
               reduction with no warp-level primitive.
  memory       compute-bound: 0.5 shared-memory reuse + 0.2 conflict-free banks + 0.15 unrolling + 0.1
               vector + 0.05 read-only loads; memory-bound: 0.5 base + 0.2 vector + 0.1 read-only
               + 0.2 conflict-free banks (full marks when no shared memory is used).
  roofline     the fraction of the roofline bound the largest timed config reaches (cuda backend only).

Weights (renormalised over the components present):
  memory-bound:  coalescing 0.40, occupancy 0.15, sync 0.15, memory 0.10, roofline 0.20
  compute-bound: coalescing 0.20, occupancy 0.15, sync 0.15, memory 0.30, roofline 0.20
A component below WEAK yields one sentence of feedback naming the kernel, line and the fix.
"""
from __future__ import annotations

import math

from kernels_harness.features.indexing import ZERO

WEIGHTS = {
    "memory": {"coalescing": 0.40, "occupancy": 0.15, "sync": 0.15, "memory": 0.10, "roofline": 0.20},
    "compute": {"coalescing": 0.20, "occupancy": 0.15, "sync": 0.15, "memory": 0.30, "roofline": 0.20},
}
OCC_TARGET = {"memory": 0.5, "compute": 0.25}
WEAK = 0.7


def _wmean(pairs) -> float | None:
    pairs = [(v, w) for v, w in pairs if v is not None and not math.isnan(v)]
    total = sum(w for _, w in pairs)
    return sum(v * w for v, w in pairs) / total if total else None


def coalescing_summary(kernels, measured: dict | None = None) -> dict:
    """Per-kernel and overall sector efficiency of global loads and stores."""
    per_kernel, pairs, worst = {}, [], None
    for k in kernels:
        accs = k.global_accesses()
        kp = []
        for a in accs:
            eff = min(1.0, a.ideal_sectors / a.sectors) if not math.isnan(a.sectors) and a.sectors else float("nan")
            kp.append((eff, a.weight))
            if not math.isnan(eff) and (worst is None or (eff, -a.weight) < (worst[0], -worst[1].weight)):
                worst = (eff, a, k.name)
        est = _wmean(kp)
        m = (measured or {}).get(k.name) or {}
        meas = None
        spr = [m.get(x) for x in ("sectors_per_request_ld", "sectors_per_request_st")]
        if any(v for v in spr) and accs:
            ideal = {kind: _wmean([(a.ideal_sectors, a.weight) for a in accs if a.kind == kind]) for kind in ("load", "store")}
            effs = [min(1.0, i / s) for i, s in zip((ideal["load"], ideal["store"]), spr) if i and s]
            meas = sum(effs) / len(effs) if effs else None
        per_kernel[k.name] = {"estimated": est, "measured": meas,
                              "patterns": _count(a.pattern for a in accs)}
        val = meas if meas is not None else est
        if val is not None:
            pairs.append((val, sum(a.weight for a in accs) or 1.0))
    return {"score": _wmean(pairs), "kernels": per_kernel,
            "worst": None if worst is None else {"kernel": worst[2], "line": worst[1].line, "text": worst[1].text,
                                                 "kind": worst[1].kind, "pattern": worst[1].pattern,
                                                 "efficiency": worst[0], "array": worst[1].array}}


def _count(items) -> dict:
    out: dict = {}
    for i in items:
        out[i] = out.get(i, 0) + 1
    return out


def sync_summary(kernels) -> dict:
    div = [(k.name, b.line, b.reason) for k in kernels for b in k.barriers if b.divergent]
    red = [(k.name, b.line) for k in kernels for b in k.barriers if b.redundant]
    in_loops = sum(1 for k in kernels for b in k.barriers if b.loop_depth > 0)
    atomics = [(k.name, a.line, a.array, a.index.uniform) for k in kernels for a in k.accesses
               if a.kind == "atomic" and a.space == "global" and a.loop_depth > 0]
    trees = [k.name for k in kernels if k.smem_tree_reduction and not k.warp_primitives]
    same_addr = [x for x in atomics if x[3]]
    atomic_pen = 0.8 if same_addr else (0.4 if atomics else 0.0)
    score = 0.0 if div else max(0.0, 1.0 - 0.2 * len(red) - atomic_pen - (0.15 if trees else 0.0))
    return {"score": score, "barriers": sum(len(k.barriers) for k in kernels), "barriers_in_loops": in_loops,
            "divergent_barriers": [list(x) for x in div], "redundant_barriers": [list(x) for x in red],
            "global_atomics_in_loops": [list(x) for x in atomics],
            "global_atomics": sum(1 for k in kernels for a in k.accesses if a.kind == "atomic" and a.space == "global"),
            "warp_primitives": sorted({p for k in kernels for p in k.warp_primitives}),
            "smem_tree_reduction": [k.name for k in kernels if k.smem_tree_reduction], "tree_without_shuffle": trees}


def memory_summary(kernels, bound: str) -> dict:
    g = [a for k in kernels for a in k.global_accesses()]
    loads = [a for a in g if a.kind == "load"]
    sh = [a for k in kernels for a in k.shared_accesses()]
    reuse = []
    for k in kernels:
        reads = [a for a in k.shared_accesses() if a.kind == "load"]
        writes = [a for a in k.shared_accesses() if a.kind == "store"]
        st = sum(a.weight for a in writes)
        filled = any(a.fills_shared for a in k.global_accesses(("load",)))
        ratio = sum(a.weight for a in reads) / st if st else 0.0
        reuse.append((k.name, filled, ratio, filled and not k.smem_tree_reduction and _reused(reads, writes)))
    bank = _wmean([(1.0 / a.bank_degree if not math.isnan(a.bank_degree) and a.bank_degree else None, a.weight) for a in sh])
    worst_bank = max((a for a in sh if not math.isnan(a.bank_degree)), key=lambda a: a.bank_degree, default=None)
    vec = _wmean([(1.0 if a.vector else 0.0, a.weight) for a in g])
    ro = _wmean([(1.0 if a.readonly else 0.0, a.weight) for a in loads])
    unroll = any(k.unroll_pragmas for k in kernels)
    tiled = any(r[3] for r in reuse)
    bank_ok = 1.0 if bank is None else bank
    if bound == "compute":
        score = 0.5 * tiled + 0.2 * bank_ok + 0.15 * unroll + 0.1 * (vec or 0.0) + 0.05 * (ro or 0.0)
    else:
        score = 0.5 + 0.2 * (vec or 0.0) + 0.1 * (ro or 0.0) + 0.2 * bank_ok
    return {"score": score, "shared_arrays": [{"name": s.name, "dims": s.dims, "bytes": s.bytes, "dynamic": s.dynamic,
                                               "padded": s.padded} for k in kernels for s in k.shared],
            "smem_tiled_reuse": tiled, "smem_reuse": {r[0]: {"filled_from_global": r[1], "reads_per_write": r[2]} for r in reuse},
            "padded": any(s.padded for k in kernels for s in k.shared), "bank_conflict_free": bank,
            "worst_bank_conflict": None if worst_bank is None else {"line": worst_bank.line, "text": worst_bank.text,
                                                                    "degree": worst_bank.bank_degree, "array": worst_bank.array},
            "vector_fraction": vec, "readonly_fraction": ro, "unroll_pragmas": sum(k.unroll_pragmas for k in kernels),
            "grid_stride": any(k.grid_stride for k in kernels), "launch_bounds": any(k.launch_bounds for k in kernels)}


def _reused(reads: list, writes: list) -> bool:
    """Shared data is reused when it is read in a deeper compute loop than it was written (tiling), read
    at twice as many places as written (stencil halos), or broadcast to the warp inside a loop."""
    if not reads or not writes:
        return False

    def compute_depth(a):
        return a.loop_depth - a.coop_loops
    deeper = max(map(compute_depth, reads)) > max(map(compute_depth, writes))
    sites = len({a.text for a in reads}) >= 2 * len({a.text for a in writes})
    broadcast = any(compute_depth(a) > 0 and all(f.affine and f.t[0] == ZERO for f in a.indices) for a in reads)
    return deeper or sites or broadcast


def occupancy_score(launches: list, resources: dict, bound: str) -> tuple[float | None, dict]:
    """launches: [{kernel, threads, occupancy, sm_fill or None, ...}] -> (score, worst launch)."""
    vals, worst = [], None
    for la in launches:
        if la.get("occupancy") is None:
            continue
        v = min(1.0, la["occupancy"] / OCC_TARGET[bound])
        if la.get("sm_fill") is not None:
            v *= la["sm_fill"]
        r = resources.get(la["kernel"], {})
        if r.get("spill_stores") or r.get("spill_loads"):
            v *= 0.5
        vals.append(v)
        if worst is None or v < worst[0]:
            worst = (v, la)
    return (sum(vals) / len(vals) if vals else None), (worst[1] if worst else {})


def combine(components: dict, bound: str) -> tuple[float, dict]:
    """Score in [0, 1] from components (None = absent) and the weights actually used."""
    w = {k: v for k, v in WEIGHTS[bound].items() if components.get(k) is not None}
    total = sum(w.values())
    if not total:
        return 0.0, {}
    w = {k: v / total for k, v in w.items()}
    return float(min(1.0, max(0.0, sum(w[k] * components[k] for k in w)))), w
