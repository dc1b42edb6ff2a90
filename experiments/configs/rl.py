"""Multi-turn GRPO on the unified reward (issue 27): the defaults of cudaperf_jax.rl.config.RLConfig, the production
values (SmolLM2-135M on the dataset's train split, one GPU).

    python -m experiments.train_rl --config=experiments/configs/rl.py --config.model=runs/sft --workdir=runs/rl
Ablation without the structural and ranker terms: --config.reward.terms=correct,speed,penalty
On 8 GPUs of one host, parameters and optimizer state sharded: --config.mesh.fsdp=8
"""
from cudaperf_jax.experiment.config import to_configdict
from cudaperf_jax.rl.config import RLConfig

TYPED = RLConfig


def get_config():
    return to_configdict(RLConfig())
