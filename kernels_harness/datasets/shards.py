"""The on-disk dataset: JSON-lines shards of task files plus manifest.json, and a loader.

Layout of a dataset directory:

    manifest.json                 {"version", "seed", "counts", "shards": [...], "splits": {...}}
    c2cuda/elementwise-000.jsonl  one task JSON (the harness format, kernels_harness/tasks/schema.py) per line
    torch2cuda/softmax-000.jsonl  ...

Each manifest shard entry: {"path", "track", "family", "n_tasks", "sha256", "validation"}; the
sha256 is of the shard's bytes, so a re-run rewrites and revalidates only shards whose content changed.
"""
from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from kernels_harness.tasks.errors import TaskError
from kernels_harness.tasks.schema import Task

MANIFEST = "manifest.json"
MANIFEST_VERSION = 1


def shard_text(tasks: Iterable[Task]) -> str:
    return "".join(json.dumps(t.to_dict(), sort_keys=True) + "\n" for t in tasks)


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def read_manifest(root: str | Path) -> dict | None:
    p = Path(root) / MANIFEST
    if not p.is_file():
        return None
    try:
        m = json.loads(p.read_text())
    except json.JSONDecodeError:
        raise TaskError(f"{p} is not valid JSON; delete it to rebuild the dataset from scratch") from None
    if m.get("version") != MANIFEST_VERSION:
        raise TaskError(f"{p} has manifest version {m.get('version')!r}; this code reads {MANIFEST_VERSION}, "
                        "rebuild with `python -m experiments.build_dataset --out=DIR`")
    return m


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def iter_shard(path: str | Path) -> Iterator[Task]:
    p = Path(path)
    with p.open() as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield Task.from_dict(json.loads(line))
            except json.JSONDecodeError as e:
                raise TaskError(f"{p}:{n} is not valid JSON ({e.msg}); rebuild the shard") from None


def load(root: str | Path, split: str | None = None, track: str | None = None,
         families: Iterable[str] | None = None) -> Iterator[Task]:
    """Tasks of a built dataset, filtered by split, track and family (in manifest order)."""
    m = read_manifest(root)
    if m is None:
        raise TaskError(f"{root} holds no {MANIFEST}; build it with `python -m experiments.build_dataset --out={root}`")
    fams = set(families) if families else None
    for sh in m["shards"]:
        if track and sh["track"] != track:
            continue
        if fams and sh["family"] not in fams:
            continue
        for t in iter_shard(Path(root) / sh["path"]):
            if split is None or t.split == split:
                yield t
