"""The ranker's offline job: data, training with checkpoints, held-out evaluation (experiments/train_ranker.py).

    data = prepare(config)                        # tasks, ImplTable, features, pairs per split
    trained = train(config, model_config, data, run)      # run: cudaperf_jax.experiment.workdir.Run
    results = evaluate_all(config, data, {"ranker": trained, ...})
"""
from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from tqdm import tqdm

from cudaperf_jax.ranker import evaluate as ev
from cudaperf_jax.ranker import features_cache, featurize
from cudaperf_jax.ranker import pairs as pairs_lib
from cudaperf_jax.ranker import tokens as tok_lib
from cudaperf_jax.ranker import train as tr
from cudaperf_jax.ranker.model import RankerConfig, build, flat_state, from_flat

REPO = Path(__file__).resolve().parents[2]
SPLITS = ("train", "val", "test")


def _path(p: str) -> Path:
    q = Path(p)
    return q if q.is_absolute() else REPO / q


@dataclasses.dataclass
class Data:
    table: pairs_lib.ImplTable
    x: np.ndarray                 # float32 [N, F]
    structural: np.ndarray        # float32 [N] static structural score (0 where none)
    pairs: dict                   # split -> Pairs
    speedup: np.ndarray           # float64 [N]
    seconds: dict


def features_for(table, config) -> tuple[np.ndarray, np.ndarray, dict]:
    """(x [N, F], structural [N], info): from the cache where its rows match, else static analysis now."""
    from kernels_harness.features.analyse import analyse
    t0 = time.time()
    x = np.zeros((len(table), featurize.NUM_FEATURES), np.float32)
    structural = np.full(len(table), np.nan, np.float32)
    todo = list(range(len(table)))
    info = {"from_cache": 0}
    if config.features == "cache":
        cache = features_cache.load(_path(config.features_cache))
        look = features_cache.lookup(cache)
        left = []
        for n in todo:
            r = look.get((table.tasks[table.task_row[n]].id, table.impl[n]))
            if r is not None and cache["sha1"][r] == features_cache.sha1(table.source[n]):
                x[n], structural[n] = cache["x"][r], cache["structural"][r]
            else:
                left.append(n)
        info["from_cache"] = len(todo) - len(left)
        todo = left
    elif config.features != "static":
        raise ValueError(f"config.features must be 'cache' or 'static', got {config.features!r}")
    cols: dict = {}
    for n in tqdm(todo, desc="static features", disable=not todo, file=sys.stderr):
        task = table.tasks[table.task_row[n]]
        f = analyse(task, table.source[n], compile=False).to_dict()
        cols.setdefault(task.id, featurize.task_columns(task))
        x[n] = featurize.vector(task, table.source[n], f, cols[task.id])
        s = featurize.static_score(f)
        structural[n] = np.nan if s is None else s
    info.update(computed_static=len(todo), seconds=round(time.time() - t0, 1))
    return x, np.nan_to_num(structural, nan=0.0), info


def prepare(config) -> Data:
    from kernels_harness.datasets import registry, times
    t0 = time.time()
    fams = [f for f in str(config.families).split(",") if f] or None
    tasks = list(registry.generate(seed=config.dataset_seed, families=fams,
                                   limit_per_family=config.limit_per_family or None))
    table = pairs_lib.implementations(tasks, times.load(_path(config.times)))
    if not len(table):
        raise ValueError(f"no measured implementations for these tasks in {config.times}; check --config.families")
    x, structural, finfo = features_for(table, config)
    ps = {s: pairs_lib.make_pairs(table, s, config.margin, config.time_config) for s in SPLITS}
    if not len(ps["train"]):
        raise ValueError("no training pairs; widen --config.families or lower --config.margin")
    return Data(table, x, structural, ps, table.speedup(config.time_config),
                {"prepare_s": round(time.time() - t0, 1), "features": finfo})


def load_backbone(mcfg: RankerConfig):
    from cudaperf_jax.models.loading import load_policy
    return load_policy(mcfg.backbone, dtype=mcfg.dtype)


def token_arrays(mcfg: RankerConfig, sources: list[str], tokenizer=None) -> tuple[np.ndarray, np.ndarray]:
    if mcfg.encoder == "transformer":
        return tok_lib.code_tokens(sources, mcfg.vocab, mcfg.max_len)
    if mcfg.encoder == "backbone":
        return tok_lib.policy_tokens(tokenizer, sources, mcfg.max_len)
    return np.zeros((len(sources), 1), np.int32), np.ones((len(sources), 1), bool)


@dataclasses.dataclass
class Trained:
    model: object
    score_fn: object
    params: object
    data: dict
    curve: list


def train(config, mcfg: RankerConfig, data: Data, run=None, steps: int | None = None, seed: int | None = None,
          progress: bool = True) -> Trained:
    """Trains one ranker on data.pairs["train"]; checkpoints into `run` (resumes from its last one)."""
    steps = config.steps if steps is None else steps
    seed = config.seed if seed is None else seed
    decoder = tokenizer = None
    if mcfg.encoder == "backbone":
        decoder, tokenizer = load_backbone(mcfg)
    model, filt = build(mcfg, featurize.NUM_FEATURES, seed, decoder)
    train_rows = np.flatnonzero(data.table.split == "train")
    tr.set_feature_stats(model, data.x[train_rows])
    toks, mask = token_arrays(mcfg, data.table.source, tokenizer)
    dev = {"x": jnp.asarray(data.x), "tokens": jnp.asarray(toks), "mask": jnp.asarray(mask)}
    graphdef, params, frozen = tr.split(model, filt)
    opt = tr.make_optimizer(config.lr, steps, config.weight_decay)
    opt_state = opt.init(params)
    start = 0
    if run is not None and run.latest_checkpoint() is not None:
        target = {"params": flat_state(params), "stats": {"mean": model.mean.value, "std": model.std.value},
                  "opt": {str(i): v for i, v in enumerate(jax.tree.leaves(opt_state))}, "step": 0}
        restored = run.restore(target)
        params = from_flat(params, restored["params"])
        leaves = [restored["opt"][str(i)] for i in range(len(restored["opt"]))]
        opt_state = jax.tree.unflatten(jax.tree.structure(opt_state), leaves)
        start = int(restored["step"]) + 1
    step_fn = tr.make_train_step(graphdef, frozen, opt)
    p = data.pairs["train"]
    w_all = p.weights(config.weighting)
    rng = np.random.default_rng([seed, start])
    curve, t0 = [], time.time()
    for step in tqdm(range(start, steps), desc=f"train {mcfg.encoder}", disable=not progress, file=sys.stderr):
        idx = p.sample(rng, config.batch_pairs)
        batch = {"win": jnp.asarray(p.win[idx]), "lose": jnp.asarray(p.lose[idx]), "w": jnp.asarray(w_all[idx])}
        params, opt_state, m = step_fn(params, opt_state, dev, batch)
        if step % config.log_every == 0 or step == steps - 1:
            vals = {k: float(v) for k, v in m.items()}
            curve.append((step, vals["loss"]))
            if run is not None:
                run.log(step, {**vals, "_s": time.time() - t0})
        if run is not None and (step == steps - 1 or (config.checkpoint_every and step % config.checkpoint_every == 0
                                                      and step > start)):
            run.save(step, {"params": flat_state(params), "stats": {"mean": model.mean.value, "std": model.std.value},
                            "opt": {str(i): v for i, v in enumerate(jax.tree.leaves(opt_state))},
                            "step": np.int32(step)})
    nnx.update(model, params)
    return Trained(model, tr.make_score_fn(graphdef, frozen), params, dev, curve)


def evaluate_all(config, data: Data, scorers: dict) -> dict:
    """{split: {scorer name: metrics}} on val and test; scorers: name -> Trained or a float array [N]."""
    out: dict = {}
    for split in ("val", "test"):
        rows = np.flatnonzero(data.table.split == split)
        if not len(rows):
            continue
        out[split] = {}
        for name, sc in scorers.items():
            if isinstance(sc, Trained):
                s = np.full(len(data.table), -np.inf, np.float32)
                s[rows] = tr.score_rows(sc.score_fn, sc.params, sc.data, rows, config.eval_batch)
            else:
                s = np.asarray(sc, np.float32)
            out[split][name] = ev.evaluate(data.table, data.pairs[split], s, data.speedup, rows, config.best_of_n,
                                           config.seed)
    return out


def write_ranker_file(workdir: Path, mcfg: RankerConfig, data: Data, trained: Trained, config) -> Path:
    """ranker.json: what Ranker.load needs besides the checkpoint (model config, feature names)."""
    base_rows = np.flatnonzero(data.table.baseline & (data.table.split == "train"))
    s = tr.score_rows(trained.score_fn, trained.params, trained.data, base_rows[:4096], config.eval_batch)
    info = {"model": dataclasses.asdict(mcfg), "feature_names": list(featurize.FEATURE_NAMES),
            "feature_version": featurize.FEATURE_VERSION, "baseline_score_mean": float(np.mean(s)) if len(s) else 0.0,
            "seed": int(config.seed)}
    path = Path(workdir) / "ranker.json"
    path.write_text(json.dumps(info, indent=2))
    return path
