"""Implementations with their labels and measured times, and the training pairs drawn from them.

    table = implementations(tasks, measured)                 # one row per implementation
    p = make_pairs(table, split="train", margin=1.1)         # Pairs: winner/loser rows, kind, weight
    idx = p.sample(rng, 64)                                  # family-balanced batch of pair indices

A pair is (winner, loser) within one task: a correct implementation beats a labelled-wrong one
(kind "correct_vs_wrong"), and of two correct ones the faster wins where the slower takes at least
`margin` times as long (kind "speed"; near-ties are dropped). "Correct" is the label AND agreement
with the baseline's outputs on every measured config. Time is the median on the task's largest config
(`time_config="largest"`) or the geometric mean over the configs both ran (`"geomean"`).
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

KINDS = ("speed", "correct_vs_wrong")


@dataclasses.dataclass
class ImplTable:
    """Rows of implementations. Arrays of length N (rows); `tasks` is the list of Task objects."""
    tasks: list
    task_row: np.ndarray      # int32 [N]   index into tasks
    impl: list                # [N] implementation names
    source: list              # [N] CUDA sources
    family: np.ndarray        # str [N]
    split: np.ndarray         # str [N]
    correct: np.ndarray       # bool [N]   labelled correct and agreeing with the baseline
    wrong: np.ndarray         # bool [N]   labelled wrong
    time_ms: np.ndarray       # float64 [N, C]  NaN where not timed
    baseline: np.ndarray      # bool [N]

    def __len__(self) -> int:
        return len(self.impl)

    def speedup(self, time_config: str = "largest") -> np.ndarray:
        """float64 [N]: the task baseline's time / this implementation's (NaN unless correct and timed)."""
        out = np.full(len(self), np.nan)
        base = {int(t): n for n, t in enumerate(self.task_row) if self.baseline[n]}
        for n in range(len(self)):
            b = base.get(int(self.task_row[n]))
            if b is not None and self.correct[n]:
                r = time_ratio(self.time_ms[b], self.time_ms[n], time_config)
                out[n] = r
        return out


def time_ratio(t_slow: np.ndarray, t_fast: np.ndarray, time_config: str = "largest") -> float:
    """t_slow / t_fast on the largest config, or the geometric mean over configs both ran (NaN if none)."""
    if time_config == "largest":
        a, b = t_slow[-1], t_fast[-1]
        return float(a / b) if (a > 0 and b > 0) else math.nan
    ok = (t_slow > 0) & (t_fast > 0)
    return float(np.exp(np.mean(np.log(t_slow[ok] / t_fast[ok])))) if ok.any() else math.nan


def implementations(tasks: list, measured) -> ImplTable:
    """One row per implementation of `tasks` that has measured times (MeasuredTimes of datasets.times)."""
    row_of = {tid: k for k, tid in enumerate(measured.index["task"])}
    cols: dict = {k: [] for k in ("task_row", "impl", "source", "family", "split", "correct", "wrong", "time", "base")}
    kept = []
    for task in tasks:
        r = row_of.get(task.id)
        if r is None:
            continue
        names = measured.index["impls"][r]
        ti = len(kept)
        kept.append(task)
        for impl in task.implementations:
            if impl.name not in names:
                continue
            i = names.index(impl.name)
            times = measured.time_ms[r, i].astype(np.float64)
            agrees = measured.agrees[r, i]
            ok = impl.expected == "correct" and not (agrees == 0).any() and np.isfinite(times).any()
            cols["task_row"].append(ti)
            cols["impl"].append(impl.name)
            cols["source"].append(impl.source)
            cols["family"].append(task.family)
            cols["split"].append(task.split)
            cols["correct"].append(ok)
            cols["wrong"].append(impl.expected != "correct")
            cols["time"].append(times)
            cols["base"].append(bool(impl.baseline))
    c = max((len(t) for t in cols["time"]), default=1)
    time_ms = np.full((len(cols["time"]), c), np.nan)
    for n, t in enumerate(cols["time"]):
        time_ms[n, :len(t)] = t
    return ImplTable(tasks=kept, task_row=np.array(cols["task_row"], np.int32), impl=cols["impl"],
                     source=cols["source"], family=np.array(cols["family"]), split=np.array(cols["split"]),
                     correct=np.array(cols["correct"], bool), wrong=np.array(cols["wrong"], bool),
                     time_ms=time_ms, baseline=np.array(cols["base"], bool))


@dataclasses.dataclass
class Pairs:
    """win, lose: int32 [P] rows of the ImplTable; kind int8 [P] (index into KINDS); ratio float32 [P]
    (slow / fast time, 0 for correct_vs_wrong); family str [P]; task int32 [P]."""
    win: np.ndarray
    lose: np.ndarray
    kind: np.ndarray
    ratio: np.ndarray
    family: np.ndarray
    task: np.ndarray

    def __len__(self) -> int:
        return len(self.win)

    def weights(self, mode: str = "none") -> np.ndarray:
        """float32 [P]: 1 ("none"), or for speed pairs log(ratio) / mean log(ratio) ("log_ratio")."""
        w = np.ones(len(self), np.float32)
        if mode == "log_ratio":
            speed = self.kind == 0
            if speed.any():
                lr = np.log(np.maximum(self.ratio[speed], 1.0))
                w[speed] = lr / max(float(lr.mean()), 1e-6)
        elif mode != "none":
            raise ValueError(f"unknown pair weighting {mode!r}; use 'none' or 'log_ratio'")
        return w

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """int64 [n]: pair indices, families equally likely, pairs uniform within a family."""
        fams, inv, counts = np.unique(self.family, return_inverse=True, return_counts=True)
        p = 1.0 / (counts[inv] * len(fams))
        return rng.choice(len(self), size=n, p=p / p.sum())


def make_pairs(table: ImplTable, split: str | None = None, margin: float = 1.1, time_config: str = "largest",
               kinds: tuple = KINDS) -> Pairs:
    """Every qualifying pair within a task of `split` (None: all rows)."""
    if margin < 1.0:
        raise ValueError(f"margin must be >= 1 (a time ratio), got {margin}")
    sel = np.ones(len(table), bool) if split is None else table.split == split
    by_task: dict[int, list[int]] = {}
    for n in np.flatnonzero(sel):
        by_task.setdefault(int(table.task_row[n]), []).append(int(n))
    out: dict = {k: [] for k in ("win", "lose", "kind", "ratio", "family", "task")}

    def add(w, lo, kind, ratio, t):
        out["win"].append(w)
        out["lose"].append(lo)
        out["kind"].append(kind)
        out["ratio"].append(ratio)
        out["family"].append(table.family[w])
        out["task"].append(t)
    for t, rows in by_task.items():
        good = [n for n in rows if table.correct[n]]
        bad = [n for n in rows if table.wrong[n]]
        if "speed" in kinds:
            for a_i, a in enumerate(good):
                for b in good[a_i + 1:]:
                    r = time_ratio(table.time_ms[b], table.time_ms[a], time_config)  # > 1: a is faster
                    if not np.isfinite(r):
                        continue
                    if r >= margin:
                        add(a, b, 0, r, t)
                    elif 1.0 / r >= margin:
                        add(b, a, 0, 1.0 / r, t)
        if "correct_vs_wrong" in kinds:
            for g in good:
                for b in bad:
                    add(g, b, 1, 0.0, t)
    return Pairs(win=np.array(out["win"], np.int32), lose=np.array(out["lose"], np.int32),
                 kind=np.array(out["kind"], np.int8), ratio=np.array(out["ratio"], np.float32),
                 family=np.array(out["family"], dtype=str), task=np.array(out["task"], np.int32))
