"""A run directory: `config.json`, `metrics.jsonl`, TensorBoard summaries and Orbax checkpoints.

    run = open_run(workdir, config, name="train_rl")
    state = run.restore(abstract_state) or init_state  # first: a damaged newest checkpoint is set aside
    start = run.restore_step()             # 0 on a fresh run, last checkpointed step + 1 on resume
    for step in range(start, config.steps):
        ...
        run.log(step, {"loss": loss})
        run.save(step, state)
    run.close()

Re-opening an existing workdir with the same config resumes: metrics written after the last
checkpoint are dropped (they will be recomputed), so a killed and resumed run writes the same
metrics as an uninterrupted one. A different config in an existing workdir is refused (ConfigMismatch).
A damaged newest checkpoint is reported in one sentence and the one before it used (`Run.restore`).
"""
from __future__ import annotations

import datetime
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

PACKAGES = ("jax", "jaxlib", "flax", "optax", "orbax-checkpoint", "numpy", "transformers", "torch",
            "tensorstore", "tree-sitter", "tree-sitter-cuda", "gguf", "cupy-cuda13x", "numba",
            "ml-collections", "absl-py", "cudaperf-jax")


class ConfigMismatch(ValueError):
    """The workdir holds a run started with another config."""


class CheckpointDamaged(RuntimeError):
    """No checkpoint of the run directory can be read."""


def _reason(e: BaseException) -> str:
    """One line of an exception, for a sentence."""
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text[:160]}" if text else type(e).__name__


def package_versions() -> dict[str, str]:
    out = {}
    for p in PACKAGES:
        try:
            out[p] = importlib.metadata.version(p)
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


def git_state(repo: Path | None = None) -> dict[str, Any]:
    repo = repo or Path(__file__).resolve().parents[2]
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=False,
                                timeout=10).stdout.strip()
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=repo,
                                    capture_output=True, text=True, timeout=10, check=False).stdout.strip())
    except (OSError, subprocess.TimeoutExpired):
        return {"commit": None, "dirty": None}
    return {"commit": commit or None, "dirty": dirty if commit else None}


def _to_plain(config) -> dict:
    """The config as plain JSON data: a typed config (a dataclass tree) field by field, a ConfigDict by to_dict."""
    import dataclasses
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        from cudaperf_jax.experiment.config import to_dict
        config = to_dict(config)
    elif hasattr(config, "to_dict"):
        config = config.to_dict()
    return json.loads(json.dumps(config, default=str, sort_keys=True))


def _diff(a: Any, b: Any, prefix: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        keys = sorted(set(a) | set(b))
        return [d for k in keys for d in _diff(a.get(k), b.get(k), f"{prefix}{k}.")]
    return [] if a == b else [prefix.rstrip(".")]


class _SummaryWriter:
    """TensorBoard event files when tensorboardX or torch's writer is installed, else nothing."""

    def __init__(self, logdir: Path):
        self._w = None
        for mod in ("tensorboardX", "torch.utils.tensorboard"):
            try:
                self._w = __import__(mod, fromlist=["SummaryWriter"]).SummaryWriter(str(logdir))
                break
            except Exception:  # noqa: BLE001, S112 - any import/runtime problem means no summaries
                continue

    @property
    def available(self) -> bool:
        return self._w is not None

    def scalars(self, step: int, values: dict):
        if self._w is None:
            return
        for k, v in values.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                self._w.add_scalar(k, v, step)
        self._w.flush()

    def close(self):
        if self._w is not None:
            self._w.close()


class Run:
    """An open run directory. Create with `open_run`."""

    def __init__(self, workdir: Path, config: dict, name: str, resumed: bool, max_to_keep: int = 3):
        self.workdir = workdir
        self.config = config
        self.name = name
        self.resumed = resumed
        self.metrics_path = workdir / "metrics.jsonl"
        self.ckpt_dir = workdir / "checkpoints"
        self._max_to_keep = max_to_keep
        self._manager = None
        self._summaries = _SummaryWriter(workdir / "tensorboard")
        last = self.latest_checkpoint()
        self._truncate_metrics(after=last if last is not None else -1)

    # ---- metrics -----------------------------------------------------------------------------
    def log(self, step: int, values: dict, echo: bool = False):
        """Appends one row to metrics.jsonl (keys starting with '_' are wall-clock, not compared)."""
        row = {"step": int(step), **{k: _jsonable(v) for k, v in values.items()},
               "_time": datetime.datetime.now(datetime.UTC).isoformat()}
        with open(self.metrics_path, "a") as f:
            f.write(json.dumps(row, sort_keys=True) + "\n")
        self._summaries.scalars(step, {k: v for k, v in row.items() if not k.startswith("_")})
        if echo:
            shown = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                              for k, v in row.items() if not k.startswith("_") and k != "step")
            print(f"[{self.name}] step {step}: {shown}", file=sys.stderr)

    def metrics(self) -> list[dict]:
        if not self.metrics_path.exists():
            return []
        return [json.loads(line) for line in self.metrics_path.read_text().splitlines() if line.strip()]

    def _truncate_metrics(self, after: int):
        rows = [r for r in self.metrics() if r.get("step", -1) <= after]
        if self.metrics_path.exists():
            tmp = self.metrics_path.with_suffix(".tmp")
            tmp.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
            os.replace(tmp, self.metrics_path)

    # ---- checkpoints (Orbax) -----------------------------------------------------------------
    @property
    def checkpoints(self):
        if self._manager is None:
            import orbax.checkpoint as ocp  # imported lazily: harness-only jobs never load JAX
            # synchronous saves: a run checkpoints between steps and goes on only once the step is on disk (an async
            # save followed by a wait was reported by the next save as "Waiting for previous save", a false alarm)
            self._manager = ocp.CheckpointManager(
                self.ckpt_dir.resolve(),
                options=ocp.CheckpointManagerOptions(max_to_keep=self._max_to_keep, create=True,
                                                     enable_async_checkpointing=False))
        return self._manager

    def latest_checkpoint(self) -> int | None:
        """The newest finished checkpoint step, or None (JAX/Orbax are not loaded when there is none)."""
        if not self.ckpt_dir.exists() or not any(p.name.isdigit() for p in self.ckpt_dir.iterdir()):
            return None
        return self.checkpoints.latest_step()

    def restore_step(self) -> int:
        """The first step still to run: 0 fresh, last checkpoint + 1 on resume."""
        last = self.latest_checkpoint()
        return 0 if last is None else last + 1

    def save(self, step: int, state):
        """Saves a pytree of arrays (and Python scalars) as the checkpoint of `step`; returns once it is on disk."""
        import orbax.checkpoint as ocp
        self.checkpoints.save(step, args=ocp.args.StandardSave(state))

    def restore(self, abstract_state):
        """The newest readable checkpointed state shaped like `abstract_state`, or None on a fresh run.

        A checkpoint that cannot be read (a truncated, missing or damaged file) while an older one can is
        reported in one sentence on stderr and moved aside to `checkpoints/<step>.damaged`; the older one is
        used and the metric rows after it are dropped, so `restore_step()` (call it after this) resumes there.
        If none can be read, CheckpointDamaged says so and nothing is moved (the state may not match the code).
        """
        import orbax.checkpoint as ocp

        from cudaperf_jax.experiment.orbax_loop import finishing_reads
        steps = self._steps()
        if not steps:
            return None
        errors = []
        abstract_state = _placed(abstract_state)
        for step in steps:
            try:
                with finishing_reads():   # a damaged file leaves no read running behind the error
                    state = self.checkpoints.restore(step, args=ocp.args.StandardRestore(abstract_state))
            except Exception as e:  # noqa: BLE001 - Orbax/TensorStore raise many kinds for a damaged file
                errors.append((step, e))
                continue
            for bad, e in errors:
                aside = self.ckpt_dir / f"{bad}.damaged"
                if aside.exists():
                    aside = self.ckpt_dir / f"{bad}.damaged.{os.getpid()}"
                os.replace(self.ckpt_dir / str(bad), aside)
                print(f"[{self.name}] checkpoint {bad} in {self.ckpt_dir} could not be read ({_reason(e)}); it was "
                      f"moved to {aside.name} and the run resumes from checkpoint {step}.", file=sys.stderr)
            if errors:
                self._reset_manager()
                self._truncate_metrics(after=step)
            return state
        raise CheckpointDamaged(f"no checkpoint in {self.ckpt_dir} could be read (checkpoint {steps[0]}: "
                                f"{_reason(errors[0][1])}); remove the damaged ones or use a new --workdir")

    def _steps(self) -> list[int]:
        """Finished checkpoint steps, newest first (unfinished saves are temporary directories Orbax ignores)."""
        if self.latest_checkpoint() is None:
            return []
        return sorted(self.checkpoints.all_steps(), reverse=True)

    def _reset_manager(self):
        if self._manager is not None:
            self._manager.close()
            self._manager = None

    def write_json(self, name: str, data) -> Path:
        path = self.workdir / name
        path.write_text(json.dumps(data, indent=2, sort_keys=True, default=str))
        return path

    def close(self):
        if self._manager is not None:
            self._manager.wait_until_finished()
            self._manager.close()
        self._summaries.close()


def _placed(abstract_state):
    """The restore target with a sharding on every abstract leaf (jax.ShapeDtypeStruct without one: the default
    device), so that Orbax places each array as the caller wants instead of reading the sharding the checkpoint was
    saved with (which it warns is unsafe on another topology). Concrete arrays carry their own sharding."""
    import jax
    device = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=device)
                        if isinstance(x, jax.ShapeDtypeStruct) and x.sharding is None else x, abstract_state)


def _jsonable(v):
    if hasattr(v, "item") and getattr(v, "size", 2) == 1:
        return v.item()
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    return json.loads(json.dumps(v, default=str))


def open_run(workdir: str | Path, config, name: str) -> Run:
    """Creates `workdir` (or resumes the run in it) and writes config.json.

    config.json holds the resolved config, the git commit, package versions, argv and host. Raises
    ConfigMismatch if the workdir was started with a different config.
    """
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    cfg = _to_plain(config)
    path = workdir / "config.json"
    resumed = path.exists()
    if resumed:
        try:
            old = json.loads(path.read_text())
        except json.JSONDecodeError:
            raise ConfigMismatch(f"{path} is not valid JSON; remove it or use a new --workdir") from None
        if old.get("name") not in (None, name):
            raise ConfigMismatch(f"{workdir} holds a {old.get('name')!r} run, not {name!r}; use a new --workdir")
        diff = _diff(old.get("config", {}), cfg)
        if diff:
            raise ConfigMismatch(f"{workdir} was started with a different config ({', '.join(diff[:5])} "
                                 "differ); pass the same config to resume, or use a new --workdir")
        meta = old
        meta.setdefault("resumes", []).append({"argv": sys.argv, "git": git_state(),
                                               "time": datetime.datetime.now(datetime.UTC).isoformat()})
    else:
        meta = {"name": name, "config": cfg, "git": git_state(), "versions": package_versions(),
                "argv": sys.argv, "host": platform.node(), "python": platform.python_version(),
                "started": datetime.datetime.now(datetime.UTC).isoformat()}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(meta, indent=2, sort_keys=True))
    os.replace(tmp, path)
    return Run(workdir, cfg, name, resumed)
