"""What every PNG of a run shares: matplotlib without a display, whole-number step axes, bars whose value is written
(a zero bar is seen), and a sentence where a panel has nothing to draw.

    plt = pyplot()                         # None without matplotlib: the caller writes no PNG
    integer_ticks(ax)                      # steps, turns: 0, 1, 2 (never 0.2, 0.4)
    bars(ax, ["start/turn0", "rl/turn0"], [0.0, 0.5], ylabel="fraction correct", fmt="{:.2f}")
    empty_note(ax, "no candidate was correct")
"""
from __future__ import annotations

import math


def pyplot():
    """matplotlib.pyplot on the Agg backend, or None where matplotlib is not installed."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def integer_ticks(ax, axis: str = "x") -> None:
    """Ticks only at whole numbers on `axis` ("x" or "y")."""
    from matplotlib.ticker import MaxNLocator
    # min_n_ticks=1: a single step (one RL step of the demo) has the view [-0.05, 0.05], where asking for two
    # ticks made the locator fall back to -0.045, -0.03, ...
    (ax.xaxis if axis == "x" else ax.yaxis).set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))


def bars(ax, labels: list[str], values: list[float], *, ylabel: str, fmt: str = "{:.2f}", ylim=None,
         color: str = "tab:blue") -> None:
    """A bar per label with its value written above it (a bar of height 0 shows as its value on the axis)."""
    xs = list(range(len(labels)))
    ax.bar(xs, values, color=color)
    lo, hi = ylim if ylim is not None else (min(0.0, *values), max(1e-9, *values))
    pad = (hi - lo) * 0.12 or 0.1
    ax.set_ylim(lo - (pad if lo < 0 else 0.0), hi + pad)
    for x, v in zip(xs, values):
        if v is None or (isinstance(v, float) and math.isnan(v)):
            continue
        ax.annotate(fmt.format(v), (x, max(v, 0.0)), textcoords="offset points", xytext=(0, 2), ha="center",
                    va="bottom", fontsize=7)
    ax.set_xticks(xs, labels, rotation=30, ha="right", fontsize=7)
    ax.set_ylabel(ylabel)
    ax.axhline(0.0, color="black", lw=0.6)


def empty_note(ax, text: str) -> None:
    """A sentence in the middle of a panel that has nothing to draw."""
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", fontsize=9, color="dimgray", wrap=True)
