"""Suites (what to evaluate on) and solution directories (what to evaluate).

    tasks = load_suite("data/kernelbench/level1")          # a KernelBench-layout directory (imported)
    tasks = load_suite("data/tasks", split="test")          # a built dataset (manifest.json), one split
    tasks = load_suite("experiments/suites/smoke")          # a directory of task JSON files
    sols = load_solutions("runs/sols", tasks)               # {task_id: [source of sample 0, 1, ...]}

A solution directory holds `<task_id>.cu` (one sample) or `<task_id>/<name>.cu` (samples in name order).
"""
from __future__ import annotations

import re
from pathlib import Path

from kernels_harness.tasks.errors import TaskError


def model_label(model: str) -> str:
    """A short file-name-safe name of a model argument (a path's file or directory name; an SFT or RL run's export
    or policy directory by its run): what names an evaluation cell (benchmarks/zero_shot.py, experiments/method.py)."""
    p = Path(model)
    name = p.stem if p.suffix == ".gguf" else (p.name if p.exists() else model)
    if p.exists() and p.is_dir() and p.name in ("export", "policy"):
        name = f"{p.parent.name}-{p.name}"
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-") or "model"


def suite_kind(path: str | Path) -> str:
    p = Path(path)
    if (p / "manifest.json").is_file():
        return "dataset"
    if p.is_dir() and any(p.glob("*.json")):
        return "task_files"
    if p.is_file() and p.suffix == ".json":
        return "task_files"
    if p.is_file() and p.suffix == ".py" or p.is_dir() and any(p.rglob("*.py")):
        return "kernelbench"
    raise TaskError(f"{p} is not a suite: give a built dataset (with manifest.json), a directory of task "
                    "JSON files or a KernelBench-layout directory (levelN/<id>_<Name>.py)")


def spread(tasks: list) -> list:
    """The tasks reordered round-robin over their families (first task of each family, then the second, ...),
    each family's own order kept: the first n of the result are a family-balanced subset."""
    by_family: dict[str, list] = {}
    for t in tasks:
        by_family.setdefault(getattr(t, "family", "") or "", []).append(t)
    columns = list(by_family.values())
    return [col[i] for i in range(max(map(len, columns), default=0)) for col in columns if i < len(col)]


def load_suite(path: str | Path, split: str = "", max_tasks: int = 0, kernelbench_cache: str | Path | None = None,
               select: str = "first"):
    """The tasks of a suite (see the module docstring). max_tasks > 0 keeps the first ones (select="first") or
    a family-balanced subset (select="spread": round-robin over families, see `spread`).

    kernelbench_cache: a directory of imported task JSON files reused for KernelBench problems (the
    import runs each module a few times; the cache makes a second evaluation start at once)."""
    from kernels_harness.tasks.schema import load_task
    p = Path(path)
    kind = suite_kind(p)
    if kind == "dataset":
        from kernels_harness.datasets import shards
        tasks = list(shards.load(p, split=split or None))
        if not tasks:
            raise TaskError(f"{p} has no tasks in split {split!r}; splits are named in {p}/manifest.json")
    elif kind == "task_files":
        files = [p] if p.is_file() else sorted(p.glob("*.json"))
        tasks = [load_task(f) for f in files]
    else:
        from kernels_harness.tasks import kernelbench as kb
        files = kb.find_problems(p)[:max_tasks or None] if select == "first" else kb.find_problems(p)
        cache = Path(kernelbench_cache) if kernelbench_cache else None
        tasks = []
        for f in files:
            task = None
            if cache is not None:
                hit = cache / f"{f.parent.name}_{f.stem}.json".lower()
                if hit.is_file():
                    task = load_task(hit)
                    if task.source != f.read_text():
                        task = None
            if task is None:
                task = kb.import_file(f)
                if cache is not None:
                    kb.write_tasks([task], cache)
            tasks.append(task)
    if select not in ("first", "spread"):
        raise ValueError(f"select must be 'first' or 'spread', not {select!r}")
    return (spread(tasks) if select == "spread" else tasks)[:max_tasks or None]


def load_solutions(root: str | Path, tasks) -> dict[str, list[str]]:
    """{task_id: [sources]} for the tasks that have solutions under root (others get none)."""
    r = Path(root)
    if not r.is_dir():
        raise TaskError(f"{r} is not a directory of solutions (<task_id>.cu or <task_id>/<name>.cu)")
    out: dict[str, list[str]] = {}
    for t in tasks:
        files = ([r / f"{t.id}.cu"] if (r / f"{t.id}.cu").is_file() else []) + sorted((r / t.id).glob("*.cu"))
        if files:
            out[t.id] = [f.read_text() for f in files]
    if not out:
        raise TaskError(f"{r} holds no solution for any task of the suite; name them <task_id>.cu "
                        f"(e.g. {tasks[0].id if tasks else 'task'}.cu)")
    return out


def group_of(task, by: str) -> str:
    """The family of a task, or its KernelBench level ("level1"), for the per-group tables."""
    if by == "level":
        lvl = task.extra.get("level")
        return f"level{lvl}" if lvl is not None else (task.family or "unknown")
    return task.family or "unknown"
