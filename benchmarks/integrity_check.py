"""Held-out dataset verdicts through the harness (issue 26): every labelled implementation of up to `--per_family`
programs per held-out family (split "test"), and of one program per other family, on one backend. Correct ones
must be `ok`, labelled negatives must not be (on cuda, timing-dependent defects may pass: datasets.validate).
Prints a table and writes $OUT/integrity_dataset_<backend>.json (counts per family, every mismatch, verdicts).

    python benchmarks/integrity_check.py --backend cuda --out $OUT [--per_family 3]
"""
from __future__ import annotations

import argparse
import collections
import json
import time
from pathlib import Path

from kernels_harness.datasets import registry, validate


def pick(per_family: int) -> list:
    tasks = []
    for fam in registry.FAMILIES:
        built = [registry.build(fam.name, v) for v in registry.variants(fam.name)[:24]]
        held = [t for t in built if t.split == "test"]
        if held:
            tasks += held[:per_family]
        else:
            tasks.append(next((t for t in built if any(i.expected == "wrong" for i in t.implementations)), built[0]))
    return tasks


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="cuda", choices=("cpu", "cuda"))
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--per_family", type=int, default=3)
    args = ap.parse_args(argv)
    from kernels_harness.run import HarnessPool
    tasks = pick(args.per_family)
    t0 = time.perf_counter()
    with HarnessPool(backend=args.backend, features=False) as pool:
        recs = validate.validate_tasks(tasks, backend=args.backend, pool=pool)
    by_id = {t.id: t for t in tasks}
    fam = collections.defaultdict(lambda: collections.Counter())
    statuses = collections.Counter()
    for r in recs:
        c = fam[r["family"]]
        for impl in by_id[r["id"]].implementations:
            s = r["verdicts"][impl.name]
            statuses[s] += 1
            key = "correct" if impl.expected == "correct" else "negative"
            c[key] += 1
            c[key + "_holds"] += validate.agrees(impl.expected, s, impl.defect, args.backend)
    mismatches = [m for r in recs for m in r["mismatches"]]
    out = {"backend": args.backend, "tasks": len(tasks), "seconds": time.perf_counter() - t0,
           "statuses": dict(statuses), "families": {k: dict(v) for k, v in sorted(fam.items())},
           "mismatches": mismatches, "verdicts": {r["id"]: r["verdicts"] for r in recs}}
    path = Path(args.out) / f"integrity_dataset_{args.backend}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1))
    print(f"{'family':<24} {'correct ok':>11} {'negatives caught':>17}")
    for k, v in sorted(fam.items()):
        print(f"{k:<24} {v['correct_holds']:>5}/{v['correct']:<5} {v['negative_holds']:>8}/{v['negative']:<8}")
    print(f"{len(tasks)} tasks, statuses {dict(statuses)}, {len(mismatches)} mismatches "
          f"in {out['seconds']:.0f} s -> {path}")
    for m in mismatches[:20]:
        print("  MISMATCH", m)
    return 0 if not mismatches else 1


if __name__ == "__main__":
    raise SystemExit(main())
