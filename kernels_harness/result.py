"""EvalResult: one record per evaluated candidate (see docs/design.md, "The harness").

Failures are values: `status` is one of STATUSES and never an exception that reaches the trainer.
Plain data only (JSON-serialisable via `to_dict`), so it crosses process boundaries unchanged.
"""
from __future__ import annotations

import dataclasses
import json
from typing import Any

# `unchecked`: no config of the task could be checked on this backend (too large for the cpu backend's
# budget); it carries no reward and `error` says why.
STATUSES = ("ok", "wrong", "compile_error", "runtime_error", "timeout", "hack", "unchecked")


@dataclasses.dataclass
class ConfigResult:
    """The verdict and timing of one input configuration."""
    index: int
    config: dict
    correct: bool | None = None          # None when skipped
    skipped: bool = False
    skip_reason: str = ""
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    time_ms: float | None = None         # median over repetitions (cuda backend only)
    time_iqr_ms: float | None = None
    baseline_ms: float | None = None
    compile_baseline_ms: float | None = None   # torch2cuda: torch.compile of the module, same protocol
    compile_baseline_from: str = ""        # "measured" in this job | "reused" (the pool's earlier median for this
                                         # task and config) | "failed" (torch.compile failed here) | "": not timed
    reps: int = 0
    error: str = ""                      # what went wrong on this config, one line


@dataclasses.dataclass
class EvalResult:
    task_id: str
    backend: str
    status: str = "ok"
    compiled: bool = False
    compile_log: str = ""
    violations: list = dataclasses.field(default_factory=list)   # [{"rule", "line", "text"}]
    configs: list = dataclasses.field(default_factory=list)      # [ConfigResult]
    correct: bool = False
    speedup: float | None = None         # geometric mean over timed configs; None on the cpu backend
    features: dict = dataclasses.field(default_factory=dict)     # structural features and score
    launches: list = dataclasses.field(default_factory=list)     # [{"kernel", "grid", "block", "smem"}]
    resources: dict = dataclasses.field(default_factory=dict)    # kernel -> {"registers", "smem", ...}
    feedback: str = ""
    seed: int | None = None              # the seed the trial inputs were drawn from
    seconds: dict = dataclasses.field(default_factory=dict)      # stage -> wall seconds
    error: str = ""                      # one line for runtime_error / timeout

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, not {self.status!r}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self, **kw) -> str:
        return json.dumps(self.to_dict(), **kw)

    @classmethod
    def from_dict(cls, d: dict) -> EvalResult:
        d = dict(d)
        d["configs"] = [c if isinstance(c, ConfigResult) else ConfigResult(**c) for c in d.get("configs", [])]
        return cls(**d)
