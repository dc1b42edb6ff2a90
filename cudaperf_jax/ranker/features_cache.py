"""The features cache: the ranker's feature vector of every dataset implementation, computed once.

    python -m cudaperf_jax.ranker.features_cache --out data/features/sm90.npz            # static + ptxas
    python -m cudaperf_jax.ranker.features_cache --out /tmp/f.npz --no_resources         # static only

Static analysis (tree-sitter) costs ~5 ms an implementation (~70 s for the ~14k of the dataset on one
core). ptxas resources (registers, spills, static shared memory: the occupancy columns) need nvcc: one
`nvcc -cubin` per batch of BATCH implementations put into one translation unit (each in its own
namespace, as kernels_harness.datasets.measure builds its libraries) costs ~1 s, i.e. ~10 min of one
core for the dataset, ~1 min on 16 cores; a batch that fails to compile is retried one implementation at
a time, and an implementation that still fails keeps its static columns only (has_resources = 0).

File (numpy .npz): task [N] str, impl [N] str, sha1 [N] str (of the source, to detect a changed
generator), x float32 [N, F] (featurize.FEATURE_NAMES), structural float32 [N] (the static structural
score, NaN where none), resources bool [N], names [F], version, seconds_static, seconds_resources.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import re
import sys
import time
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from cudaperf_jax.ranker import featurize

BATCH = 32
_NS = re.compile(r"ns_t(\d+)_i(\d+)::")


def sha1(source: str) -> str:
    return hashlib.sha1(source.encode()).hexdigest()


def batch_resources(items: list, arch: str = "sm_90") -> dict:
    """{(ti, ii): {kernel: resources} or None}: one nvcc -cubin for all `items` (ti, ii, task, impl)."""
    from kernels_harness.build import nvcc
    from kernels_harness.datasets.measure import combined_source
    try:
        recs = nvcc.resource_usage(combined_source(items), arch=arch)
    except ValueError:
        if len(items) == 1:
            return {(items[0][0], items[0][1]): None}
        out: dict = {}
        for it in items:
            out.update(batch_resources([it], arch))
        return out
    out = {(ti, ii): {} for ti, ii, _, _ in items}
    for rec in recs.values():
        m = _NS.search(rec.get("signature", ""))
        if m is None:
            continue
        key = (int(m.group(1)), int(m.group(2)))
        if key in out:
            out[key][nvcc.kernel_base_name(rec["signature"])] = {**rec, "smem": rec.get("smem_static", 0)}
    return out


def compute(tasks: list, resources: bool = True, jobs: int | None = None, batch: int = BATCH,
            progress: bool = True) -> dict:
    """The cache's arrays (see the module docstring) for every implementation of `tasks`."""
    from tqdm import tqdm

    from kernels_harness.features.analyse import analyse
    rows = [(ti, ii, t, impl) for ti, t in enumerate(tasks) for ii, impl in enumerate(t.implementations)]
    res: dict = {}
    t0 = time.time()
    if resources:
        batches = [rows[k:k + batch] for k in range(0, len(rows), batch)]
        with ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 2) as ex:
            for r in tqdm(ex.map(batch_resources, batches), total=len(batches), desc="ptxas batches",
                          disable=not progress, file=sys.stderr):
                res.update(r)
    t_res = time.time() - t0
    t0 = time.time()
    x = np.zeros((len(rows), featurize.NUM_FEATURES), np.float32)
    structural = np.full(len(rows), np.nan, np.float32)
    has_res = np.zeros(len(rows), bool)
    task_cols: dict = {}
    for n, (ti, ii, t, impl) in enumerate(tqdm(rows, desc="static features", disable=not progress, file=sys.stderr)):
        r = res.get((ti, ii))
        has_res[n] = bool(r)
        result = types.SimpleNamespace(resources=r or {}, launches=None, configs=None, backend="cuda")
        f = analyse(t, impl.source, result=result, compile=False).to_dict()
        if t.id not in task_cols:
            task_cols[t.id] = featurize.task_columns(t)
        x[n] = featurize.vector(t, impl.source, f, task_cols[t.id])
        s = featurize.static_score(f)
        structural[n] = np.nan if s is None else s
    return {"task": np.array([r[2].id for r in rows]), "impl": np.array([r[3].name for r in rows]),
            "sha1": np.array([sha1(r[3].source) for r in rows]), "x": x, "structural": structural,
            "resources": has_res, "names": np.array(featurize.FEATURE_NAMES), "version": featurize.FEATURE_VERSION,
            "seconds_static": time.time() - t0, "seconds_resources": t_res}


def save(arrays: dict, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez_compressed(tmp, **arrays)
    os.replace(tmp, path)
    return path


def load(path: str | Path) -> dict:
    """The cache as a dict of arrays; raises FileNotFoundError / ValueError with what to do."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no features cache at {path}; build it with "
                                f"`python -m cudaperf_jax.ranker.features_cache --out {path}`")
    with np.load(path, allow_pickle=False) as z:
        d = {k: z[k] for k in z.files}
    if int(d["version"]) != featurize.FEATURE_VERSION or tuple(d["names"]) != featurize.FEATURE_NAMES:
        raise ValueError(f"{path} was written by another feature version ({int(d['version'])}); rebuild it with "
                         f"`python -m cudaperf_jax.ranker.features_cache --out {path}`")
    return d


def lookup(cache: dict) -> dict:
    """{(task id, impl name): row} of a loaded cache."""
    return {(t, i): n for n, (t, i) in enumerate(zip(cache["task"].tolist(), cache["impl"].tolist()))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--no_resources", action="store_true", help="static features only (no nvcc)")
    ap.add_argument("--jobs", type=int, default=None, help="parallel nvcc processes (default: all cores)")
    ap.add_argument("--batch", type=int, default=BATCH, help="implementations per nvcc call")
    ap.add_argument("--families", default="", help="comma-separated families (default: all)")
    ap.add_argument("--limit_per_family", type=int, default=0)
    args = ap.parse_args(argv)
    from kernels_harness.datasets import registry
    tasks = list(registry.generate(families=[f for f in args.families.split(",") if f] or None,
                                   limit_per_family=args.limit_per_family or None))
    arrays = compute(tasks, resources=not args.no_resources, jobs=args.jobs, batch=args.batch)
    path = save(arrays, args.out)
    n = len(arrays["task"])
    print(f"features cache: {n} implementations of {len(tasks)} tasks -> {path} "
          f"({path.stat().st_size / 1e6:.2f} MB); static {arrays['seconds_static']:.0f} s, "
          f"ptxas {arrays['seconds_resources']:.0f} s, resources known for {int(arrays['resources'].sum())}/{n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
