"""Building the task dataset (kernels_harness/datasets): `python -m experiments.build_dataset --out=data/tasks`.

Fields can be overridden with --config.<field>=value; the plain flags --out, --dry_run, --seed,
--backend, --validate_sample, --families win over the config when given.
"""
import ml_collections


def get_config():
    c = ml_collections.ConfigDict()
    c.out = "data/tasks"          # dataset directory (shards + manifest.json)
    c.seed = 0                    # generator seed: same seed, same dataset
    c.families = ""               # comma-separated family names; "" = all (see --dry_run for the list)
    c.shard_size = 256            # tasks per JSON-lines shard
    c.backend = "cpu"             # harness backend for validation: cpu | cuda | auto
    c.validate_sample = 0         # tasks validated per shard (every implementation of each): 0 = all, -1 = none
    c.workers = 0                 # harness worker processes; 0 = the harness default (one per core)
    c.dry_run = False             # print the JSON counts per track and family, build nothing
    return c
