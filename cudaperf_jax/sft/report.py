"""The end of an SFT run: the loss curve as a PNG and the summary dict (also summary.json)."""
from __future__ import annotations

from pathlib import Path

import numpy as np


def plot_losses(rows: list[dict], path: Path) -> Path | None:
    """Train loss per step (and its running mean), val loss where evaluated, learning rate; None without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    train = [(r["step"], r["loss"]) for r in rows if "loss" in r]
    val = [(r["step"], r["val_loss"]) for r in rows if "val_loss" in r]
    if not train:
        return None
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    s, l = map(np.asarray, zip(*train))
    ax.plot(s, l, color="tab:blue", alpha=0.35, lw=1, label="train loss")
    k = max(1, len(l) // 20)
    if k > 1:
        ax.plot(s[k - 1:], np.convolve(l, np.ones(k) / k, mode="valid"), color="tab:blue", lw=1.8,
                label=f"train (mean of {k})")
    initial = [r["val_loss_initial"] for r in rows if "val_loss_initial" in r]
    if val or initial:
        vs, vl = (list(map(list, zip(*val))) if val else ([], []))
        if initial:
            vs, vl = [-1, *vs], [initial[0], *vl]
        ax.plot(vs, vl, "o-", color="tab:orange", lw=1.5, ms=4, label="val loss")
    ax.set_xlabel("step")
    ax.set_ylabel("nll per response token")
    ax.set_title("SFT warm start")
    lr = [(r["step"], r["lr"]) for r in rows if "lr" in r]
    if lr:
        ax2 = ax.twinx()
        ax2.plot(*zip(*lr), color="tab:gray", lw=0.8, ls="--")
        ax2.set_ylabel("learning rate", color="tab:gray")
    ax.legend(fontsize=8, loc="upper right")
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
