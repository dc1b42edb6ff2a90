"""The run plots a newcomer reads: whole-number steps, no point before step 0, labelled axes, a sentence in an empty
panel, bar values written. Each figure is caught as it is saved and its artists inspected."""
import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")
from matplotlib.figure import Figure


@pytest.fixture()
def saved(monkeypatch):
    figs = []
    real = Figure.savefig

    def keep(self, path, *a, **kw):
        figs.append(self)
        return real(self, path, *a, **kw)
    monkeypatch.setattr(Figure, "savefig", keep)
    return figs


def _texts(ax):
    return [t.get_text() for t in ax.texts]


def _whole_ticks(ax):
    ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
    return ticks and all(float(t).is_integer() for t in ticks)


def test_sft_losses(saved, tmp_path):
    from cudaperf_jax.sft.report import plot_losses
    rows = [{"step": 0, "loss": 1.2, "lr": 2e-5, "val_loss_initial": 1.1}, {"step": 1, "loss": 1.0, "lr": 2e-5,
                                                                           "val_loss": 0.95}]
    assert plot_losses(rows, tmp_path / "loss.png").stat().st_size > 1000
    ax = saved[-1].axes[0]
    xs = np.concatenate([line.get_xdata() for line in ax.lines])
    assert xs.min() == 0 and _whole_ticks(ax) and ax.get_ylabel()
    val = next(line for line in ax.lines if line.get_label() == "val loss")
    assert list(val.get_xdata()) == [0, 2]           # before training, then after the second update
    assert "learning rate 2e-05" in ax.get_title() and len(saved[-1].axes) == 1   # constant rate: no second axis


def test_rl_curves_say_when_nothing_was_correct(saved, tmp_path):
    from cudaperf_jax.rl.plots import plot_metrics
    m = [{"step": s, "groups": 2, "turn0/reward/total": -0.1 + s, "turn0/compiled": 0.5, "turn0/correct": 0.0}
         for s in range(2)]
    plot_metrics(m, 1, tmp_path / "rl.png")
    axes = saved[-1].axes
    assert all(_whole_ticks(ax) and ax.get_ylabel() for ax in axes)
    assert not _texts(axes[0]) and "0 at every step" in _texts(axes[2])[0]
    plot_metrics(m[:1], 1, tmp_path / "rl1.png")   # one step (the demo's RL stage): still whole-number ticks
    assert all(_whole_ticks(ax) for ax in saved[-1].axes)


def test_eval_turns_and_demo_bars(saved, tmp_path):
    from cudaperf_jax.eval.report import plot_turns
    from experiments.demo_stages import _plot
    plot_turns({"tasks": 2, "candidates": 8, "per_turn": [{"turn": 0, "correct": 0.0}, {"turn": 1, "correct": 0.0}]},
               tmp_path / "turns.png")
    ax = saved[-1].axes[0]
    assert _whole_ticks(ax) and ax.get_ylim()[0] < 0 and "no task had a correct candidate" in _texts(ax)[0]
    _plot({"start/turn0": {"n": 2, "compiled": 0.5, "correct": 0.0, "reward": 0.0},
           "rl/turn0": {"n": 2, "compiled": 1.0, "correct": 0.5, "reward": 0.25}}, tmp_path / "eval.png")
    reward, correct = saved[-1].axes
    assert _texts(reward) == ["0.000", "0.250"] and _texts(correct)[:2] == ["0.00", "0.50"]   # zero bars show 0
    assert reward.get_ylabel() == "mean reward" and "2 candidates per bar" in saved[-1]._suptitle.get_text()
