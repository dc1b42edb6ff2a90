"""Evaluation of a policy or of a directory of solutions on a suite (experiments/evaluate.py): the defaults of
cudaperf_jax.eval.config.EvalConfig.

    python -m experiments.evaluate --config=experiments/configs/evaluate.py \
        --config.suite=data/kernelbench/level1 --config.solutions=DIR --workdir=runs/eval
    python -m experiments.evaluate --config.model=runs/rl/policy --config.rollout.samples_per_task=4 \
        --config.rollout.turns=2 --workdir=runs/eval-rl
"""
from cudaperf_jax.eval.config import EvalConfig
from cudaperf_jax.experiment.config import to_configdict

TYPED = EvalConfig


def get_config():
    return to_configdict(EvalConfig())
