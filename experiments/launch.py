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
    flags.DEFINE_string("compilation_cache", "auto", "JAX's persistent compilation cache: auto (on where a JAX GPU "
                        "plugin is installed, under the project cache), off, or a directory. Programs are the same; "
                        "a later run, or another stage with the same shapes, skips their compiles.")


def compilation_cache(setting: str, min_compile_s: float = 1.0) -> str | None:
    """Turns on JAX's persistent compilation cache for programs that took at least `min_compile_s` to compile;
    returns its directory (None: off). Only configures JAX: the backend is not started, so a job may still set its
    memory fraction. On the GPU a resumed or sibling run otherwise recompiles every prefill, decode and train step
    (warm-up steps of 90-118 s against 4 s compiled on an H200, benchmarks/results/rl_step_h200_2026-12-06)."""
    from cudaperf_jax import gpu_plugin_installed
    if setting == "off" or (setting == "auto" and not gpu_plugin_installed()):
        return None
    if setting == "auto":
        from cudaperf_jax.assets import cache_dir
        path = cache_dir() / "jax"
    else:
        path = Path(setting)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:   # a read-only cache costs compile time, not the run
        print(f"warning: no compilation cache at {path} ({e.strerror}); programs compile in every run", file=sys.stderr)
        return None
    import jax
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_s))
    return str(path)


def user_errors() -> tuple[type, ...]:
    """Exception types that mean 'the user asked for something impossible', reported in one line."""
    from cudaperf_jax.assets import ModelNotAvailable
    from cudaperf_jax.experiment.config import ConfigFieldError
    from cudaperf_jax.experiment.workdir import CheckpointDamaged, ConfigMismatch
    from cudaperf_jax.models.config import ConfigError
    from cudaperf_jax.models.hf_io import CheckpointError
    from kernels_harness.build.nvcc import CompilerNotFound
    from kernels_harness.run.pool import HarnessSetupError
    from kernels_harness.tasks.errors import TaskError
    return (ModelNotAvailable, ConfigMismatch, CompilerNotFound, TaskError, FileNotFoundError, CheckpointError,
            ConfigError, ConfigFieldError, HarnessSetupError, CheckpointDamaged)


def run(main, name: str):
    """Runs `main(config, workdir)` as an absl app."""
    def _main(argv):
        if len(argv) > 1:
            raise app.UsageError(f"unexpected arguments {argv[1:]}; settings go in --config.<field>=value")
        workdir = FLAGS.workdir or str(REPO / "runs" / name)
        if not FLAGS["verbosity"].present:  # Orbax logs every checkpoint step at INFO
            logging.set_verbosity(logging.WARNING)
        try:
            compilation_cache(FLAGS.compilation_cache)
            return main(FLAGS.config, workdir)
        except user_errors() as e:
            print(f"error: {e}", file=sys.stderr)
            sys.exit(2)
    app.run(_main)
