"""The method chain's results (experiments/method.py report): per stage and per turn, with 95% bootstrap intervals over
problems, the paired gaps the goals compare, the goals met or missed, where answers are lost, and the plots.

    results = collect_results(root, plan)      # {"cells", "gaps", "goals", "funnel", "rl", "sft"}
    report(root, plan, out)                    # out/results.json, summary.md, stages.png, turns.png, rl_curves.png,
                                               # sft_loss.png

A policy's metric at turn t is KernelBench's, over each task's best sample taking every sample's answer at turn t
(cudaperf_jax.eval.metrics.per_turn): correct, fast_1 against eager PyTorch and torch.compile, fast_1.5, and the
geometric-mean speedup over correct; intervals and paired gaps resample problems (cudaperf_jax.eval.bootstrap). A
cell still in parts is reported over the tasks it has done, marked partial.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from cudaperf_jax.eval import bootstrap, metrics
from experiments.method_plan import Plan

METRICS = ("correct", "fast_1", "fast_1/compile", "fast_1.5", "geomean_speedup")
HEAD = {"correct": "correct", "fast_1": "fast_1 eager", "fast_1/compile": "fast_1 compile", "fast_1.5": "fast_1.5",
        "geomean_speedup": "geomean"}
SUITE_NAMES = {"kernelbench": "KernelBench level 1", "test": "test split (held-out families)", "val": "val"}
# the loss of each answer at the last turn, first match wins
BUCKETS = ("format", "compile", "correctness", "unchecked", "speed", "fast")


def roles(plan: Plan) -> dict[str, str]:
    """{policy: its name in the tables}, in table order."""
    t = plan.tag
    return {f"zero_shot-{t}": "zero-shot", f"sft-{t}": "SFT", f"rl_full_s0-{t}": "RL-full s0",
            f"rl_full_s1-{t}": "RL-full s1", f"rl_abl_s0-{t}": "RL-ablation s0"}


def load_cell(root: Path, plan: Plan, policy: str, suite: str) -> dict | None:
    """{"tasks", "records", "complete", "n_tasks"} of a policy's cell (complete, or the parts written), or None."""
    d = root / "cells" / f"{plan.cell_label(policy)}__{plan.evals.prompt}__{suite}"
    if not (d / "key.json").is_file():
        return None
    key = json.loads((d / "key.json").read_text())
    if (d / "cell.json").is_file():
        recs = [json.loads(x) for x in (d / "candidates.jsonl").read_text().splitlines() if x.strip()]
        return {"tasks": key["tasks"], "records": recs, "complete": True, "n_tasks": len(key["tasks"])}
    parts = [json.loads(p.read_text()) for p in sorted(d.glob("part_*.json"))]
    if not parts:
        return None
    return {"tasks": [t for p in parts for t in p["tasks"]], "records": [r for p in parts for r in p["records"]],
            "complete": False, "n_tasks": len(key["tasks"])}


def per_task_at(records: list[dict], turn: int) -> list[dict]:
    """One record per task: the best sample, each sample's answer at `turn` (its last turn <= turn)."""
    return metrics.best_of_n([r for r in records if r["turn"] <= turn])


def unmeasured(records: list[dict]) -> set[str]:
    """The speed metrics a cell could not measure: correct answers without a time against eager (speedup) or
    torch.compile (speedup_compile), as on the cpu backend (where nothing is correct, 0 is the measured value)."""
    correct = [r for r in records if r.get("correct")]
    out = set()
    if correct and all(r.get("speedup") is None for r in correct):
        out |= {"fast_1", "fast_1.5", "geomean_speedup"}
    if correct and all(r.get("speedup_compile") is None for r in correct):
        out.add("fast_1/compile")
    return out


def turn_table(cell: dict, turns: int) -> list[dict]:
    """Per turn: {metric: {"value", "low", "high", "n"[, "measured": False]}} (95% bootstrap over problems)."""
    out, skip = [], unmeasured(cell["records"])
    for t in range(turns):
        per = per_task_at(cell["records"], t)
        out.append({"turn": t, **{m: {**bootstrap.interval(per, cell["tasks"], m),
                                      **({"measured": False} if m in skip else {})} for m in METRICS}})
    return out


def funnel(cell: dict, turn: int) -> dict:
    """The share of the turn's answers lost at each stage: format (cut at the token budget, or failing on the
    solution ABI: no code, no or a misnamed export, a wrong signature; cudaperf_jax.eval.abi), compile (other compile
    errors), correctness (wrong, crash, timeout, hack), unchecked, speed (correct, not faster than eager), fast."""
    at = [r for r in cell["records"] if r["turn"] == turn]
    counts = dict.fromkeys(BUCKETS, 0)
    for r in at:
        if r.get("truncated") or r.get("abi"):
            b = "format"
        elif r["status"] == "compile_error":
            b = "compile"
        elif r["status"] == "unchecked":
            b = "unchecked"
        elif not r.get("correct"):
            b = "correctness"
        else:
            b = "fast" if (r.get("speedup") or 0) > 1 else "speed"
        counts[b] += 1
    n = len(at)
    return {"answers": n, **{b: counts[b] / n if n else 0.0 for b in BUCKETS},
            "abi_failure": sum(bool(r.get("abi")) for r in at) / n if n else 0.0}


def limiting(f: dict) -> str:
    """The stage where most answers of the funnel are lost (of format, compile, correctness, speed)."""
    return max(("format", "compile", "correctness", "speed"), key=lambda b: f[b])


def collect_results(root: Path, plan: Plan) -> dict:
    names = roles(plan)
    turns = plan.evals.turns
    cells, per_task_last = {}, {}
    for policy in names:
        for suite in plan.evals.suites:
            cell = load_cell(root, plan, policy, suite)
            if cell is None:
                continue
            cells[(policy, suite)] = cell
            per_task_last[(policy, suite)] = per_task_at(cell["records"], turns - 1)
    t = plan.tag
    pairs = [(f"rl_full_s{s}-{t}", f"sft-{t}") for s in (0, 1)] + [(f"sft-{t}", f"zero_shot-{t}")] + \
        [(f"rl_full_s{s}-{t}", f"rl_abl_s0-{t}") for s in (0, 1)]
    gaps = []
    for suite in plan.evals.suites:
        for a, b in pairs:
            ca, cb = cells.get((a, suite)), cells.get((b, suite))
            if ca is None or cb is None or ca["tasks"] != cb["tasks"]:
                continue
            skip = unmeasured(ca["records"]) | unmeasured(cb["records"])
            gaps.append({"suite": suite, "a": a, "b": b, "what": f"{names[a]} - {names[b]}", **{
                m: {**bootstrap.paired_difference(per_task_last[(a, suite)], per_task_last[(b, suite)], ca["tasks"],
                                                  m), **({"measured": False} if m in skip else {})}
                for m in METRICS}})
        for policy in names:
            c = cells.get((policy, suite))
            if c is None or turns < 2:
                continue
            first, skip = per_task_at(c["records"], 0), unmeasured(c["records"])
            gaps.append({"suite": suite, "a": policy, "b": policy, "what": f"{names[policy]}: last turn - first turn",
                         **{m: {**bootstrap.paired_difference(per_task_last[(policy, suite)], first, c["tasks"], m),
                                **({"measured": False} if m in skip else {})} for m in METRICS}})
    results = {"plan": plan.to_json(), "written": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
               "cells": [{"policy": p, "role": names[p], "suite": s, "complete": c["complete"],
                          "tasks_done": len(c["tasks"]), "n_tasks": c["n_tasks"], "answers": len(c["records"]),
                          "per_turn": turn_table(c, turns),
                          "funnel": [funnel(c, tt) for tt in range(turns)]} for (p, s), c in cells.items()],
               "gaps": gaps, "rl": rl_summaries(root, plan), "sft": sft_summary(root, plan)}
    results["goals"] = goals(results, plan)
    return results


def _row(results: dict, policy: str, suite: str) -> dict | None:
    return next((c for c in results["cells"] if c["policy"] == policy and c["suite"] == suite), None)


def _gap(results: dict, suite: str, a: str, b: str) -> dict | None:
    return next((g for g in results["gaps"] if g["suite"] == suite and g["a"] == a and g["b"] == b), None)


def goals(results: dict, plan: Plan) -> list[dict]:
    """Issue 45's goals on KernelBench level 1 (best of the samples, last turn), each met / missed / not measured, per
    RL-full seed (met: every seed measured meets it)."""
    t, kb = plan.tag, "kernelbench"
    seeds = [s for s in (0, 1) if _row(results, f"rl_full_s{s}-{t}", kb)]
    out = []

    def add(text, per_seed):
        vals = [v for v in per_seed.values() if v is not None]
        status = "not measured" if not vals else ("met" if all(v[0] for v in vals) else "missed")
        out.append({"goal": text, "status": status, "per_seed": {f"s{s}": v[1] if v else "not measured"
                                                                  for s, v in per_seed.items()}})

    def last(policy, suite, m):
        c = _row(results, policy, suite)
        return None if c is None else c["per_turn"][-1][m]

    def count(s, m, k):
        v = last(f"rl_full_s{s}-{t}", kb, m)
        return None if v is None else (round(v["value"] * v["n"]) >= k, f"{round(v['value'] * v['n'])} of {v['n']}")
    add("RL-full correct on at least 40 of the 100 KernelBench level-1 problems", {s: count(s, "correct", 40)
                                                                                   for s in seeds or [0]})
    add("RL-full faster than eager PyTorch on at least 15", {s: count(s, "fast_1", 15) for s in seeds or [0]})

    def chain_gap(s):
        g1, g2 = _gap(results, kb, f"rl_full_s{s}-{t}", f"sft-{t}"), _gap(results, kb, f"sft-{t}", f"zero_shot-{t}")
        if g1 is None or g2 is None:
            return None
        a, b = g1["correct"], g2["correct"]
        return (a["low"] > 0 and b["low"] > 0,
                (f"RL-SFT {a['value']:+.2f} [{a['low']:+.2f}, {a['high']:+.2f}], SFT-zero-shot {b['value']:+.2f} "
                f"[{b['low']:+.2f}, {b['high']:+.2f}]"))
    add("RL-full > SFT > zero-shot in correct, the paired gaps' 95% intervals above 0", {s: chain_gap(s)
                                                                                        for s in seeds or [0]})

    def abl(s):
        g = _gap(results, kb, f"rl_full_s{s}-{t}", f"rl_abl_s0-{t}")
        return None if g is None else (g["fast_1"]["value"] >= 0, (f"fast_1 gap {g['fast_1']['value']:+.2f} "
                                       f"[{g['fast_1']['low']:+.2f}, {g['fast_1']['high']:+.2f}]"))
    add("RL-full >= RL-ablation in fast_1", {s: abl(s) for s in seeds or [0]})

    def turns_gain(s):
        gs = [_gap(results, suite, f"rl_full_s{s}-{t}", f"rl_full_s{s}-{t}") for suite in (kb, "test")]
        if any(g is None for g in gs):
            return None
        return (all(g["correct"]["value"] > 0 for g in gs),
                ", ".join(f"{suite} {g['correct']['value']:+.2f} [{g['correct']['low']:+.2f}, "
                          f"{g['correct']['high']:+.2f}]" for suite, g in zip((kb, "test"), gs)))
    add("after RL the last turn beats the first in correct on KernelBench and the test split",
        {s: turns_gain(s) for s in seeds or [0]})
    return out


def rl_summaries(root: Path, plan: Plan) -> dict:
    out = {}
    for policy in plan.policies():
        if not policy.startswith("rl_"):
            continue
        path = root / "runs" / policy / "metrics.jsonl"
        rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.is_file() else []
        if not rows:
            continue
        cfg = json.loads((root / "runs" / policy / "config.json").read_text())["config"] if (
            root / "runs" / policy / "config.json").is_file() else {}
        turns = sorted({int(k[4:k.index("/")]) for k in rows[0] if k.startswith("turn") and "/" in k})
        head, tail = rows[:10], rows[-10:]
        mean = lambda rs, k: sum(r.get(k, 0.0) for r in rs) / len(rs)
        out[policy] = {"steps_done": len(rows), "steps": cfg.get("steps"), "terms": cfg.get("reward", {}).get("terms"),
                       "reward_first10": mean(head, "reward/total"), "reward_last10": mean(tail, "reward/total"),
                       "equal_share_last10": sum(r.get("equal_groups", 0) for r in tail) / max(
                           1, sum(r.get("groups", 0) for r in tail)),
                       "kl_last10": mean(tail, "kl"),
                       "correct_first10": [mean(head, f"turn{u}/correct") for u in turns],
                       "correct_last10": [mean(tail, f"turn{u}/correct") for u in turns],
                       "curve": [{k: r.get(k) for k in ("step", "reward/total", "equal_groups", "groups", "kl",
                                                        *(f"turn{u}/correct" for u in turns))} for r in rows]}
    return out


def sft_summary(root: Path, plan: Plan) -> dict:
    run = root / "runs" / f"sft-{plan.tag}"
    path = run / "metrics.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.is_file() else []
    if not rows:
        return {}
    summary = json.loads((run / "summary.json").read_text()) if (run / "summary.json").is_file() else {}
    val = [(r["step"], r["val_loss"]) for r in rows if "val_loss" in r]
    return {"steps_done": len(rows), "stopped_early_at": summary.get("stopped_early_at"),
            "val_loss_initial": next((r["val_loss_initial"] for r in rows if "val_loss_initial" in r), None),
            "val_loss_best": min((v for _, v in val), default=None), "val_loss_last": val[-1][1] if val else None,
            "epochs": rows[-1].get("epoch"),
            "curve": [{k: r.get(k) for k in ("step", "loss", "val_loss")} for r in rows]}


def report(root: Path, plan: Plan, out: Path, echo=print) -> dict:
    from experiments.method_markdown import summary_markdown
    from experiments.method_plots import plot_all
    out.mkdir(parents=True, exist_ok=True)
    results = collect_results(root, plan)
    (out / "results.json").write_text(json.dumps(results, indent=1, default=str))
    pngs = plot_all(results, plan, out)
    (out / "summary.md").write_text(summary_markdown(results, plan, [p.name for p in pngs]))
    echo(f"[method] report: {len(results['cells'])} cells, {len(results['gaps'])} gaps, goals "
         + ", ".join(g["status"] for g in results["goals"]) + "; wrote results.json, summary.md, "
         + ", ".join(p.name for p in pngs) + f" in {out}")
    return results


def adapters_readme(root: Path, plan: Plan, written: list[Path]) -> str:
    from experiments.method_markdown import adapters_markdown
    return adapters_markdown(root, plan, written)
