"""The end of an SFT run: the loss curve as a PNG and the summary dict (also summary.json)."""
from __future__ import annotations

from pathlib import Path

import numpy as np


def plot_losses(rows: list[dict], path: Path) -> Path | None:
    """Train loss per step (and its running mean), val loss where evaluated, learning rate; None without matplotlib.

    x is the number of optimizer updates done: step s's train loss is measured before its update (x = s), the val
    loss evaluated after step s at x = s + 1, and the val loss before training (val_loss_initial) at x = 0."""
    from cudaperf_jax.experiment.plotting import integer_ticks, pyplot
    plt = pyplot()
    train = [(r["step"], r["loss"]) for r in rows if "loss" in r]
    if plt is None or not train:
        return None
    val = [(r["step"] + 1, r["val_loss"]) for r in rows if "val_loss" in r]
    initial = [r["val_loss_initial"] for r in rows if "val_loss_initial" in r]
    if initial:
        val = [(0, initial[0]), *val]
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    s, l = map(np.asarray, zip(*train))
    ax.plot(s, l, "o-" if len(s) < 30 else "-", color="tab:blue", alpha=0.5 if len(s) >= 30 else 0.9, lw=1, ms=4,
            label="train loss (step's batch, before its update)")
    k = max(1, len(l) // 20)
    if k > 1:
        ax.plot(s[k - 1:], np.convolve(l, np.ones(k) / k, mode="valid"), color="tab:blue", lw=1.8,
                label=f"train (mean of {k})")
    if val:
        ax.plot(*zip(*val), "s--", color="tab:orange", lw=1.5, ms=5, label="val loss")
    ax.set_xlabel("optimizer updates done")
    ax.set_ylabel("loss (nll per response token)")
    ax.set_title(f"SFT warm start: {len(train)} step{'' if len(train) == 1 else 's'}")
    integer_ticks(ax)
    lr = [(r["step"], r["lr"]) for r in rows if "lr" in r]
    if len({v for _, v in lr}) == 1:   # a constant rate: said in the title, no second axis
        ax.set_title(f"{ax.get_title()}, learning rate {lr[0][1]:.2g}")
    elif lr:
        ax2 = ax.twinx()
        ax2.plot(*zip(*lr), color="tab:gray", lw=0.8, ls=":")
        ax2.set_ylabel("learning rate (dotted)", color="tab:gray")
        ax2.tick_params(axis="y", colors="tab:gray", labelsize=7)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def summarize(rows: list[dict], data_stats: dict, extra: dict) -> dict:
    """Summary of the run from its metric rows: first/last train loss (mean of the last 10), val losses, tokens."""
    train = [r["loss"] for r in rows if "loss" in r]
    val = [(r["step"], r["val_loss"]) for r in rows if "val_loss" in r]
    initial = [r["val_loss_initial"] for r in rows if "val_loss_initial" in r]
    tps = [r["tokens_per_s"] for r in rows[1:] if "tokens_per_s" in r]  # the first step includes compilation
    return {
        "steps": len(train),
        "train_loss_first": train[0] if train else None,
        "train_loss_last10": float(np.mean(train[-10:])) if train else None,
        "val_loss_initial": initial[0] if initial else None,
        "val_loss_final": val[-1][1] if val else None,
        "val_loss_best": min(v for _, v in val) if val else None,
        "response_tokens_trained": int(sum(r.get("tokens", 0) for r in rows)),
        "tokens_per_s_median": float(np.median(tps)) if tps else None,
        "data": data_stats, **extra,
    }
