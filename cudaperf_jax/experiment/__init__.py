"""Run directories for experiments: resolved config, metrics, summaries, checkpoints, resume."""
from cudaperf_jax.experiment.workdir import (  # noqa: F401
    CheckpointDamaged,
    ConfigMismatch,
    Run,
    open_run,
)
