"""The unified reward of docs/design.md, per candidate, from its EvalResult (and the ranker's score):

    r = w_c*correct + correct*w_p*clip(log2(speedup)) + g*w_s*structure + g*w_r*(ranker - 0.5) - penalty

with g = 1 when correct, `gate_compiled` when it only compiled (and ran), 0 otherwise; penalty = penalty_compile
for a compile failure, penalty_hack for a flagged hack. A verdict the harness could not establish (`unchecked`)
or any status this module does not know gets no reward at all (every component 0).

    reward = UnifiedReward(RewardConfig(terms="correct,speed"))          # an ablation is a config string
    comps = reward(results, tasks, sources)    # {"correct", "speed", "structure", "ranker", "penalty", "total"}
                                               # each float32[n]
    reward.notes(results)                      # {"speed": "off: ...", "ranker": "off", ...}

Speed: on the cpu backend the harness measures no time (speedup None), so the speed term is 0 and the notes say
so. Ranker: off (term 0, `ranker: off`) until `ranker_path` names a checkpoint; then
cudaperf_jax.ranker.scorer.Ranker is imported lazily and scores (task, source, features) triples.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

TERMS = ("correct", "speed", "structure", "ranker", "penalty")
COMPONENTS = TERMS + ("total",)
REWARDED = ("ok", "wrong", "compile_error", "runtime_error", "timeout", "hack")   # statuses with a reward


@dataclasses.dataclass(frozen=True)
class RewardConfig:
    """Weights of the unified reward; `terms` names the terms that are on (comma-separated)."""
    terms: str = "correct,speed,structure,ranker,penalty"
    w_correct: float = 1.0
    w_speed: float = 0.5
    speed_clip_low: float = -1.0      # clip of log2(speedup): 0.5x .. 4x
    speed_clip_high: float = 2.0
    w_structure: float = 0.3
    w_ranker: float = 0.3
    gate_compiled: float = 0.25       # g for a candidate that compiled and ran but is not correct
    penalty_compile: float = 0.2      # subtracted for compile_error (also an answer with no code)
    penalty_hack: float = 1.0         # subtracted for a flagged hack
    ranker_path: str = ""             # a ranker checkpoint; "" = ranker off

    def __post_init__(self):
        bad = [t for t in self.term_set if t not in TERMS]
        if bad:
            raise ValueError(f"unknown reward terms {bad}; choose from {', '.join(TERMS)} (comma-separated)")
        if self.speed_clip_low > self.speed_clip_high:
            raise ValueError("speed_clip_low must not exceed speed_clip_high")
        if not 0.0 <= self.gate_compiled <= 1.0:
            raise ValueError("gate_compiled must lie in [0, 1]")
        if self.penalty_compile < 0 or self.penalty_hack < 0:
            raise ValueError("penalties are magnitudes (subtracted); give them >= 0")

    @property
    def term_set(self) -> tuple[str, ...]:
        return tuple(t.strip() for t in self.terms.split(",") if t.strip())

    def on(self, term: str) -> bool:
        return term in self.term_set

    @classmethod
    def from_config(cls, c) -> RewardConfig:
        """From an ml_collections ConfigDict (or dict) with a subset of the fields."""
        d = c.to_dict() if hasattr(c, "to_dict") else dict(c)
        return cls(**{f.name: d[f.name] for f in dataclasses.fields(cls) if f.name in d})


def _structure(r) -> float:
    s = (r.features or {}).get("score") if isinstance(r.features, dict) else None
    return float(s) if isinstance(s, (int, float)) and math.isfinite(s) else 0.0


class UnifiedReward:
    """Callable (results, tasks, sources) -> {component: float32[n]}; see the module docstring."""

    names = COMPONENTS

    def __init__(self, cfg: RewardConfig = RewardConfig()):
        self.cfg = cfg
        self._ranker = None
        if cfg.on("ranker") and cfg.ranker_path:
            from cudaperf_jax.ranker.scorer import (
                Ranker,  # lazily: only a configured ranker loads its model
            )
            self._ranker = Ranker.load(cfg.ranker_path)

    @property
    def ranker_on(self) -> bool:
        return self._ranker is not None

    def __call__(self, results: list, tasks: list | None = None, sources: list | None = None) -> dict:
        c = self.cfg
        n = len(results)
        out = {k: np.zeros(n, np.float32) for k in COMPONENTS}
        known = np.array([r.status in REWARDED for r in results], bool)
        correct = np.array([r.status == "ok" and bool(r.correct) for r in results], np.float32)
        ran = np.array([r.status in ("ok", "wrong") for r in results], bool)
        gate = np.where(correct > 0, 1.0, np.where(ran, c.gate_compiled, 0.0)).astype(np.float32)
        if c.on("correct"):
            out["correct"] = c.w_correct * correct
        if c.on("speed"):
            sp = np.array([math.log2(r.speedup) if r.speedup and r.speedup > 0 else 0.0 for r in results], np.float32)
            out["speed"] = correct * c.w_speed * np.clip(sp, c.speed_clip_low, c.speed_clip_high)
        if c.on("structure"):
            out["structure"] = gate * c.w_structure * np.array([_structure(r) for r in results], np.float32)
        if c.on("ranker") and self._ranker is not None and (gate > 0).any():
            if tasks is None or sources is None:
                raise ValueError("the ranker term needs the tasks and sources of the results")
            idx = np.flatnonzero(gate > 0)
            s = np.asarray(self._ranker.score([tasks[i] for i in idx], [sources[i] for i in idx],
                                              [results[i].features for i in idx]), np.float32)
            out["ranker"][idx] = gate[idx] * c.w_ranker * (s - 0.5)
        if c.on("penalty"):
            st = np.array([r.status for r in results])
            out["penalty"] = -(c.penalty_compile * (st == "compile_error") + c.penalty_hack * (st == "hack"))
            out["penalty"] = out["penalty"].astype(np.float32)
        for k in TERMS:
            out[k] = np.where(known, out[k], 0.0).astype(np.float32)   # unchecked / unknown: no reward
        out["total"] = sum(out[k] for k in TERMS).astype(np.float32)
        return out

    def notes(self, results: list = ()) -> dict:
        """Which terms are on and, for those that contribute nothing by construction, why."""
        c = self.cfg
        notes = {t: ("on" if c.on(t) else "off: not in reward.terms") for t in TERMS}
        if c.on("ranker") and self._ranker is None:
            notes["ranker"] = "off"   # no checkpoint configured (reward.ranker_path)
        if c.on("speed") and results and all(getattr(r, "backend", "") == "cpu" for r in results):
            notes["speed"] = "off: the cpu backend measures no time (term 0)"
        unrewarded = sum(r.status not in REWARDED for r in results)
        if unrewarded:
            notes["unrewarded"] = f"{unrewarded} candidates unchecked or of unknown status (reward 0)"
        return notes
