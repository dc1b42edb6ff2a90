"""SFT warm start: the policy learns the fastest verified implementation of each train task.

    python -m experiments.train_sft [--config=experiments/configs/sft.py] [--config.field=value] [--workdir=DIR]

The ConfigDict becomes an sft.config.SFTConfig (one sentence naming the field when it cannot; config.json records
it resolved). Run again with the same workdir and config to resume after the last checkpoint. The result loads with
`cudaperf_jax.models.loading.load_policy(DIR)` (or DIR/export, a Hugging Face directory; with LoRA, DIR/adapter is the
adapter in PEFT's format). LoRA: --config=experiments/configs/sft_lora.py, or --config.lora.rank=16. See
cudaperf_jax/sft/train.py for what the workdir holds.
"""
from __future__ import annotations

from experiments import launch

launch.define_config("experiments/configs/sft.py")


def main(config, workdir):
    from cudaperf_jax.experiment.config import from_configdict
    from cudaperf_jax.sft.config import SFTConfig
    from cudaperf_jax.sft.train import train
    train(from_configdict(SFTConfig, config), workdir)


if __name__ == "__main__":
    launch.run(main, name="train_sft")
