"""Evaluation records and reports: one record per judged candidate; JSON + Markdown + PNG of the metrics.

    rec = record(task, turn, sample, result, text=..., source=...)
    summary = build_summary(records, tasks, ks=(1, 5), group_by="level", scores=None)
    write_report(summary, records, run_dir)        # eval.json, eval.md, eval_turns.png
"""
from __future__ import annotations

import json
import math
from pathlib import Path

from cudaperf_jax.eval import metrics
from cudaperf_jax.eval.suites import group_of
from kernels_harness.feedback import reason


def compile_speedup(result) -> float | None:
    """Geometric mean over timed configs of torch.compile ms / candidate ms (None when not timed)."""
    vals = []
    for c in result.configs:
        c = c if isinstance(c, dict) else c.__dict__
        if c.get("time_ms") and c.get("compile_baseline_ms"):
            vals.append(math.log(c["compile_baseline_ms"] / c["time_ms"]))
    return math.exp(sum(vals) / len(vals)) if vals else None


def record(task, turn: int, sample: int, result, text: str = "", source: str = "",
           truncated: bool | None = None) -> dict:
    """One candidate. `unchecked` (no verdict could be established) is not correct. truncated: a policy's
    answer cut at the generation budget (None: not a generated answer). A compile error keeps the head of its log
    (what cudaperf_jax.eval.abi reads), a hack its violations."""
    correct = bool(result.correct) and result.status == "ok"
    extra = {} if truncated is None else {"truncated": bool(truncated)}
    return {**extra, "task": task.id, "turn": int(turn), "sample": int(sample), "status": result.status,
            "compiled": bool(result.compiled), "correct": correct,
            "speedup": result.speedup if correct else None,
            "speedup_compile": compile_speedup(result) if correct else None,
            "structure": (result.features or {}).get("score"), "features": result.features or {},
            "error": reason(result), "violations": list(result.violations or []),
            "compile_log": (result.compile_log or "")[:2000] if result.status == "compile_error" else "",
            "source": source, "completion": text}


def build_summary(records: list[dict], tasks, ks=(1,), group_by: str = "family", scores: dict | None = None) -> dict:
    """Overall (best of n), first sample, pass@k, per turn, per group (`group_by`, and both per_level and
    per_family), and ranker-selected metrics."""
    by_id = {t.id: t for t in tasks}
    n = len(tasks)

    def per(by: str) -> dict:
        groups = {}
        for t in tasks:
            g = group_of(t, by)
            groups[g] = groups.get(g, 0) + 1
        return metrics.by_group(records, lambda tid: group_of(by_id[tid], by), groups)
    first = [r for r in records if r["sample"] == 0]
    statuses = {}
    for r in records:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    out = {"tasks": n, "candidates": len(records), "statuses": statuses,
           "best_of_n": metrics.summarize(metrics.best_of_n(records), n),
           "first_sample": metrics.summarize(metrics.best_of_n(first), n),
           "pass_at_k": metrics.pass_at_ks(records, ks, n),
           "per_turn": metrics.per_turn(records, n),
           "truncated": sum(bool(r.get("truncated")) for r in records),
           "per_group": per(group_by), "group_by": group_by,
           "per_level": per("level"), "per_family": per("family")}
    if any("abi" in r for r in records):
        out["abi"] = metrics.abi_shares(records)
    if scores is not None:
        out["ranker_selected"] = metrics.summarize(metrics.best_of_n(records, scores=scores), n)
    return out


def _row(name: str, m: dict, keys: list) -> str:
    return f"| {name} | " + " | ".join("-" if m.get(k) is None else f"{m[k]:.3g}" for k in keys) + " |"


def markdown(summary: dict) -> str:
    keys = ["correct"] + [k for k in summary["best_of_n"] if k.startswith(("fast_", "geomean"))]
    head = "| | " + " | ".join(keys) + " |\n|" + " --- |" * (len(keys) + 1)
    lines = ["# Evaluation", "", f"{summary['tasks']} tasks, {summary['candidates']} candidates; verdicts: "
             + ", ".join(f"{k} {v}" for k, v in sorted(summary["statuses"].items())), "",
             "fast_p: fraction of ALL tasks correct with speedup > p (KernelBench); geomean over correct.", "",
             head, _row("best of n (oracle)", summary["best_of_n"], keys), _row("first sample", summary["first_sample"], keys)]
    if "ranker_selected" in summary:
        lines.append(_row("ranker-selected", summary["ranker_selected"], keys))
    if summary["pass_at_k"]:
        lines += ["", "| " + " | ".join(summary["pass_at_k"]) + " |", "|" + " --- |" * len(summary["pass_at_k"]),
                  "| " + " | ".join(f"{v:.3f}" for v in summary["pass_at_k"].values()) + " |"]
    lines += ["", "## Per turn (each sample's answer at turn t, the best sample per task)", "", head.replace("| |", "| turn |", 1)]
    lines += [_row(str(r["turn"]), r, keys) for r in summary["per_turn"]]
    cut = [r for r in summary["per_turn"] if r.get("truncated") is not None]
    if cut:
        lines += ["", "Answers cut at the generation budget (max_new_tokens), per turn: "
                  + ", ".join(f"turn {r['turn']} {r['truncated']:.0%}" for r in cut) + "."]
    if summary.get("abi"):
        cats = ", ".join(f"{k} {v}" for k, v in summary["abi"]["abi"].items()) or "none"
        lines += ["", (f"Answers failing on the solution ABI (cudaperf_jax/eval/abi.py): "
                       f"{summary['abi']['abi_failure']:.0%} ({cats}).")]
    tables = [(summary["group_by"], summary["per_group"])]
    for by in ("level", "family"):  # both tables; the level one only where it differs (KernelBench suites)
        if by != summary["group_by"] and summary.get(f"per_{by}") and summary[f"per_{by}"] != summary["per_group"]:
            tables.append((by, summary[f"per_{by}"]))
    for by, rows in tables:
        lines += ["", f"## Per {by}", "", head.replace("| |", f"| {by} |", 1)]
        lines += [_row(g, m, keys) for g, m in rows.items()]
    return "\n".join(lines) + "\n"


def plot_turns(summary: dict, path: Path) -> Path | None:
    """Correctness and fast_p per refinement turn (fractions of all tasks), as a PNG; None without turns or
    matplotlib."""
    from cudaperf_jax.experiment.plotting import empty_note, integer_ticks, pyplot
    rows = summary["per_turn"]
    plt = pyplot()
    if not rows or plt is None:
        return None
    fig, ax = plt.subplots(figsize=(6, 3.5))
    turns = [r["turn"] for r in rows]
    keys = ["correct"] + [k for k in rows[0] if k.startswith("fast_")]
    for k in keys:
        ax.plot(turns, [r.get(k) or 0.0 for r in rows], marker="o", label=k)
    if not any(r.get(k) for r in rows for k in keys):
        empty_note(ax, "no task had a correct candidate at any turn")
    ax.set_xlabel("turn")
    ax.set_ylabel("fraction of tasks")
    ax.set_ylim(-0.04, 1.04)
    ax.axhline(0.0, color="black", lw=0.5)
    ax.set_xticks(turns)
    integer_ticks(ax)
    ax.set_title(f"Correctness and fast_p by turn ({summary['tasks']} tasks, {summary['candidates']} candidates)",
                 fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write_report(summary: dict, records: list[dict], run_dir: str | Path) -> list[Path]:
    d = Path(run_dir)
    d.mkdir(parents=True, exist_ok=True)
    (d / "eval.json").write_text(json.dumps(summary, indent=1, sort_keys=True, default=str))
    (d / "eval.md").write_text(markdown(summary))
    with open(d / "candidates.jsonl", "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in records)
    paths = [d / "eval.json", d / "eval.md", d / "candidates.jsonl"]
    png = plot_turns(summary, d / "eval_turns.png")
    return paths + ([png] if png else [])
