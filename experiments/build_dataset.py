"""Builds the task dataset: JSON-lines shards of generated programs, a manifest, harness validation.

    python -m experiments.build_dataset --out=data/tasks                 # build or update, validate every task
    python -m experiments.build_dataset --dry_run                        # counts per track and family, as JSON
    python -m experiments.build_dataset --out=DIR --validate_sample=2    # validate 2 tasks per shard (quick)

Re-running is incremental: unchanged shards are neither rewritten nor revalidated.
"""
from __future__ import annotations

import json

from absl import flags

from experiments import launch

launch.define_config("experiments/configs/build_dataset.py")
flags.DEFINE_string("out", None, "Dataset directory (overrides --config.out).")
flags.DEFINE_boolean("dry_run", None, "Print the number of programs per track and family as JSON and exit.")
flags.DEFINE_integer("seed", None, "Generator seed (overrides --config.seed).")
flags.DEFINE_string("backend", None, "Validation backend: cpu | cuda | auto (overrides --config.backend).")
flags.DEFINE_integer("validate_sample", None, "Tasks validated per shard; 0 = all, -1 = none.")
flags.DEFINE_string("families", None, "Comma-separated families to build (default all).")
FLAGS = flags.FLAGS


def settings(config) -> dict:
    s = dict(config)
    for name in ("out", "dry_run", "seed", "backend", "validate_sample", "families"):
        if FLAGS[name].value is not None:
            s[name] = FLAGS[name].value
    return s


def main(config, workdir):
    from kernels_harness.datasets import build as build_lib
    from kernels_harness.datasets import registry

    s = settings(config)
    fams = [f for f in s["families"].split(",") if f] or None
    if fams:
        registry.select(fams)  # unknown names: one-line error
    if s["dry_run"]:
        counts = registry.counts(s["seed"])
        if fams:
            for t in counts.values():
                t["families"] = {k: v for k, v in t["families"].items() if k in fams}
                t["total"] = sum(t["families"].values())
        print(json.dumps(counts, indent=1))
        return
    manifest = build_lib.build(s["out"], seed=s["seed"], families=fams, shard_size=s["shard_size"],
                               backend=s["backend"], validate_sample=s["validate_sample"],
                               workers=s["workers"] or None)
    failed = [f for sh in manifest["shards"] for f in (sh.get("validation") or {}).get("failed_tasks", [])]
    for f in failed[:20]:
        print(f"validation failed: {f['id']}: {'; '.join(f['mismatches'])[:300]}")
    print(f"wrote {sum(sh['n_tasks'] for sh in manifest['shards'])} tasks in {len(manifest['shards'])} shards "
          f"to {s['out']} ({manifest['seconds']:.0f} s, validation {manifest['validation_seconds']:.0f} s)")
    print(build_lib.summary(manifest))


if __name__ == "__main__":
    launch.run(main, name="build_dataset", uses_workdir=False)
