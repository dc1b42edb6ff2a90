"""SFT warm start: the policy learns the fastest verified implementation of each train task.

    python -m experiments.train_sft [--config=experiments/configs/sft.py] [--config.field=value] [--workdir=DIR]

Run again with the same workdir and config to resume after the last checkpoint. The result loads with
`cudaperf_jax.models.loading.load_policy(DIR)` (or DIR/export, a Hugging Face directory). See
cudaperf_jax/sft/train.py for what the workdir holds.
"""
from __future__ import annotations

import sys

from experiments import launch

launch.define_config("experiments/configs/sft.py")


def main(config, workdir):
    from cudaperf_jax.sft.config import SFTConfigError
    from cudaperf_jax.sft.train import train
    try:
        train(config, workdir)
    except SFTConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    launch.run(main, name="train_sft")
