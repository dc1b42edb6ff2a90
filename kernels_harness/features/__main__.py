"""Structural features of a candidate from the command line.

    python -m kernels_harness.features TASK.json [SOURCE.cu | --impl NAME | --all] [--json] [--no-compile]

Prints the score, its components and the feedback sentences (or the whole Features as JSON).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kernels_harness.features import analyse
from kernels_harness.tasks.errors import TaskError
from kernels_harness.tasks.schema import load_task


def _summary(name: str, f) -> str:
    comps = ", ".join(f"{k} {'-' if v is None else f'{v:.2f}'}" for k, v in f.components.items())
    lines = [f"{name}: score {f.score:.3f} ({f.bound}-bound; {comps})"]
    lines += [f"  - {s}" for s in f.feedback] + [f"  note: {n}" for n in f.notes]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kernels_harness.features", description=__doc__.splitlines()[0])
    ap.add_argument("task", help="a task JSON file")
    ap.add_argument("source", nargs="?", help="the candidate .cu file (default: the task's baseline)")
    ap.add_argument("--impl", help="analyse the task's implementation of this name")
    ap.add_argument("--all", action="store_true", help="analyse every implementation of the task")
    ap.add_argument("--json", action="store_true", help="print the Features as JSON")
    ap.add_argument("--no-compile", action="store_true", help="skip ptxas (no registers, no occupancy)")
    args = ap.parse_args(argv)
    try:
        task = load_task(args.task)
    except TaskError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.source:
        p = Path(args.source)
        if not p.is_file():
            print(f"error: source file {args.source!r} does not exist", file=sys.stderr)
            return 2
        cands = [(p.name, p.read_text())]
    elif args.all:
        cands = [(i.name, i.source) for i in task.implementations]
    else:
        impl = next((i for i in task.implementations if i.name == args.impl), None) if args.impl else \
            (task.baseline or (task.implementations[0] if task.implementations else None))
        if impl is None:
            print(f"error: task {task.id!r} has no implementation {args.impl or ''!r}; pass a .cu file", file=sys.stderr)
            return 2
        cands = [(impl.name, impl.source)]
    for name, src in cands:
        f = analyse(task, src, compile=not args.no_compile)
        print(json.dumps({"name": name, **f.to_dict()}) if args.json else _summary(name, f))
    return 0


if __name__ == "__main__":
    sys.exit(main())
