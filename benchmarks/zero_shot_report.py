"""The zero-shot ladder's outputs (benchmarks/zero_shot.py): the table, zero_shot.json and zero_shot.png.

A cell is one model x prompt x suite; its eval.json (cudaperf_jax.eval.report.build_summary) and cell.json (its
settings, counts and seconds) are read back from the cell directories, so a resumed ladder reports every cell.
"""
from __future__ import annotations

import json
from pathlib import Path

# table column -> per-turn key of cudaperf_jax.eval.metrics.per_turn
COLUMNS = [("correct", "correct"), ("pass@1", "pass@1"), ("fast_1 eager/baseline", "fast_1/eager"),
           ("fast_1 compile", "fast_1/compile"), ("geomean", "geomean_speedup/eager"), ("ABI fail", "abi_failure"),
           ("cut", "truncated")]


def _fmt(v, pct: bool) -> str:
    if v is None:
        return "-"
    return f"{v:.2f}" if not pct else f"{100 * v:.0f}%"


def turns_text(rows: list[dict], key: str) -> str:
    """'a -> b' over the turns of one metric ('-' where it was not measured, e.g. speedups on the cpu backend)."""
    pct = key in ("abi_failure", "truncated")
    return " -> ".join(_fmt(r.get(key), pct) for r in rows)


def cell_row(cell: dict) -> dict:
    """One line of the ladder: the cell's names, sizes, every metric per turn, ABI categories and hacks."""
    s, meta = cell["eval"], cell["meta"]
    return {"model": meta["model_label"], "prompt": meta["prompt"], "suite": meta["suite"], "tasks": s["tasks"],
            "answers": s["candidates"], "judged": meta["judged"], "deduplicated": meta["deduplicated"],
            "per_turn": [{k: r.get(k) for _, k in COLUMNS} | {"turn": r["turn"], "abi": r.get("abi", {})}
                         for r in s["per_turn"]],
            "abi": s.get("abi", {}), "statuses": s["statuses"], "seconds": meta["seconds"],
            "hacks": cell["hacks"]}


def markdown(rows: list[dict], settings: dict) -> str:
    head = ["model", "prompt", "suite", "n"] + [c for c, _ in COLUMNS] + ["dedup"]
    lines = ["# Zero-shot ladder", "",
             (f"{settings['samples']} samples at temperature {settings['temperature']} (top_p {settings['top_p']}), "
             f"{settings['turns']} turns, max_new_tokens {settings['max_new_tokens']}, backend {settings['backend']}. "
             "Each metric per turn (turn 0 -> turn 1 ...): correct = best of the samples (KernelBench's correctness), "
             "pass@1 unbiased, fast_1 = share of ALL tasks correct and faster than PyTorch eager (KernelBench) or "
             "the task's CUDA baseline (dataset tasks), fast_1 compile against torch.compile, geomean = speedup "
             "over correct, ABI fail = share of answers failing on the solution ABI (cudaperf_jax/eval/abi.py), "
             "cut = share cut at max_new_tokens; dedup = repeats given their first verdict."), "",
             "| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in rows:
        vals = [r["model"], r["prompt"], r["suite"], str(r["tasks"])]
        vals += [turns_text(r["per_turn"], k) for _, k in COLUMNS]
        vals.append(f"{r['deduplicated']}/{r['answers']}")
        lines.append("| " + " | ".join(vals) + " |")
    lines += ["", "## ABI failures by category (all turns)", "", "| model | prompt | suite | share | categories |",
              "| --- | --- | --- | --- | --- |"]
    for r in rows:
        cats = ", ".join(f"{k} {v}" for k, v in sorted(r["abi"].get("abi", {}).items(), key=lambda kv: -kv[1]))
        lines.append(f"| {r['model']} | {r['prompt']} | {r['suite']} | {_fmt(r['abi'].get('abi_failure'), True)} | "
                     f"{cats or '-'} |")
    hacks = [(r, h) for r in rows for h in r["hacks"]]
    lines += ["", f"## `hack` verdicts ({len(hacks)})", ""]
    if not hacks:
        lines.append("None.")
    for r, h in hacks[:60]:
        why = violations_text(h["violations"]) or h["error"]
        lines.append(f"- {r['model']} / {r['prompt']} / {h['task']} turn {h['turn']} sample {h['sample']}: {why}")
    if len(hacks) > 60:
        lines.append(f"- ... and {len(hacks) - 60} more (zero_shot.json)")
    return "\n".join(lines) + "\n"


def violations_text(violations: list[dict]) -> str:
    """One clause per (rule, name): its first line and text, and how many more lines repeat it (an answer that
    includes the same header 120 times reads as one clause)."""
    groups: dict[tuple, list[dict]] = {}
    for v in violations:
        groups.setdefault((v["rule"], v.get("name", "")), []).append(v)
    out = []
    for (rule, name), vs in groups.items():
        more = f" (and {len(vs) - 1} more line{'s' if len(vs) > 2 else ''})" if len(vs) > 1 else ""
        out.append(f"{rule} `{name}` line {vs[0]['line']}: `{vs[0].get('text', '')}`{more}")
    return "; ".join(out)


def plot(rows: list[dict], path: Path) -> Path | None:
    """Grouped bars per cell: correct (best of n) and the ABI-failure share, first and last turn, n on each bar."""
    if not rows:
        return None
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    last = len(rows[0]["per_turn"]) - 1
    turns = [0] if last == 0 else [0, last]   # the first and the last turn
    colors = {("correct", 0): "#4c72b0", ("correct", last): "#55a868", ("abi_failure", 0): "#dd8452",
              ("abi_failure", last): "#c44e52"}
    series = [(f"{name}, turn {t}", key, t, unit, colors[(key, t)])
              for name, key, unit in (("correct", "correct", "tasks"), ("ABI failure", "abi_failure", "answers"))
              for t in turns]
    x = np.arange(len(rows))
    w = 0.8 / len(series)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(rows)), 4.2))
    for j, (label, key, turn, unit, color) in enumerate(series):
        vals = [(r["per_turn"][min(turn, len(r["per_turn"]) - 1)].get(key) or 0.0) for r in rows]
        bars = ax.bar(x + (j - (len(series) - 1) / 2) * w, vals, w, label=label, color=color)
        for b, r in zip(bars, rows):
            n = r["tasks"] if unit == "tasks" else r["answers"] // max(1, len(r["per_turn"]))
            ax.annotate(f"n={n}", (b.get_x() + b.get_width() / 2, b.get_height()), ha="center", va="bottom",
                        fontsize=6, rotation=90, xytext=(0, 2), textcoords="offset points")
    ax.set_xticks(x)
    ax.set_xticklabels([f"{r['model']}\n{r['prompt']}\n{r['suite']}" for r in rows], fontsize=7)
    ax.set_ylabel("share (correct: of tasks; ABI failure: of answers)")
    ax.set_xlabel("model / prompt / suite")
    ax.set_ylim(0, 1.15)
    ax.set_title("Zero-shot: correctness and ABI failures per cell")
    ax.legend(fontsize=7, ncol=2, loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write(cells: list[dict], settings: dict, pending: list[str], out: Path) -> list[Path]:
    """zero_shot.json, table.md and zero_shot.png of the finished cells in `out`; returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    rows = [cell_row(c) for c in cells]
    summary = {"settings": settings, "cells": rows, "pending": pending,
               "hacks": [{**h, "model": r["model"], "prompt": r["prompt"], "suite": r["suite"]}
                         for r in rows for h in r["hacks"]]}
    (out / "zero_shot.json").write_text(json.dumps(summary, indent=1, default=str))
    (out / "table.md").write_text(markdown(rows, settings))
    png = plot(rows, out / "zero_shot.png")
    return [out / "zero_shot.json", out / "table.md"] + ([png] if png else [])
