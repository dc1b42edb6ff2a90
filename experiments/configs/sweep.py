"""A sweep (experiments/sweep.py): an entry point, a grid or random search over its config fields, seeds.

    python -m experiments.sweep --config=experiments/configs/sweep.py --workdir=runs/sweep1
"""
import ml_collections


def get_config():
    c = ml_collections.ConfigDict()
    c.entry = "experiments.evaluate"          # the module run as `python -m <entry>` (any experiments.* entry)
    c.base_config = "experiments/configs/evaluate.py"  # its config file
    c.overrides = ml_collections.ConfigDict({"backend": "cpu"})   # fixed --config.<field>=value for every run
    c.mode = "grid"                           # grid: every combination | random: `samples` draws
    c.grid = ml_collections.ConfigDict({"rollout": {"samples_per_task": (1, 2)}})  # field -> tuple of values
    c.samples = 4                             # random mode: runs drawn from the grid's value lists
    c.seeds = (0, 1)                          # every point runs once per seed (--config.seed)
    c.seed_field = "seed"
    c.sweep_seed = 0                          # random mode: the draw of the points
    c.max_parallel = 1                        # runs at once (each is its own process)
    c.metrics_file = "metrics.jsonl"          # the runs' metrics: last row of this file in each workdir
    c.done_file = ""                          # a file whose presence marks a finished run ("" = exit status 0 recorded)
    c.metric = ""                             # the metric the plot shows ("" = the first numeric one)
    c.timeout_s = 0                           # per run (0 = none)
    return c
