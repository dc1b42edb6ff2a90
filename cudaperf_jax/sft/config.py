"""The typed configuration of an SFT run, built from the launch's ml_collections config and validated.

    cfg = SFTConfig.from_config(config)      # config: ml_collections.ConfigDict or a plain dict

Every field of experiments/configs/sft.py maps to one field here; an unknown or invalid field is refused
with an SFTConfigError whose message names the field and what to pass instead.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any

RESPONSES = ("fastest", "all_correct", "baseline")
SCHEDULES = ("cosine", "linear", "constant")
DTYPES = ("float32", "bfloat16")
TRACKS = ("c2cuda", "torch2cuda")


class SFTConfigError(ValueError):
    """A field of the SFT config that cannot be used; the message says which and what to pass."""


def _check(ok: bool, msg: str):
    if not ok:
        raise SFTConfigError(msg)


@dataclasses.dataclass(frozen=True)
class DataConfig:
    """Which examples, and how they are packed into rows of `seq_len` tokens."""
    dataset_seed: int = 0                 # seed of kernels_harness.datasets.registry.generate
    tracks: tuple[str, ...] = TRACKS
    families: tuple[str, ...] = ()        # () = every family of the tracks
    responses: str = "fastest"            # fastest | all_correct | baseline (see data.pick_implementations)
    refine: float = 0.0                   # fraction of answers also taught as a refinement turn (see sft.data)
    prompt: str = "worked_example"        # the prompt variant posing the tasks (cudaperf_jax.prompts.PROMPTS)
    times: str = "data/times/h200"        # measured times store (kernels_harness.datasets.times)
    max_train_tasks: int = 0              # 0 = all train tasks
    max_val_tasks: int = 0                # 0 = all val tasks
    shuffle_seed: int = 0                 # example order before packing and row order per epoch
    seq_len: int = 2048                   # tokens per packed row; longer examples are dropped (counted)
    batch_rows: int = 8                   # packed rows per step
    val_rows: int = 0                     # packed val rows evaluated (0 = all)

    def __post_init__(self):
        _check(self.responses in RESPONSES, f"data.responses={self.responses!r}: choose one of {RESPONSES}")
        _check(0.0 <= self.refine <= 1.0, f"data.refine={self.refine}: give a fraction between 0 and 1")
        from cudaperf_jax.prompts import PROMPTS
        _check(self.prompt in PROMPTS, f"data.prompt={self.prompt!r}: choose one of {sorted(PROMPTS)}")
        _check(bool(self.tracks) and all(t in TRACKS for t in self.tracks),
               f"data.tracks={self.tracks!r}: give one or both of {TRACKS}")
        _check(self.seq_len >= 16, f"data.seq_len={self.seq_len}: need at least 16 tokens per row")
        _check(self.batch_rows >= 1, f"data.batch_rows={self.batch_rows}: need at least 1 row per step")
        for name in ("max_train_tasks", "max_val_tasks", "val_rows"):
            _check(getattr(self, name) >= 0, f"data.{name}={getattr(self, name)}: use 0 (all) or a positive count")


@dataclasses.dataclass(frozen=True)
class OptimConfig:
    """AdamW with warmup then a decay schedule, and global-norm gradient clipping."""
    learning_rate: float = 5e-5
    schedule: str = "cosine"              # cosine | linear | constant (after warmup)
    warmup_steps: int = 20
    end_lr_fraction: float = 0.1          # final learning rate / peak (cosine, linear)
    weight_decay: float = 0.0             # on matrices only (ndim >= 2)
    b1: float = 0.9
    b2: float = 0.95
    eps: float = 1e-8
    grad_clip: float = 1.0                # global norm; 0 = off

    def __post_init__(self):
        _check(self.learning_rate > 0, f"optim.learning_rate={self.learning_rate}: must be positive")
        _check(self.schedule in SCHEDULES, f"optim.schedule={self.schedule!r}: choose one of {SCHEDULES}")
        _check(self.warmup_steps >= 0, f"optim.warmup_steps={self.warmup_steps}: must be >= 0")
        _check(0 <= self.end_lr_fraction <= 1, f"optim.end_lr_fraction={self.end_lr_fraction}: must be in [0, 1]")
        _check(self.weight_decay >= 0 and self.grad_clip >= 0, "optim.weight_decay and optim.grad_clip must be >= 0")
        _check(0 <= self.b1 < 1 and 0 <= self.b2 < 1 and self.eps > 0, "optim.b1, b2 must be in [0, 1) and eps > 0")


@dataclasses.dataclass(frozen=True)
class SFTConfig:
    """One SFT run: the policy, the data, the optimiser, how long, what is written."""
    seed: int = 0
    model: str = "default"                # a model name (assets list) | a .gguf file | a HF directory | an SFT run
    dtype: str = "float32"                # compute dtype (bfloat16 on GPUs)
    param_dtype: str = "float32"          # storage dtype of the trained weights (and of Adam's moments)
    steps: int = 300
    eval_every: int = 50                  # validation loss every N steps (and after the last)
    checkpoint_every: int = 25            # Orbax checkpoint every N steps (and after the last)
    keep_checkpoints: int = 2
    remat: bool = True                    # recompute layer activations in the backward pass
    export: bool = True                   # write a Hugging Face directory to <workdir>/export at the end
    export_dtype: str = "bfloat16"
    progress: bool = True                 # tqdm bar
    data: DataConfig = DataConfig()
    optim: OptimConfig = OptimConfig()

    def __post_init__(self):
        _check(self.dtype in DTYPES and self.param_dtype in DTYPES and self.export_dtype in DTYPES,
               f"dtype, param_dtype and export_dtype must be one of {DTYPES}")
        _check(self.steps >= 1, f"steps={self.steps}: need at least 1 step")
        _check(self.eval_every >= 1 and self.checkpoint_every >= 1 and self.keep_checkpoints >= 1,
               "eval_every, checkpoint_every and keep_checkpoints must be >= 1")

    @classmethod
    def from_config(cls, config: Any) -> SFTConfig:
        """Validated SFTConfig from an ml_collections ConfigDict (or dict) with sections `data` and `optim`."""
        d = config.to_dict() if hasattr(config, "to_dict") else dict(config)
        data = _build(DataConfig, d.pop("data", {}) or {}, "data.")
        optim = _build(OptimConfig, d.pop("optim", {}) or {}, "optim.")
        return _build(cls, d, "", data=data, optim=optim)


def _build(kind, values: dict, prefix: str, **extra):
    names = {f.name: f for f in dataclasses.fields(kind)}
    unknown = sorted(set(values) - set(names))
    _check(not unknown, f"unknown config field(s) {', '.join(prefix + u for u in unknown)}; "
                        f"the {prefix.rstrip('.') or 'top-level'} fields are {', '.join(sorted(set(names) - set(extra)))}")
    out = {}
    for k, v in values.items():
        if names[k].type.startswith("tuple"):
            v = tuple(v) if isinstance(v, (list, tuple)) else tuple(x for x in str(v).split(",") if x)
        out[k] = _typed(prefix + k, names[k].default, v)
    return kind(**out, **extra)


def _typed(name: str, default, v):
    """v checked against the type of the field's default (an int where a float goes is taken as a float)."""
    if isinstance(default, bool):
        ok = isinstance(v, bool)
    elif isinstance(default, int):
        ok = isinstance(v, int) and not isinstance(v, bool)
    elif isinstance(default, float):
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        v = float(v) if ok else v
    elif isinstance(default, (str, tuple)):
        ok = isinstance(v, str) if isinstance(default, str) else all(isinstance(x, str) for x in v)
    else:
        ok = True
    _check(ok, f"{name}={v!r}: must be {'a finite number' if isinstance(default, float) else type(default).__name__}"
               f"{' of strings' if isinstance(default, tuple) else ''}, like the default {default!r}")
    return v
