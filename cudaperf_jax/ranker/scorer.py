"""The trained pairwise ranker as a reward component and a best-of-n selector.

    from cudaperf_jax.ranker.scorer import Ranker
    r = Ranker.load("runs/train_ranker")            # a run directory, its checkpoints/ or checkpoints/<step>
    p = r.score(tasks, sources, features)          # float32[B]: P(candidate beats the task's baseline)

tasks: kernels_harness Task objects; sources: CUDA strings; features: the dicts of EvalResult.features
(may be empty, e.g. for a candidate that did not compile). The probability is sigmoid(s(candidate) -
s(baseline)) with s the ranker's score; the baseline's score is computed once per task (its features
from kernels_harness.features.analyse, with ptxas when `compile_baseline`) and kept in this object; a
task without a baseline implementation is compared with the mean training baseline score. Scores are
computed by one jitted function over batches padded to a power of two (at least 8), so a few batch
sizes compile once each. Training: experiments/train_ranker.py (cudaperf_jax/ranker/).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from cudaperf_jax.ranker import featurize
from cudaperf_jax.ranker.model import RankerConfig

__all__ = ["Ranker", "RankerConfig"]


def _run_dir(path: Path) -> tuple[Path, int | None]:
    """(run directory, checkpoint step or None for the latest) from any of the accepted paths."""
    if (path / "ranker.json").is_file():
        return path, None
    if path.name == "checkpoints" and (path.parent / "ranker.json").is_file():
        return path.parent, None
    if path.name.isdigit() and (path.parent.parent / "ranker.json").is_file():
        return path.parent.parent, int(path.name)
    raise FileNotFoundError(f"{path} is not a ranker run directory (no ranker.json); pass the --workdir of "
                            "experiments/train_ranker.py, its checkpoints/ or a checkpoints/<step> directory")


class Ranker:
    """A loaded ranker. Build with Ranker.load(path)."""

    def __init__(self, config: RankerConfig, score_fn, params, tokenizer=None, baseline_score_mean: float = 0.0,
                 compile_baseline: bool = True):
        self.config = config
        self._score_fn = score_fn
        self._params = params
        self._tokenizer = tokenizer
        self._baseline_mean = float(baseline_score_mean)
        self.compile_baseline = compile_baseline
        self._baseline: dict[str, float] = {}   # task id -> score of its baseline implementation
        self._task_cols: dict[str, dict] = {}

    @classmethod
    def load(cls, path: str | Path, compile_baseline: bool = True) -> Ranker:
        import orbax.checkpoint as ocp

        from cudaperf_jax.ranker import fit
        from cudaperf_jax.ranker import train as tr
        from cudaperf_jax.ranker.model import build, from_flat
        run, step = _run_dir(Path(path).expanduser().resolve())
        info = json.loads((run / "ranker.json").read_text())
        if info.get("feature_version") != featurize.FEATURE_VERSION:
            raise ValueError(f"{run} was trained on feature version {info.get('feature_version')}, this code computes "
                             f"version {featurize.FEATURE_VERSION}; retrain with experiments/train_ranker.py")
        cfg = RankerConfig.from_dict(info["model"])
        decoder = tokenizer = None
        if cfg.encoder == "backbone":
            decoder, tokenizer = fit.load_backbone(cfg)
        model, filt = build(cfg, featurize.NUM_FEATURES, int(info.get("seed", 0)), decoder)
        mngr = ocp.CheckpointManager((run / "checkpoints").resolve())
        step = mngr.latest_step() if step is None else step
        if step is None:
            raise FileNotFoundError(f"{run}/checkpoints holds no checkpoint; the training run did not save one")
        raw = mngr.restore(step, args=ocp.args.StandardRestore())
        mngr.close()
        model.mean.value = np.asarray(raw["stats"]["mean"], np.float32)
        model.std.value = np.asarray(raw["stats"]["std"], np.float32)
        graphdef, params, frozen = tr.split(model, filt)
        params = from_flat(params, raw["params"])
        return cls(cfg, tr.make_score_fn(graphdef, frozen), params, tokenizer, info.get("baseline_score_mean", 0.0),
                   compile_baseline)

    # ---- scoring ---------------------------------------------------------------------------------
    def raw_scores(self, tasks: list, sources: list[str], features: list[dict | None]) -> np.ndarray:
        """float32[B]: the ranker's unnormalised scores s(candidate) (higher = better)."""
        from cudaperf_jax.ranker import fit
        if not (len(tasks) == len(sources) == len(features)):
            raise ValueError(f"tasks, sources and features must have one entry per candidate "
                             f"(got {len(tasks)}, {len(sources)}, {len(features)})")
        if not tasks:
            return np.zeros(0, np.float32)
        x = np.stack([featurize.vector(t, s, f, self._cols(t)) for t, s, f in zip(tasks, sources, features)])
        toks, mask = fit.token_arrays(self.config, list(sources), self._tokenizer)
        b = len(tasks)
        size = max(8, 1 << (b - 1).bit_length())
        pad = np.concatenate([np.arange(b), np.zeros(size - b, np.int64)])
        out = self._score_fn(self._params, x[pad], toks[pad], mask[pad])
        return np.asarray(out, np.float32)[:b]

    def score(self, tasks: list, sources: list[str], features: list[dict | None]) -> np.ndarray:
        """float32[B] in (0, 1): the probability that each candidate beats its task's baseline implementation."""
        s = self.raw_scores(tasks, sources, features)
        base = np.array([self._baseline_score(t) for t in tasks], np.float32)
        return (1.0 / (1.0 + np.exp(-(s - base)))).astype(np.float32)

    def _cols(self, task) -> dict:
        if task.id not in self._task_cols:
            self._task_cols[task.id] = featurize.task_columns(task)
        return self._task_cols[task.id]

    def _baseline_score(self, task) -> float:
        if task.id not in self._baseline:
            base = next((i for i in task.implementations if i.baseline), None)
            if base is None:
                self._baseline[task.id] = self._baseline_mean
            else:
                from kernels_harness.features.analyse import analyse
                f = analyse(task, base.source, compile=self.compile_baseline).to_dict()
                self._baseline[task.id] = float(self.raw_scores([task], [base.source], [f])[0])
        return self._baseline[task.id]
