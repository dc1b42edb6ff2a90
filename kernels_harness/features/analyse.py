"""`analyse(task, source, result=None) -> Features`: measured structure of one candidate, and its score.

Resources come from the EvalResult (what the harness's build recorded) or from ptxas for sm_90
(kernels_harness.build.nvcc.resource_usage, no GPU needed); launches from the EvalResult (recorded at
launch) or, failing that, from the constant `<<<grid, block, smem>>>` of the host code. Static
features need tree-sitter CUDA; without it (or without nvcc) the missing parts are None and a note
says why, and the score re-weights over what is present (see score.py).
"""
from __future__ import annotations

import dataclasses
import math
import re

from kernels_harness.features import feedback as feedback_lib
from kernels_harness.features import occupancy, roofline, score, static
from kernels_harness.features.parse import sizeof_eval

FEATURES_VERSION = 1
MAX_ACCESSES = 200  # accesses listed in Features.accesses (all of them count in the summaries)


@dataclasses.dataclass
class Features:
    score: float                        # in [0, 1]
    components: dict                    # coalescing/occupancy/sync/memory/roofline -> [0, 1] or None
    weights: dict                       # the weights used (renormalised over present components)
    bound: str                          # memory | compute (from the task's arithmetic intensity)
    feedback: list                      # one sentence per weak feature
    coalescing: dict = dataclasses.field(default_factory=dict)
    occupancy: list = dataclasses.field(default_factory=list)    # one dict per launch shape
    resources: dict = dataclasses.field(default_factory=dict)    # kernel -> ptxas resources
    sync: dict = dataclasses.field(default_factory=dict)
    memory: dict = dataclasses.field(default_factory=dict)
    roofline: dict = dataclasses.field(default_factory=dict)
    accesses: list = dataclasses.field(default_factory=list)     # every global/shared access
    kernels: list = dataclasses.field(default_factory=list)
    notes: list = dataclasses.field(default_factory=list)
    version: int = FEATURES_VERSION

    def to_dict(self) -> dict:
        return _jsonable(dataclasses.asdict(self))


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, float) and math.isnan(x):
        return None
    if isinstance(x, (str, int, float, bool)) or x is None:
        return x
    return str(x)


def _resources(source: str, result, notes: list, compile: bool) -> dict:
    res = dict(getattr(result, "resources", None) or {})
    if res:
        return {k: {**v, "smem_static": v.get("smem_static", v.get("smem", 0))} for k, v in res.items()}
    if not compile:
        notes.append("no ptxas resources (compile=False and the result carries none)")
        return {}
    try:
        from kernels_harness.build import nvcc
        return nvcc.resource_usage(source)
    except Exception as e:  # noqa: BLE001 - no compiler, or the source does not compile: report, go on
        notes.append(f"no ptxas resources ({type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''})")
        return {}


def _max_dynamic(source: str, macros: dict) -> dict:
    """kernel -> the MaxDynamicSharedMemorySize it sets with cudaFuncSetAttribute (None if not constant)."""
    out = {}
    for m in re.finditer(r"cudaFuncSetAttribute\s*\(\s*&?\s*([\w:]+)[^,]*,\s*cudaFuncAttributeMaxDynamicSharedMemorySize"
                         r"\s*,\s*([^;]+?)\)\s*;", source):
        v = sizeof_eval(m.group(2), macros)
        out[m.group(1).split("::")[-1]] = int(v) if v is not None else None
    return out


def _launch_shapes(result, sa: static.StaticAnalysis) -> tuple[list, str]:
    """Distinct (kernel, block, dynamic smem) launch shapes with their largest grid (blocks).

    Recorded launches win (the harness records those of every config that ran); on the cpu backend
    they come from the small configs only, so their grids are replaced by the host code's launch
    evaluated at the task's largest config (when it can be). Kernels launched in the host code but on
    no recorded config are added from their static launch sites.
    """
    static_recs = [{"kernel": la.kernel, "grid": la.grid, "block": la.block, "smem": la.smem or 0}
                   for la in sa.launches if la.block]
    recs = list(getattr(result, "launches", None) or [])
    src = "recorded" if recs else "static"
    if recs and getattr(result, "backend", "cuda") != "cuda":
        recs = [{**r, "grid": None} for r in recs]
    recorded = {r.get("kernel") for r in recs}
    # kernels the host code launches that no checked config launched (a tail kernel for sizes the run
    # skipped) still get an occupancy row, from their static launch
    recs = recs + [r for r in static_recs if r["kernel"] not in recorded] if recs else static_recs
    static_grid: dict = {}
    for r in static_recs:
        if r["grid"]:
            static_grid[r["kernel"]] = max(static_grid.get(r["kernel"], 0), math.prod(r["grid"][:3]))
    shapes: dict = {}
    for r in recs:
        block = list(r.get("block") or [0, 1, 1]) + [1, 1]
        key = (r["kernel"], tuple(block[:3]), int(r.get("smem") or 0))
        grid = r.get("grid")
        blocks = math.prod(list(grid)[:3]) if grid else static_grid.get(r["kernel"])
        prev = shapes.get(key)
        shapes[key] = blocks if prev is None else (max(prev, blocks) if blocks is not None else prev)
    return [{"kernel": k, "block": list(b), "smem": s, "grid_blocks": g} for (k, b, s), g in shapes.items()], src


def _largest_config_args(task) -> list:
    """Scalar argument values of the task's largest config, by position (None for arrays)."""
    if not task.configs:
        return []
    from kernels_harness.tasks.schema import config_env
    cfg = config_env(max(task.configs, key=lambda c: task.config_bytes(config_env(c))))
    out = []
    for a in task.signature:
        try:
            out.append(None if a.is_array else task.scalar(a, cfg))
        except Exception:  # noqa: BLE001 - an unevaluable scalar is just unknown
            out.append(None)
    return out


def analyse(task, source: str, result=None, measured: dict | None = None, peaks: dict | None = None,
            compile: bool = True) -> Features:
    """The structural features and score of `source` (a candidate for `task`).

    task: kernels_harness.tasks.schema.Task; source: the .cu text; result: an optional EvalResult
    (its launches, resources and per-config time_ms are used when present); measured: optional Nsight
    Compute numbers per kernel ({kernel: {sectors_per_request_ld, sectors_per_request_st,
    achieved_occupancy}}) that replace the static estimates; peaks: device peaks (roofline.load_peaks());
    compile: whether to run ptxas (about 1-2 s, cached per source) when `result` has no resources.
    Never raises for a bad source: what cannot be measured is None, with a note.
    """
    notes: list[str] = []
    try:
        sa = static.analyse_source(source, entry=task.entry, args=_largest_config_args(task))
    except (RecursionError, ValueError, AttributeError, TypeError, KeyError, IndexError) as e:
        sa = static.StaticAnalysis([], [], note=f"static analysis failed ({type(e).__name__}: {str(e)[:120]}); "
                                                "the score uses the measured features only")
    if sa.note:
        notes.append(sa.note)
    times = None
    if result is not None and getattr(result, "configs", None):
        times = [None] * len(task.configs)
        for c in result.configs:
            idx = c.index if hasattr(c, "index") else c.get("index")
            t = c.time_ms if hasattr(c, "time_ms") else c.get("time_ms")
            if idx is not None and idx < len(times):
                times[idx] = t
    roof = roofline.analyse(task, times, peaks)
    bound = roof["bound"]
    resources = _resources(source, result, notes, compile)
    maxdyn = _max_dynamic(source, sa.macros)
    shapes, launch_src = _launch_shapes(result, sa)
    occ_rows = []
    for sh in shapes:
        r = resources.get(sh["kernel"])
        threads = math.prod(sh["block"])
        row = {"kernel": sh["kernel"], "block": sh["block"], "threads": threads, "smem_dynamic": sh["smem"],
               "grid_blocks": sh["grid_blocks"], "source": launch_src, "occupancy": None}
        if r is not None and threads > 0:
            md = maxdyn.get(sh["kernel"], "absent")
            if md is None:  # set, but not to a constant: assume the opt-in maximum
                md = occupancy.SMEM_PER_BLOCK_OPTIN - int(r.get("smem_static", 0))
            o = occupancy.theoretical(int(r.get("registers", 0)), int(r.get("smem_static", 0)), threads,
                                      dynamic_smem=sh["smem"], max_dynamic_smem=None if md == "absent" else md)
            row.update(o.to_dict())
            row["sms"] = occupancy.NUM_SMS
            if sh["grid_blocks"] and o.blocks_per_sm:
                row["sm_fill"] = min(1.0, sh["grid_blocks"] / (occupancy.NUM_SMS * o.blocks_per_sm))
                row["blocks"] = sh["grid_blocks"]
            m = (measured or {}).get(sh["kernel"]) or {}
            if m.get("achieved_occupancy") is not None:
                row["achieved_occupancy"] = m["achieved_occupancy"]
        occ_rows.append(row)
    if not shapes and sa.kernels:
        notes.append("no launch configuration known (none recorded and none constant in the host code)")
    coal = score.coalescing_summary(sa.kernels, measured)
    sync = score.sync_summary(sa.kernels)
    mem = score.memory_summary(sa.kernels, bound)
    occ_score, occ_worst = score.occupancy_score(occ_rows, resources, bound)
    have_static = bool(sa.kernels)
    components = {"coalescing": coal["score"], "occupancy": occ_score,
                  "sync": sync["score"] if have_static else None,
                  "memory": mem["score"] if have_static else None, "roofline": roof.get("fraction")}
    total, weights = score.combine(components, bound)
    fb = feedback_lib.sentences(components, coal, occ_worst, resources, sync, mem, roof, bound)
    return Features(score=total, components=components, weights=weights, bound=bound, feedback=fb,
                    coalescing=coal, occupancy=occ_rows, resources=resources, sync=sync, memory=mem,
                    roofline=roof, accesses=[a.to_dict() for k in sa.kernels for a in k.accesses][:MAX_ACCESSES],
                    kernels=[k.name for k in sa.kernels], notes=notes)
