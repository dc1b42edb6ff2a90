"""Writes the generated dataset to a directory (shards + manifest) and validates it, incrementally.

`build(out, seed=0, ...)` generates every program of the selected families, writes JSON-lines shards
of `shard_size` tasks per family, and validates `validate_sample` tasks per shard on `backend` through
the harness (0 = every task, -1 = none). A shard whose bytes and validation settings are unchanged
since the last run is neither rewritten nor revalidated.
"""
from __future__ import annotations

import collections
import json
import time
from pathlib import Path

from kernels_harness.datasets import registry, shards, validate

SHARD_SIZE = 256


def _validation_covers(old: dict | None, backend: str, sample: int) -> bool:
    if not old or old.get("backend") != backend:
        return False
    return old.get("sample") == sample or (old.get("sample") == 0)


def build(out: str | Path, seed: int = registry.DEFAULT_SEED, families=None, tracks=None,
          shard_size: int = SHARD_SIZE, backend: str = "cpu", validate_sample: int = 0, workers: int | None = None,
          progress: bool = True) -> dict:
    """Builds (or updates) the dataset in `out`; returns the manifest (also written to out/manifest.json)."""
    from tqdm import tqdm

    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    old = shards.read_manifest(root) or {}
    if old and old.get("seed") != seed:
        old = {}  # another seed: nothing can be reused
    old_by_path = {s["path"]: s for s in old.get("shards", [])}
    fams = registry.select(families, tracks)
    plan = []  # (family, index, tasks)
    for fam in fams:
        tasks = list(registry.generate(seed, families=[fam.name]))
        for k in range(0, len(tasks), shard_size):
            plan.append((fam, k // shard_size, tasks[k:k + shard_size]))
    entries, split_counts, pool = [], collections.Counter(), None
    started = time.time()
    t_valid = 0.0
    try:
        for fam, idx, tasks in tqdm(plan, desc="shards", unit="shard", disable=not progress):
            rel = f"{fam.track}/{fam.name}-{idx:03d}.jsonl"
            text = shards.shard_text(tasks)
            digest = shards.sha256(text)
            prev = old_by_path.get(rel)
            path = root / rel
            unchanged = (prev is not None and prev.get("sha256") == digest and path.is_file()
                         and shards.sha256(path.read_text()) == digest)
            if not unchanged:
                shards.write_atomic(path, text)
            entry = {"path": rel, "track": fam.track, "family": fam.name, "n_tasks": len(tasks), "sha256": digest,
                     "splits": dict(collections.Counter(t.split for t in tasks))}
            validation = prev.get("validation") if unchanged else None
            if validate_sample >= 0 and not _validation_covers(validation, backend, validate_sample):
                if pool is None:
                    from kernels_harness.run import HarnessPool
                    pool = HarnessPool(backend=backend, workers=workers, features=False, progress=False)
                chosen = validate.sample(tasks, validate_sample)
                t0 = time.time()
                records = validate.validate_tasks(chosen, backend=backend, pool=pool)
                t_valid += time.time() - t0
                validation = {"backend": backend, "sample": validate_sample, "tasks": len(records),
                              "implementations": sum(len(r["verdicts"]) for r in records),
                              "failed_tasks": [r for r in records if not r["ok"]],
                              "seconds": round(time.time() - t0, 2)}
            if validation is not None:
                entry["validation"] = validation
            entries.append(entry)
            split_counts.update(t.split for t in tasks)
    finally:
        if pool is not None:
            pool.close()
    produced = {e["path"] for e in entries}
    selected = {f.name for f in fams}
    for rel, prev in old_by_path.items():  # shards of the selected families no longer generated
        if prev["family"] in selected and rel not in produced and (root / rel).is_file():
            (root / rel).unlink()
    manifest = {"version": shards.MANIFEST_VERSION, "seed": seed, "counts": registry.counts(seed),
                "splits": dict(split_counts), "held_out_for_test": registry.HELD_OUT,
                "shards": entries, "seconds": round(time.time() - started, 2),
                "validation_seconds": round(t_valid, 2)}
    if families or tracks:  # a partial build keeps the other families' shards of the old manifest
        keep = [s for s in old.get("shards", []) if s["family"] not in selected and (root / s["path"]).is_file()]
        manifest["shards"] = keep + entries
    shards.write_atomic(root / shards.MANIFEST, json.dumps(manifest, indent=1, sort_keys=True))
    return manifest


def summary(manifest: dict) -> str:
    """A short table: tasks per track and split, validated and failed tasks."""
    rows = collections.defaultdict(lambda: collections.Counter())
    for s in manifest["shards"]:
        c = rows[s["track"]]
        c["tasks"] += s["n_tasks"]
        for k, v in s.get("splits", {}).items():
            c[k] += v
        v = s.get("validation") or {}
        c["validated"] += v.get("tasks", 0)
        c["failed"] += len(v.get("failed_tasks", []))
    lines = [f"{'track':12s} {'tasks':>6s} {'train':>6s} {'val':>5s} {'test':>5s} {'validated':>9s} {'failed':>6s}"]
    for track, c in sorted(rows.items()):
        lines.append(f"{track:12s} {c['tasks']:6d} {c['train']:6d} {c['val']:5d} {c['test']:5d} "
                     f"{c['validated']:9d} {c['failed']:6d}")
    return "\n".join(lines)
