"""One sentence per weak structural feature, naming the kernel, the line and what to change."""
from __future__ import annotations

from kernels_harness.features.score import WEAK

_PATTERN_WORDS = {"strided_param": "strided by a runtime value", "strided_const": "strided by a constant",
                  "indirect": "a data-dependent gather", "unknown": "not affine in the thread index",
                  "uniform": "the same address for every thread", "unit": "unit-stride"}
_LIMIT_ADVICE = {
    "registers": "cut live registers per thread (smaller per-thread tiles, __launch_bounds__)",
    "shared_memory": "use less shared memory per block (smaller tiles or fewer buffers)",
    "blocks": "use more threads per block (at least 64) so the 32-block limit is not reached first",
    "warps": "use a block size that divides 2048 threads evenly",
    "barriers": "use fewer named barriers",
}


def sentences(comp: dict, coal: dict, occ_worst: dict, resources: dict, sync: dict, mem: dict,
              roof: dict | None, bound: str) -> list[str]:
    out = []
    c = comp.get("coalescing")
    w = coal.get("worst")
    if c is not None and c < WEAK and w:
        kind = "store to" if w["kind"] == "store" else "load from"
        out.append(f"The {kind} `{w['array']}` at line {w['line']} in kernel {w['kernel']} is "
                   f"{_PATTERN_WORDS.get(w['pattern'], w['pattern'])} across threadIdx.x, so a warp uses only "
                   f"{w['efficiency']:.0%} of the 32-byte sectors it moves; make threadIdx.x the fastest-varying "
                   "index (stage through a shared-memory tile if the layout needs a transpose).")
    o = comp.get("occupancy")
    if o is not None and o < WEAK and occ_worst:
        la = occ_worst
        res = resources.get(la["kernel"], {})
        if res.get("spill_stores") or res.get("spill_loads"):
            out.append(f"ptxas spills {res.get('spill_stores', 0)} bytes of registers to local memory in kernel "
                       f"{la['kernel']}; reduce register pressure (fewer accumulators or a smaller unroll).")
        elif la.get("sm_fill") is not None and la["sm_fill"] < 0.5:
            out.append(f"The launch of {la['kernel']} has only {la['blocks']} blocks for {la['sms']} SMs "
                       f"({la['sm_fill']:.0%} of one full wave); split the work into more blocks.")
        else:
            lim = la.get("limiting") or []
            out.append(f"Kernel {la['kernel']} reaches {la['occupancy']:.0%} theoretical occupancy "
                       f"({la['blocks_per_sm']} blocks of {la['threads']} threads per SM, limited by "
                       f"{' and '.join(x.replace('_', ' ') for x in lim) or 'launch limits'}); "
                       f"{_LIMIT_ADVICE.get(lim[0] if lim else '', 'change the block size')}.")
    if sync["divergent_barriers"]:
        k, line, why = sync["divergent_barriers"][0]
        out.append(f"__syncthreads() at line {line} in kernel {k} is reached only by some threads ({why}), "
                   "which hangs or corrupts the block; move it out of the thread-dependent branch so every "
                   "thread of the block reaches it.")
    elif comp.get("sync") is not None and comp["sync"] < 1.0:
        if sync["global_atomics_in_loops"]:
            k, line, arr, _ = sync["global_atomics_in_loops"][0]
            out.append(f"The atomic on global `{arr}` inside a loop at line {line} in kernel {k} serialises "
                       "threads on the same address; accumulate in registers or shared memory and issue one "
                       "atomic per block.")
        elif sync["redundant_barriers"]:
            k, line = sync["redundant_barriers"][0]
            out.append(f"The barrier at line {line} in kernel {k} has no shared-memory traffic since the previous "
                       "one; remove it.")
        elif sync["tree_without_shuffle"]:
            out.append(f"The shared-memory tree reduction in kernel {sync['tree_without_shuffle'][0]} synchronises "
                       "the whole block at every step; finish the last 32 partial sums with __shfl_down_sync.")
    m = comp.get("memory")
    if m is not None and m < WEAK:
        wb = mem.get("worst_bank_conflict")
        if bound == "compute" and not mem["smem_tiled_reuse"]:
            ai = (roof or {}).get("intensity")
            out.append(f"This task is compute-bound ({ai:.0f} FLOP per byte) but no data is reused from shared "
                       "memory; tile the inputs into shared memory or registers so each loaded element serves "
                       "many operations." if ai else
                       "This task is compute-bound but no data is reused from shared memory; tile the inputs "
                       "into shared memory or registers.")
        elif wb and wb["degree"] >= 2:
            out.append(f"Shared array `{wb['array']}` is accessed with a {wb['degree']:.0f}-way bank conflict at "
                       f"line {wb['line']}; pad its last dimension (e.g. [32][33]).")
        elif not mem.get("vector_fraction"):
            out.append("Global accesses are all scalar; load and store float4 (or float2) so each thread moves "
                       "16 bytes per instruction.")
    r = comp.get("roofline")
    if r is not None and r < 0.5 and roof:
        big = max((c for c in roof["configs"] if c.get("fraction")), key=lambda c: c["bytes"] + c["flops"])
        what = (f"{big['achieved_GBps']:.0f} GB/s" if bound == "memory" else f"{big['achieved_TFLOPs']:.1f} TFLOP/s")
        out.append(f"The largest config runs at {r:.0%} of the {bound} roofline ({what}, "
                   f"{big['time_ms']:.3f} ms against a bound of {big['bound_ms']:.3f} ms).")
    return out
