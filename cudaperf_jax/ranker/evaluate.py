"""Held-out evaluation of scorers (float arrays over ImplTable rows; higher = better candidate).

    m = evaluate(table, pairs, scores, n=8, seed=0)

pairwise accuracy (overall and per pair kind; a tie counts half), Kendall's tau within task between
score and -time over the task's correct implementations (mean over tasks with >= 2 distinct times),
and best-of-n: per task up to n of its implementations (correct and labelled-wrong) are candidates,
the scorer picks its top one. The pick's speedup is the baseline's time / the pick's on the measured
config; an incorrect pick gets the slowest correct candidate's speedup ("unverified"); "verified" picks
among the correct candidates only (the harness has checked them). Reported as geometric means over
tasks beside the oracle pick (the fastest correct candidate) and a random pick (expected log speedup).
"""
from __future__ import annotations

import math

import numpy as np
from scipy import stats

from cudaperf_jax.ranker.pairs import KINDS, ImplTable, Pairs


def pairwise(pairs: Pairs, s: np.ndarray) -> dict:
    d = s[pairs.win] - s[pairs.lose]
    hit = np.where(d > 0, 1.0, np.where(d == 0, 0.5, 0.0))
    out = {"all": float(hit.mean()) if len(hit) else math.nan, "n": len(hit)}
    for k, name in enumerate(KINDS):
        sel = pairs.kind == k
        out[name] = float(hit[sel].mean()) if sel.any() else math.nan
        out[f"n_{name}"] = int(sel.sum())
    return out


def kendall(table: ImplTable, rows: np.ndarray, s: np.ndarray, time_col: int = -1) -> float:
    taus = []
    by_task: dict[int, list[int]] = {}
    for n in rows:
        if table.correct[n] and np.isfinite(table.time_ms[n, time_col]):
            by_task.setdefault(int(table.task_row[n]), []).append(int(n))
    for r in by_task.values():
        t = table.time_ms[r, time_col]
        if len(r) < 2 or np.ptp(t) == 0:
            continue
        tau = stats.kendalltau(s[r], -t).statistic
        if np.isfinite(tau):
            taus.append(tau)
    return float(np.mean(taus)) if taus else math.nan


def best_of_n(table: ImplTable, rows: np.ndarray, s: np.ndarray, speedup: np.ndarray, n: int = 8,
              seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    by_task: dict[int, list[int]] = {}
    for r in rows:
        by_task.setdefault(int(table.task_row[r]), []).append(int(r))
    logs = {k: [] for k in ("pick", "pick_verified", "oracle", "random")}
    correct_picks = 0
    for cand in by_task.values():
        if len(cand) > n:
            cand = list(rng.choice(cand, size=n, replace=False))
        sp = speedup[cand]
        ok = np.isfinite(sp) & (sp > 0)
        if not ok.any():
            continue
        worst = sp[ok].min()
        eff = np.where(ok, sp, worst)
        pick = int(np.argmax(s[cand]))
        correct_picks += int(ok[pick])
        good = np.flatnonzero(ok)
        logs["pick"].append(math.log(eff[pick]))
        logs["pick_verified"].append(math.log(sp[good[np.argmax(s[np.array(cand)[good]])]]))
        logs["oracle"].append(math.log(sp[ok].max()))
        logs["random"].append(float(np.mean(np.log(eff))))
    g = {k: float(math.exp(np.mean(v))) if v else math.nan for k, v in logs.items()}
    return {"n": n, "tasks": len(logs["pick"]), "geomean_speedup": g,
            "pick_over_oracle": g["pick"] / g["oracle"] if logs["pick"] else math.nan,
            "verified_pick_over_oracle": g["pick_verified"] / g["oracle"] if logs["pick"] else math.nan,
            "random_over_oracle": g["random"] / g["oracle"] if logs["pick"] else math.nan,
            "correct_pick_rate": correct_picks / len(logs["pick"]) if logs["pick"] else math.nan}


def evaluate(table: ImplTable, pairs: Pairs, s: np.ndarray, speedup: np.ndarray, rows: np.ndarray, n: int = 8,
             seed: int = 0) -> dict:
    return {"pairwise_accuracy": pairwise(pairs, s), "kendall_tau": kendall(table, rows, s),
            "best_of_n": best_of_n(table, rows, s, speedup, n, seed)}


def table_text(results: dict) -> str:
    """results: {split: {scorer: evaluate(...)}} -> a fixed-width table."""
    head = (f"{'split':6s} {'scorer':16s} {'pairs':>6s} {'acc':>6s} {'speed':>6s} {'c>w':>6s} {'tau':>6s} "
            f"{'bestN':>6s} {'verif':>6s} {'rand':>6s} {'oracle':>7s} {'pick%':>6s}")
    lines = [head]
    for split, by in results.items():
        for name, m in by.items():
            pa, b = m["pairwise_accuracy"], m["best_of_n"]
            lines.append(f"{split:6s} {name:16s} {pa['n']:6d} {pa['all']:6.3f} {pa['speed']:6.3f} "
                         f"{pa['correct_vs_wrong']:6.3f} {m['kendall_tau']:6.3f} {b['pick_over_oracle']:6.3f} "
                         f"{b['verified_pick_over_oracle']:6.3f} {b['random_over_oracle']:6.3f} "
                         f"{b['geomean_speedup']['oracle']:6.2f}x {b['correct_pick_rate']:6.3f}")
    lines.append("acc: pairwise accuracy (speed: faster-correct pairs, c>w: correct vs labelled-wrong); tau: Kendall "
                 "within task; bestN / verif / rand: geomean speedup of the pick (unverified / among correct) and of "
                 "a random pick over the oracle's; pick%: share of picks that are correct")
    return "\n".join(lines)


def plot(results: dict, curve: list, path) -> None:
    """Pairwise accuracy and best-of-n per scorer and split, and the training loss curve (PNG)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    splits = list(results)
    scorers = list(next(iter(results.values()))) if results else []
    width = 0.8 / max(1, len(scorers))
    for j, name in enumerate(scorers):
        xs = np.arange(len(splits)) + j * width
        axes[0].bar(xs, [results[s][name]["pairwise_accuracy"]["all"] for s in splits], width, label=name)
        axes[1].bar(xs, [results[s][name]["best_of_n"]["pick_over_oracle"] for s in splits], width, label=name)
    for ax, title in ((axes[0], "pairwise accuracy"), (axes[1], "best-of-n pick / oracle (geomean speedup)")):
        ax.set_xticks(np.arange(len(splits)) + 0.4 - width / 2, splits)
        ax.set_ylim(0, 1)
        ax.set_title(title)
        ax.legend(fontsize=8)
    axes[1].axhline(0.8, color="k", linewidth=0.8, linestyle="--")
    if curve:
        steps, loss = zip(*curve)
        axes[2].plot(steps, loss)
        axes[2].set_xlabel("step")
        axes[2].set_title("training loss (Bradley-Terry)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
