"""Launches a sweep: one run per (grid point, seed) in its own workdir, several at once, then a summary.

    python -m experiments.sweep --config=SWEEP_FILE.py --workdir=runs/sweep1 --config.max_parallel=2

A sweep file is a config file like experiments/configs/sweep.py: the entry point, its config file, fixed
overrides, the grid (nested fields of the entry's config, e.g. `c.grid = {"opt": {"lr": (1e-4, 3e-4)}}`),
grid or random mode, and the seeds.

Each run is `python -m <entry> --config=<base_config> --config.<field>=<value>... --workdir=<sweep>/runs/<name>`.
A run whose workdir holds `sweep_status.json` with status `done` is skipped; an interrupted one (no
status, or `failed`) is launched again into the same workdir, so the entry point resumes from its last
checkpoint. The summary (`summary.json`, `summary.md`, `summary.png`) gives per grid point the mean
and standard deviation over seeds of every metric in the last row of each run's metrics.jsonl.
"""
from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from experiments import launch

launch.define_config("experiments/configs/sweep.py")


def points(config) -> list[dict]:
    """The grid points (field -> value), in a fixed order."""
    grid = _flatten(config.grid.to_dict() if hasattr(config.grid, "to_dict") else dict(config.grid))
    for k, v in grid.items():
        if not v:
            raise ValueError(f"grid field {k!r} has no values; give a list such as [1, 2]")
    keys = sorted(grid)
    allp = [dict(zip(keys, vals)) for vals in itertools.product(*(grid[k] for k in keys))] or [{}]
    if config.mode == "grid":
        return allp
    if config.mode != "random":
        raise ValueError(f"mode must be 'grid' or 'random', not {config.mode!r}")
    rng = np.random.default_rng(config.sweep_seed)
    return [{k: grid[k][int(rng.integers(len(grid[k])))] for k in keys} for _ in range(config.samples)]


def _flatten(d: dict, prefix: str = "") -> dict:
    """{"opt": {"lr": (1, 2)}} -> {"opt.lr": [1, 2]} (nested fields of the entry's config)."""
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        elif isinstance(v, (list, tuple)):
            out[prefix + k] = list(v)
        else:
            raise ValueError(f"grid field {prefix + k!r} must be a tuple of values, not {v!r}")  # noqa: TRY004
    return out


def run_name(point: dict, seed) -> str:
    parts = [f"{k.split('.')[-1]}={v}" for k, v in sorted(point.items())] + [f"seed={seed}"]
    return ",".join(parts).replace("/", "_").replace(" ", "")


def plan(config) -> list[dict]:
    runs, seen = [], set()
    for p in points(config):
        for s in config.seeds:
            name = run_name(p, s)
            if name in seen:  # random mode may draw a point twice
                continue
            seen.add(name)
            runs.append({"name": name, "point": p, "seed": s})
    return runs


def _fmt(v) -> str:
    return json.dumps(v) if isinstance(v, (list, tuple, dict)) else str(v)


def command(config, r: dict, workdir: Path) -> list[str]:
    base = Path(config.base_config)
    base = base if base.is_absolute() else launch.REPO / base
    args = [sys.executable, "-m", config.entry, f"--config={base}", f"--workdir={workdir}"]
    fixed = {**config.overrides.to_dict(), **r["point"], config.seed_field: r["seed"]}
    return args + [f"--config.{k}={_fmt(v)}" for k, v in fixed.items()]


def status(workdir: Path) -> str:
    p = workdir / "sweep_status.json"
    try:
        return json.loads(p.read_text())["status"]
    except (OSError, ValueError, KeyError):
        return "new" if not workdir.exists() else "interrupted"


def launch_one(config, r: dict, root: Path) -> dict:
    wd = root / "runs" / r["name"]
    st = status(wd)
    if st == "done" and (not config.done_file or (wd / config.done_file).exists()):
        return {**r, "status": "skipped", "seconds": 0.0}
    wd.mkdir(parents=True, exist_ok=True)
    cmd = command(config, r, wd)
    t0 = time.time()
    with open(wd / "sweep_log.txt", "a") as log:
        log.write(f"$ {' '.join(cmd)}\n")
        log.flush()
        try:
            rc = subprocess.run(cmd, cwd=launch.REPO, stdout=log, stderr=subprocess.STDOUT,
                                timeout=config.timeout_s or None, check=False).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    done = rc == 0 and (not config.done_file or (wd / config.done_file).exists())
    out = {"status": "done" if done else "failed", "returncode": rc, "seconds": round(time.time() - t0, 2),
           "resumed": st == "interrupted" or st == "failed", "command": cmd}
    (wd / "sweep_status.json").write_text(json.dumps(out, indent=1))
    return {**r, **out}


def last_metrics(wd: Path, name: str) -> dict:
    p = wd / name
    if not p.is_file():
        return {}
    rows = [json.loads(x) for x in p.read_text().splitlines() if x.strip()]
    return {k: v for k, v in (rows[-1] if rows else {}).items()
            if not k.startswith("_") and k != "step" and isinstance(v, (int, float)) and not isinstance(v, bool)}


def summarize(config, runs: list[dict], root: Path) -> dict:
    """Per grid point: mean, std and n over seeds of each metric; the runs' statuses."""
    groups: dict = {}
    for r in runs:
        key = run_name(r["point"], "*")
        g = groups.setdefault(key, {"point": r["point"], "runs": [], "metrics": {}})
        m = last_metrics(root / "runs" / r["name"], config.metrics_file)
        g["runs"].append({"name": r["name"], "seed": r["seed"], "status": status(root / "runs" / r["name"])})
        for k, v in m.items():
            g["metrics"].setdefault(k, []).append(float(v))
    for g in groups.values():
        g["stats"] = {k: {"mean": float(np.mean(v)), "std": float(np.std(v, ddof=1)) if len(v) > 1 else 0.0,
                          "n": len(v)} for k, v in g["metrics"].items()}
    return {"entry": config.entry, "points": list(groups.values())}


def markdown(summary: dict) -> str:
    keys = sorted({k for g in summary["points"] for k in g["stats"]})
    lines = [f"# Sweep of {summary['entry']}", "", "mean ± std over seeds (n runs with metrics)", "",
             "| point | runs done | " + " | ".join(keys) + " |", "|" + " --- |" * (len(keys) + 2)]
    for g in summary["points"]:
        done = sum(r["status"] == "done" for r in g["runs"])
        cells = [f"{g['stats'][k]['mean']:.4g} ± {g['stats'][k]['std']:.2g} ({g['stats'][k]['n']})"
                 if k in g["stats"] else "-" for k in keys]
        lines.append(f"| {run_name(g['point'], '*')} | {done}/{len(g['runs'])} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot(summary: dict, metric: str, path: Path) -> Path | None:
    pts = [g for g in summary["points"] if g["stats"]]
    if not pts:
        return None
    metric = metric or min(pts[0]["stats"])
    pts = [g for g in pts if metric in g["stats"]]
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(max(4, 1.2 * len(pts)), 3.5))
    x = np.arange(len(pts))
    ax.bar(x, [g["stats"][metric]["mean"] for g in pts], yerr=[g["stats"][metric]["std"] for g in pts], capsize=4)
    for i, g in enumerate(pts):
        ax.scatter([i] * len(g["metrics"][metric]), g["metrics"][metric], color="k", s=10, zorder=3)
    ax.set_xticks(x, [run_name(g["point"], "*").replace(",seed=*", "") or "base" for g in pts], rotation=20, fontsize=7)
    ax.set_ylabel(metric)
    ax.set_title(f"{metric}: mean ± std over seeds")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main(config, workdir):
    from cudaperf_jax.experiment import open_run
    try:
        runs = plan(config)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    if config.max_parallel < 1:
        print("error: max_parallel must be at least 1", file=sys.stderr)
        sys.exit(2)
    root = Path(workdir)
    sweep = open_run(root, config, name="sweep")
    todo = [r for r in runs if status(root / "runs" / r["name"]) != "done"]
    print(f"[sweep] {len(runs)} runs, {len(runs) - len(todo)} already done, {min(config.max_parallel, max(1, len(todo)))}"
          " at once", file=sys.stderr)
    from tqdm import tqdm
    results = []
    with ThreadPoolExecutor(config.max_parallel) as ex, tqdm(total=len(runs), desc="sweep", unit="run") as bar:
        for res in ex.map(lambda r: launch_one(config, r, root), runs):
            results.append(res)
            bar.update(1)
    summary = summarize(config, runs, root)
    summary["launched"] = [{k: r[k] for k in ("name", "status", "seconds")} for r in results]
    sweep.write_json("summary.json", summary)
    (root / "summary.md").write_text(markdown(summary))
    plot(summary, config.metric, root / "summary.png")
    sweep.close()
    print(markdown(summary), file=sys.stderr)
    failed = [r["name"] for r in results if r["status"] == "failed"]
    print(f"[sweep] wrote {root}/summary.json, summary.md, summary.png" + (f"; failed: {failed}" if failed else ""),
          file=sys.stderr)


if __name__ == "__main__":
    launch.run(main, name="sweep")
