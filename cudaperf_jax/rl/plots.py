"""The curves of an RL run: rl_curves.png beside metrics.jsonl.

    plot_metrics(run.metrics(), turns=2, path=workdir / "rl_curves.png")
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from cudaperf_jax.experiment.plotting import empty_note, integer_ticks, pyplot

PANELS = (("reward/total", "mean reward", None), ("compiled", "fraction compiled", (-0.04, 1.04)),
          ("correct", "fraction correct", (-0.04, 1.04)))


def plot_metrics(metrics: list[dict], turns: int, path: Path) -> Path | None:
    """Mean reward, fraction compiled and fraction correct per RL step, one line per turn; None without metrics or
    matplotlib. A panel whose values are all 0 says so in a sentence (the line lies on the axis)."""
    plt = pyplot()
    if plt is None or not metrics:
        return None
    fig, axes = plt.subplots(1, len(PANELS), figsize=(11, 3.3))
    steps = [m["step"] for m in metrics]
    for ax, (key, label, ylim) in zip(axes, PANELS):
        values = []
        for t in range(turns):
            v = [m.get(f"turn{t}/{key}", np.nan) for m in metrics]
            values += v
            ax.plot(steps, v, marker="o", ms=4, label=f"turn {t}")
        ax.set_ylabel(label)
        ax.set_xlabel("RL step")
        integer_ticks(ax)
        if ylim:
            ax.set_ylim(*ylim)
        ax.axhline(0.0, color="black", lw=0.5)
        finite = [x for x in values if np.isfinite(x)]
        if finite and not any(finite):
            empty_note(ax, f"{label}: 0 at every step and turn")
        ax.legend(fontsize=7, loc="upper left")
    n = metrics[-1].get("groups")
    fig.suptitle(f"RL: {len(metrics)} step{'s' * (len(metrics) != 1)}" + (f", {n} (turn, task) groups a step" if n else ""),
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)
