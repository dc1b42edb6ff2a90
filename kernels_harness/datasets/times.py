"""Measured times of the dataset's implementations: a tensorstore zarr store with its provenance.

Store layout (written by kernels_harness.datasets.measure):

    times/time_ms     zarr float64 [T, I, C]  median ms of implementation i of task t on config c (NaN: none)
    times/iqr_ms      zarr float64 [T, I, C]  inter-quartile range of the repetitions
    times/agrees      zarr int8    [T, I, C]  1 output matches the baseline's, 0 it does not, -1 unknown
    times/index.json  task ids, families, tracks, splits, implementation names, strategies, expected
                      labels, baseline index and config names per task
    times/provenance.json  GPU, driver, CUDA, nvcc, date, command, build statistics

    m = load("data/times/h200")
    m.time("gemm_3_nn_set_square_float32", "register_blocked", 2)       # ms or None
    m.speedups()   # [(task, impl, config, strategies, speedup over baseline)] for correct, agreeing impls
"""
from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np

from kernels_harness.tasks.errors import TaskError

ARRAYS = {"time_ms": "float64", "iqr_ms": "float64", "agrees": "int8"}


def iter_results(path: str | Path):
    """The task records of a results.jsonl in file order (unreadable lines skipped; none if it is missing)."""
    p = Path(path)
    if not p.is_file():
        return
    for line in p.read_text().splitlines():
        try:
            r = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(r, dict) and "task" in r:
            yield r


def read_results(path: str | Path) -> list[dict]:
    """The measured records of results.jsonl (last record per task wins; fatal stubs dropped)."""
    recs: dict[str, dict] = {r["task"]: r for r in iter_results(path) if "time_ms" in r}
    return list(recs.values())


def _dense(records: list[dict]) -> dict[str, np.ndarray]:
    T = len(records)
    I = max((len(r["impls"]) for r in records), default=1)
    C = max((len(r["configs"]) for r in records), default=1)
    out = {"time_ms": np.full((T, I, C), np.nan), "iqr_ms": np.full((T, I, C), np.nan),
           "agrees": np.full((T, I, C), -1, dtype=np.int8)}
    for t, r in enumerate(records):
        for c in range(len(r["time_ms"])):
            for i in range(len(r["impls"])):
                v = r["time_ms"][c][i]
                if v is not None:
                    out["time_ms"][t, i, c] = v
                q = r["iqr_ms"][c][i] if "iqr_ms" in r else None  # plots pass records without spreads
                if q is not None:
                    out["iqr_ms"][t, i, c] = q
                a = r["agrees"][c][i]
                if a is not None:
                    out["agrees"][t, i, c] = int(bool(a))
    return out


def _index(records: list[dict]) -> dict:
    keys = ("task", "family", "track", "split", "impls", "strategies", "expected", "baseline", "configs")
    return {k: [r.get(k) for r in records] for k in keys}


def write_store(records: list[dict], root: str | Path, provenance: dict) -> Path:
    """Writes the zarr arrays (tensorstore), index.json and provenance.json under root."""
    import tensorstore as ts
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    dense = _dense(records)
    for name, arr in dense.items():
        spec = {"driver": "zarr", "kvstore": {"driver": "file", "path": str(root / name)},
                "metadata": {"dtype": np.dtype(ARRAYS[name]).str, "shape": list(arr.shape),
                             "chunks": [max(1, min(arr.shape[0], 1024)), arr.shape[1], arr.shape[2]]}}
        store = ts.open(spec, create=True, delete_existing=True).result()
        store.write(arr.astype(ARRAYS[name])).result()
    (root / "index.json").write_text(json.dumps(_index(records)))
    (root / "provenance.json").write_text(json.dumps(provenance, indent=1))
    return root


@dataclasses.dataclass
class MeasuredTimes:
    """Measured times: arrays [T, I, C] and the index that names their axes."""
    time_ms: np.ndarray
    iqr_ms: np.ndarray
    agrees: np.ndarray
    index: dict
    provenance: dict

    def __post_init__(self):
        self._row = {tid: k for k, tid in enumerate(self.index["task"])}

    def __len__(self) -> int:
        return len(self.index["task"])

    def tasks(self) -> list[str]:
        return list(self.index["task"])

    def time(self, task_id: str, impl: str, config: int) -> float | None:
        t = self._row.get(task_id)
        if t is None or impl not in self.index["impls"][t]:
            return None
        v = self.time_ms[t, self.index["impls"][t].index(impl), config]
        return None if math.isnan(v) else float(v)

    def speedups(self, only_agreeing: bool = True) -> list[tuple]:
        """(task, impl, config, strategies, speedup = baseline ms / impl ms) for correct-labelled impls."""
        return speedups_from(self.index, self.time_ms, self.agrees, only_agreeing)


def speedups_from(index: dict, time_ms: np.ndarray, agrees: np.ndarray, only_agreeing: bool = True) -> list[tuple]:
    out = []
    for t, tid in enumerate(index["task"]):
        b = index["baseline"][t] or 0
        for i, name in enumerate(index["impls"][t]):
            if i == b or index["expected"][t][i] != "correct":
                continue
            for c in range(time_ms.shape[2]):
                tb, ti = time_ms[t, b, c], time_ms[t, i, c]
                if math.isnan(tb) or math.isnan(ti) or ti <= 0:
                    continue
                if only_agreeing and agrees[t, i, c] != 1:
                    continue
                out.append((tid, name, c, tuple(index["strategies"][t][i]), float(tb / ti)))
    return out


def load(root: str | Path) -> MeasuredTimes:
    """Opens a store written by write_store (tensorstore zarr)."""
    import tensorstore as ts
    root = Path(root)
    if not (root / "index.json").is_file():
        raise TaskError(f"{root} holds no measured times (index.json missing); run "
                        "`python -m kernels_harness.datasets.measure --out DIR` on a GPU and copy DIR/times here")
    arrays = {}
    for name in ARRAYS:
        store = ts.open({"driver": "zarr", "kvstore": {"driver": "file", "path": str(root / name)}}).result()
        arrays[name] = store.read().result()
    prov = json.loads((root / "provenance.json").read_text()) if (root / "provenance.json").is_file() else {}
    return MeasuredTimes(index=json.loads((root / "index.json").read_text()), provenance=prov, **arrays)


def plot_speedups(records: list[dict], path: str | Path) -> Path | None:
    """Histogram of log2(speedup over baseline) per leading strategy (PNG)."""
    dense = _dense(records)
    sp = speedups_from(_index(records), dense["time_ms"], dense["agrees"])
    if not sp:
        return None
    groups: dict[str, list[float]] = {}
    for _, _, _, strat, s in sp:
        groups.setdefault(strat[0] if strat else "other", []).append(math.log2(s))
    return plot_histograms(dict(sorted(groups.items(), key=lambda kv: -len(kv[1]))), path, (-6, 8, 57),
                           "log2(speedup over the baseline implementation)", "(implementation, config) pairs",
                           "Measured speedups of the dataset's implementations", figsize=(8, 4.5))


def plot_histograms(groups: dict, path: str | Path, bins: tuple, xlabel: str, ylabel: str, title: str,
                    figsize=(7, 4)) -> Path:
    """Step histograms of groups {label: [values]} (clipped to the bins' range (lo, hi, n edges)) as a PNG."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    lo, hi, n = bins
    edges = np.linspace(lo, hi, n)
    fig, ax = plt.subplots(figsize=figsize)
    for name, vals in groups.items():
        ax.hist(np.clip(vals, lo, hi), bins=edges, histtype="step", linewidth=1.5, label=f"{name} ({len(vals)})")
    ax.axvline(0, color="k", linewidth=0.8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)


def table(records: list[dict], provenance: dict | None = None) -> str:
    """Per family: tasks, implementations timed, agreement of correct ones, detected negatives, median speedup."""
    dense = _dense(records)
    sp = speedups_from(_index(records), dense["time_ms"], dense["agrees"])
    by_task_fam = {r["task"]: r["family"] for r in records}
    fam_sp: dict[str, list[float]] = {}
    for tid, _, c, _, s in sp:
        fam_sp.setdefault(by_task_fam[tid], []).append(s)
    rows = {}
    for t, r in enumerate(records):
        f = rows.setdefault(r["family"], {"tasks": 0, "timed": 0, "agree": 0, "checked": 0, "neg": 0, "neg_caught": 0})
        f["tasks"] += 1
        for i, exp in enumerate(r["expected"]):
            a = dense["agrees"][t, i]
            timed = ~np.isnan(dense["time_ms"][t, i])
            f["timed"] += int(timed.any())
            if exp == "correct" and i != r["baseline"]:
                f["checked"] += int((a >= 0).any())
                f["agree"] += int((a >= 0).any() and (a[a >= 0] == 1).all())
            elif exp != "correct":
                f["neg"] += 1
                f["neg_caught"] += int((a == 0).any())
    gpu = (provenance or {}).get("gpu", "?")
    lines = [f"measured on {gpu}: {len(records)} tasks",
             f"{'family':20s} {'tasks':>5s} {'impls':>6s} {'agree':>9s} {'neg.caught':>10s} {'med.speedup':>11s} {'max':>7s}"]
    for fam, f in sorted(rows.items()):
        s = fam_sp.get(fam, [])
        med = f"{np.median(s):.2f}x" if s else "-"
        mx = f"{max(s):.1f}x" if s else "-"
        lines.append(f"{fam:20s} {f['tasks']:5d} {f['timed']:6d} {f['agree']:4d}/{f['checked']:<4d} "
                     f"{f['neg_caught']:4d}/{f['neg']:<5d} {med:>11s} {mx:>7s}")
    return "\n".join(lines)
