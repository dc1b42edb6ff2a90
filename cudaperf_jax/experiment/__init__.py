"""Run directories for experiments: resolved config, metrics, summaries, checkpoints, resume."""
from cudaperf_jax.experiment.workdir import ConfigMismatch, Run, open_run  # noqa: F401
