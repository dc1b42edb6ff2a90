"""absl glue shared by every entry point in experiments/.

    from experiments import launch
    launch.define_config("experiments/configs/demo.py")

    def main(config, workdir):
        ...

    if __name__ == "__main__":
        launch.run(main, name="demo")

gives `--config=experiments/configs/<name>.py`, field overrides `--config.a.b=value`, and `--workdir`
(default `runs/<name>`, said on stderr when taken). `--help` (and `--helpfull`) list every config field with its
default and comment (experiments/config_help.py). Errors a user can cause (an unknown config field or a value of
the wrong type, a bad task file, a missing model, no compiler, a workdir holding another config) end the program
with one line on stderr and exit status 2.
"""
from __future__ import annotations

import sys
from pathlib import Path

from absl import app, flags, logging
from ml_collections import config_flags

FLAGS = flags.FLAGS
REPO = Path(__file__).resolve().parents[1]
_DEFAULT_CONFIG: list[str] = [""]   # the entry point's config file (define_config)


def define_config(default: str):
    """Defines --config (a Python config file, fields overridable) and --workdir. Checks the --config.FIELD
    overrides of sys.argv first (ml_collections applies those to the default file right here): an unknown field or a
    value of the wrong type ends the program with one line and exit status 2."""
    from experiments import config_help
    _DEFAULT_CONFIG[:] = [default]
    path = Path(default)
    if not path.is_absolute():
        path = REPO / path
    helping = any(a in config_help.HELP_FLAGS for a in sys.argv[1:])
    if not helping:
        check_argv(sys.argv)
    given = [a for a in sys.argv if not config_help.overrides([a])] if helping else None   # --help: ignore them
    config_flags.DEFINE_config_file("config", str(path), "Python config file (path.py or path.py:variant); "
                                    "override fields with --config.a.b=value (--help lists them).",
                                    lock_config=True, sys_argv=given)
    flags.DEFINE_string("workdir", None, "Run directory; created if missing, resumed if it holds the same config "
                        "(default: runs/<entry point>, said on stderr).")
    flags.DEFINE_string("compilation_cache", "auto", "JAX's persistent compilation cache: auto (on where a JAX GPU "
                        "plugin is installed, under the project cache), off, or a directory. Programs are the same; "
                        "a later run, or another stage with the same shapes, skips their compiles.")


def check_argv(argv: list[str]) -> None:
    """Exits with one line (status 2) if the --config file is missing or an override names no field of it or
    gives a value its type cannot take."""
    from cudaperf_jax.experiment.config import ConfigFieldError
    from experiments import config_help
    spec = config_help.config_arg(argv, _DEFAULT_CONFIG[0])
    try:
        _, config = config_help.load_config_file(spec, REPO)
        config_help.check_overrides(argv[1:], config)
    except (FileNotFoundError, ConfigFieldError) as e:
        _fail(str(e) if "--help" in str(e) else f"{e} (--help lists every field)")


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


def _fail(message: str):
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def parse_flags(argv: list[str]) -> list[str]:
    """absl's flag parsing with this project's answers: --help/--helpfull print the entry point's docstring, its
    flags and every config field with default and comment (exit 0); a bad flag is one line on stderr (exit 2)."""
    from cudaperf_jax.experiment.config import ConfigFieldError
    from experiments import config_help
    if any(a in config_help.HELP_FLAGS for a in argv[1:]):
        main = sys.modules.get("__main__")
        own = FLAGS.module_help("experiments.launch") + "\n" + (FLAGS.main_module_help() if main is not None else "")
        own = "\n".join(line for line in own.splitlines() if line.startswith(" ")).replace(f"{REPO}/", "")
        try:
            text = config_help.help_text(getattr(main, "__doc__", "") or "",
                                         config_help.config_arg(argv, _DEFAULT_CONFIG[0]), REPO, own)
        except (FileNotFoundError, ConfigFieldError) as e:
            _fail(str(e))
        if any(a in ("--helpfull", "-helpfull") for a in argv[1:]):
            text += "\nEvery flag (absl and the libraries):\n" + FLAGS.get_help() + "\n"
        sys.stdout.write(text)
        sys.exit(0)
    try:
        return FLAGS(argv)
    except flags.Error as e:
        _fail(" ".join(str(e).split()) + "; see --help")
    except (AttributeError, KeyError, ValueError, TypeError) as e:   # ml_collections on a field it cannot set
        _fail(f"cannot apply the --config overrides ({' '.join(str(e).split())[:200]}); see --help")


def _typed_check(config) -> None:
    """The config module's TYPED dataclass, if it has one, validates the parsed config (one sentence per error)."""
    from cudaperf_jax.experiment.config import ConfigFieldError, from_configdict
    from experiments import config_help
    try:
        module, _ = config_help.load_config_file(config_help.config_arg(sys.argv, _DEFAULT_CONFIG[0]), REPO)
    except FileNotFoundError:
        return
    typed = getattr(module, "TYPED", None)
    if typed is None:
        return
    try:
        from_configdict(typed, config)
    except ConfigFieldError as e:
        _fail(str(e))


def run(main, name: str, uses_workdir: bool = True):
    """Runs `main(config, workdir)` as an absl app; `uses_workdir=False` for an entry point that writes only where
    its own config says (build_dataset's --out), which is then not told about a default workdir."""
    def _main(argv):
        if len(argv) > 1:
            raise app.UsageError(f"unexpected arguments {argv[1:]}; settings go in --config.<field>=value")
        _typed_check(FLAGS.config)
        workdir = FLAGS.workdir
        if workdir is None and uses_workdir:
            workdir = str(REPO / "runs" / name)
            print(f"[{name}] no --workdir given: writing to {workdir}", file=sys.stderr)
        if not FLAGS["verbosity"].present:  # Orbax logs every checkpoint step at INFO
            logging.set_verbosity(logging.WARNING)
        try:
            compilation_cache(FLAGS.compilation_cache)
            return main(FLAGS.config, workdir)
        except user_errors() as e:
            _fail(str(e))
    app.run(_main, flags_parser=parse_flags)
