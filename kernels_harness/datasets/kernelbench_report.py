"""Reports of the KernelBench eager/torch.compile times: per-level table, speedup histogram, recheck ratios.

    summary_table(records, provenance)      # Markdown: per level, problems timed, compile speedup
    plot_compile_speedups(records, path)    # PNG: log2(eager / compile) on the largest config per level
    recheck(out)                            # seeded tasks timed again: new / seeded time quantiles
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from kernels_harness.datasets import times as times_lib

RESULTS = "results.jsonl"
HEADER = ("| level | problems | eager timed | compile timed | compile agrees | compile/eager speedup (median, "
          "largest config) | compile faster |")


def recheck(out: Path) -> dict:
    """Times of seeded tasks measured again in this run against their seeded values: ratio new / old."""
    old = {r["task"]: r for r in times_lib.iter_results(out / RESULTS) if "time_ms" in r}
    ratios = {"torch_eager": [], "torch_compile": []}
    for r in times_lib.iter_results(out / "recheck.jsonl"):
        if r["task"] not in old:
            continue
        for row_new, row_old in zip(r["time_ms"], old[r["task"]]["time_ms"]):
            for k, impl in enumerate(ratios):
                if row_new[k] and row_old[k]:
                    ratios[impl].append(row_new[k] / row_old[k])
    summary = {}
    for impl, xs in ratios.items():
        if xs:
            q = np.percentile(xs, [10, 50, 90])
            summary[impl] = {"pairs": len(xs), "p10": round(float(q[0]), 3), "median": round(float(q[1]), 3),
                             "p90": round(float(q[2]), 3)}
    if summary:
        print(f"recheck of seeded tasks (new / seeded time): {json.dumps(summary)}", flush=True)
    return summary


def _largest_pair(r: dict) -> tuple[float | None, float | None]:
    """(eager ms, torch.compile ms) on the largest config with both timed (None, None if none has)."""
    for row in reversed(r["time_ms"]):
        if row[0] is not None and row[1] is not None:
            return row[0], row[1]
    return None, None


def summary_table(records: list[dict], prov: dict) -> str:
    """Markdown: per level, problems recorded, eager-timed, compile-timed and agreeing, and the
    torch.compile speedup over eager on the largest config (median, share of problems faster)."""
    lines = [f"# KernelBench eager and torch.compile times ({prov.get('gpu', '?')}, torch {prov.get('torch', '?')})",
             "", HEADER, "| --- | --- | --- | --- | --- | --- | --- |"]
    def level(r):
        return "?" if r.get("level") is None else r["level"]
    for lvl in [*sorted({level(r) for r in records}, key=str), "all"]:
        rs = [r for r in records if lvl == "all" or level(r) == lvl]
        sp = [e / c for e, c in map(_largest_pair, rs) if e and c]
        agree = sum(any(row[1] == 1 for row in r["agrees"]) for r in rs)
        timed = sum(all(row[0] is not None for row in r["time_ms"]) for r in rs)
        comp = sum(any(row[1] is not None for row in r["time_ms"]) for r in rs)
        med = f"{np.median(sp):.2f}x" if sp else "-"
        faster = f"{np.mean(np.asarray(sp) > 1):.0%}" if sp else "-"
        lines.append(f"| {lvl} | {len(rs)} | {timed} | {comp} | {agree} | {med} | {faster} |")
    return "\n".join(lines) + "\n"


def plot_compile_speedups(records: list[dict], path: Path) -> Path | None:
    """Histogram of log2(eager ms / torch.compile ms) on the largest config, one line per level (PNG)."""
    import math
    groups: dict = {}
    for r in records:
        e, c = _largest_pair(r)
        if e and c:
            groups.setdefault(f"level {r.get('level')}", []).append(math.log2(e / c))
    if not groups:
        return None
    return times_lib.plot_histograms(dict(sorted(groups.items())), path, (-4, 4, 33),
                                     "log2(eager ms / torch.compile ms), largest config", "problems",
                                     "torch.compile over PyTorch eager on KernelBench")
