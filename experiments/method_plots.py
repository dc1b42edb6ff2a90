"""The method chain's plots (experiments/method_report.py): per stage, per turn, the RL curves and the SFT losses.

    paths = plot_all(results, plan, out)   # out/stages.png, turns.png, rl_curves.png, sft_loss.png (those with data)
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from experiments.method_plan import Plan

BARS = ("correct", "fast_1", "fast_1/compile", "fast_1.5")


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _suites(results: dict, plan: Plan) -> list[str]:
    have = {c["suite"] for c in results["cells"]}
    return [s for s in plan.evals.suites if s in have]


def plot_stages(results: dict, plan: Plan, path: Path) -> Path | None:
    """Per suite: each policy's correct, fast_1 (eager, compile) and fast_1.5 at the last turn, 95% intervals."""
    suites = _suites(results, plan)
    if not suites:
        return None
    plt = _plt()
    fig, axes = plt.subplots(1, len(suites), figsize=(5.2 * len(suites), 3.8), squeeze=False)
    for ax, suite in zip(axes[0], suites):
        cells = [c for c in results["cells"] if c["suite"] == suite]
        x = np.arange(len(cells))
        w = 0.8 / len(BARS)
        for j, m in enumerate(BARS):
            vals = [c["per_turn"][-1][m] for c in cells]
            v = np.array([d["value"] for d in vals])
            err = np.array([[d["value"] - d["low"] for d in vals], [d["high"] - d["value"] for d in vals]])
            ax.bar(x + (j - 1.5) * w, v, w, yerr=np.clip(err, 0, None), capsize=2, label=m)
        ax.set_xticks(x, [c["role"] + ("" if c["complete"] else "*") for c in cells], rotation=20, fontsize=8)
        ax.set_ylim(0, 1)
        ax.set_title(f"{suite}: last turn (* partial)", fontsize=9)
        ax.set_ylabel("share of problems")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_turns(results: dict, plan: Plan, path: Path) -> Path | None:
    """Per suite: correct (solid, 95% band) and fast_1 (dashed) by turn, one colour per policy."""
    suites = _suites(results, plan)
    if not suites:
        return None
    plt = _plt()
    fig, axes = plt.subplots(1, len(suites), figsize=(5 * len(suites), 3.6), squeeze=False)
    for ax, suite in zip(axes[0], suites):
        for i, c in enumerate(c for c in results["cells"] if c["suite"] == suite):
            turns = [r["turn"] for r in c["per_turn"]]
            col = f"C{i}"
            v = [r["correct"]["value"] for r in c["per_turn"]]
            ax.plot(turns, v, "o-", color=col, label=c["role"])
            ax.fill_between(turns, [r["correct"]["low"] for r in c["per_turn"]],
                            [r["correct"]["high"] for r in c["per_turn"]], color=col, alpha=0.15)
            ax.plot(turns, [r["fast_1"]["value"] for r in c["per_turn"]], "s--", color=col, alpha=0.7)
        ax.set_xticks(range(plan.evals.turns))
        ax.set_xlabel("turn")
        ax.set_ylim(0, 1)
        ax.set_title(f"{suite}: correct (solid) and fast_1 (dashed)", fontsize=9)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _smooth(y: list, k: int = 5) -> np.ndarray:
    y = np.asarray([np.nan if v is None else v for v in y], float)
    if len(y) < k:
        return y
    return np.convolve(np.nan_to_num(y), np.ones(k) / k, mode="same")


def plot_rl(results: dict, path: Path) -> Path | None:
    """Per RL run and step: mean reward, correct per turn, the share of groups with equal rewards, KL."""
    runs = results["rl"]
    if not runs:
        return None
    plt = _plt()
    fig, ax = plt.subplots(2, 2, figsize=(10, 6.4))
    for i, (name, r) in enumerate(runs.items()):
        col, steps = f"C{i}", [p["step"] for p in r["curve"]]
        ax[0, 0].plot(steps, [p["reward/total"] for p in r["curve"]], color=col, alpha=0.3)
        ax[0, 0].plot(steps, _smooth([p["reward/total"] for p in r["curve"]]), color=col, label=name)
        for u, style in zip(range(len(r["correct_last10"])), ("-", "--", ":")):
            ax[0, 1].plot(steps, _smooth([p.get(f"turn{u}/correct") for p in r["curve"]]), style, color=col,
                          label=f"{name} turn {u}")
        ax[1, 0].plot(steps, [p["equal_groups"] / max(p["groups"], 1) for p in r["curve"]], color=col, label=name)
        ax[1, 1].plot(steps, [p.get("kl") for p in r["curve"]], color=col, label=name)
    for a, title in zip(ax.flat, ("mean reward (line: mean of 5 steps)", "correct per turn (mean of 5 steps)",
                                  "share of (task, turn) groups with equal rewards", "KL to the SFT policy (k3)")):
        a.set_title(title, fontsize=9)
        a.set_xlabel("RL step")
        a.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_sft(results: dict, path: Path) -> Path | None:
    sft = results["sft"]
    if not sft:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 3.4))
    c = sft["curve"]
    ax.plot([p["step"] for p in c], [p["loss"] for p in c], color="C0", alpha=0.5, label="train loss")
    val = [(p["step"], p["val_loss"]) for p in c if p.get("val_loss") is not None]
    if val:
        ax.plot(*zip(*val), "o-", color="C1", label="val loss")
    if sft.get("stopped_early_at") is not None:
        ax.axvline(sft["stopped_early_at"], color="gray", ls=":", label="early stop")
    ax.set_xlabel("SFT step")
    ax.set_ylabel("nll per response token")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_all(results: dict, plan: Plan, out: Path) -> list[Path]:
    drawn = [plot_stages(results, plan, out / "stages.png"), plot_turns(results, plan, out / "turns.png"),
             plot_rl(results, out / "rl_curves.png"), plot_sft(results, out / "sft_loss.png")]
    return [p for p in drawn if p is not None]
