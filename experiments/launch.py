"""absl glue shared by every entry point in experiments/.

    from experiments import launch
    launch.define_config("experiments/configs/demo.py")

    def main(config, workdir):
        ...

    if __name__ == "__main__":
        launch.run(main, name="demo")

gives `--config=experiments/configs/<name>.py`, field overrides `--config.a.b=value`, and `--workdir`
(default `runs/<name>`). Errors a user can cause (bad task file, missing model, no compiler, a
workdir holding another config) end the program with one line on stderr and exit status 2.
"""
from __future__ import annotations

import sys
from pathlib import Path

from absl import app, flags, logging
from ml_collections import config_flags

FLAGS = flags.FLAGS
REPO = Path(__file__).resolve().parents[1]


def define_config(default: str):
    """Defines --config (a Python config file, fields overridable) and --workdir."""
    path = Path(default)
    if not path.is_absolute():
        path = REPO / path
    config_flags.DEFINE_config_file("config", str(path), "Python config file; override fields with "
                                    "--config.a.b=value.", lock_config=True)
    flags.DEFINE_string("workdir", None, "Run directory; created if missing, resumed if it holds the same config.")


def user_errors() -> tuple[type, ...]:
    """Exception types that mean 'the user asked for something impossible', reported in one line."""
    from cudaperf_jax.assets import ModelNotAvailable
    from cudaperf_jax.experiment.workdir import CheckpointDamaged, ConfigMismatch
    from cudaperf_jax.models.config import ConfigError
    from cudaperf_jax.models.hf_io import CheckpointError
    from kernels_harness.build.nvcc import CompilerNotFound
    from kernels_harness.run.pool import HarnessSetupError
    from kernels_harness.tasks.errors import TaskError
    return (ModelNotAvailable, ConfigMismatch, CompilerNotFound, TaskError, FileNotFoundError, CheckpointError,
            ConfigError, HarnessSetupError, CheckpointDamaged)


def run(main, name: str):
    """Runs `main(config, workdir)` as an absl app."""
    def _main(argv):
        if len(argv) > 1:
            raise app.UsageError(f"unexpected arguments {argv[1:]}; settings go in --config.<field>=value")
        workdir = FLAGS.workdir or str(REPO / "runs" / name)
        if not FLAGS["verbosity"].present:  # Orbax logs every checkpoint step at INFO
            logging.set_verbosity(logging.WARNING)
        try:
            return main(FLAGS.config, workdir)
        except user_errors() as e:
            print(f"error: {e}", file=sys.stderr)
            sys.exit(2)
    app.run(_main)
