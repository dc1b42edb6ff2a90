"""The ranker on real dataset tasks and their H200 times: pairs, a tiny training run, load/score round trip."""
from __future__ import annotations

import dataclasses

import ml_collections
import numpy as np
import pytest

from cudaperf_jax.ranker import fit
from cudaperf_jax.ranker import pairs as pairs_lib
from cudaperf_jax.ranker.model import RankerConfig
from kernels_harness.datasets import registry, times

FAMILIES = ("reduction", "transpose", "scan")


def tiny_config(**over):
    c = ml_collections.ConfigDict({
        "seed": 0, "dataset_seed": 0, "times": "data/times/h200", "features": "static", "features_cache": "", "families": ",".join(FAMILIES),
        "limit_per_family": 3, "margin": 1.1, "time_config": "largest", "weighting": "log_ratio", "steps": 60, "batch_pairs": 32, "lr": 3e-3,
        "weight_decay": 0.0, "log_every": 10, "checkpoint_every": 0, "eval_batch": 64, "best_of_n": 8})
    c.update(over)
    return c


TINY = RankerConfig(encoder="transformer", hidden=16, vocab=512, max_len=32, dim=16, depth=1, heads=2)


@pytest.fixture(scope="module")
def data():
    return fit.prepare(tiny_config())


def test_pairs_follow_the_rules_on_real_tasks():
    tasks = list(registry.generate(families=FAMILIES, limit_per_family=10))
    table = pairs_lib.implementations(tasks, times.load(fit.REPO / "data/times/h200"))
    p = pairs_lib.make_pairs(table, None, margin=1.1)
    assert (p.kind == 0).sum() > 20 and (p.kind == 1).sum() > 3
    assert (table.task_row[p.win] == table.task_row[p.lose]).all()
    speed = p.kind == 0
    assert table.correct[p.win].all() and table.correct[p.lose[speed]].all()
    assert table.wrong[p.lose[~speed]].all()
    t_w, t_l = table.time_ms[p.win[speed], -1], table.time_ms[p.lose[speed], -1]
    assert (t_l / t_w >= 1.1 - 1e-9).all()
    np.testing.assert_allclose(p.ratio[speed], t_l / t_w, rtol=1e-5)
    # near-ties are dropped: every correct pair of a task either forms a pair or is within the margin
    have = {(int(a), int(b)) for a, b in zip(p.win[speed], p.lose[speed])}
    for t in range(len(table.tasks)):
        good = [n for n in np.flatnonzero(table.task_row == t) if table.correct[n]]
        for i, a in enumerate(good):
            for b in good[i + 1:]:
                r = table.time_ms[b, -1] / table.time_ms[a, -1]
                assert ((a, b) in have) == (r >= 1.1) and ((b, a) in have) == (1 / r >= 1.1)
    # balanced across families, whatever each family's number of pairs
    idx = p.sample(np.random.default_rng(0), 30000)
    fams, counts = np.unique(p.family[idx], return_counts=True)
    assert set(fams) == set(FAMILIES) and counts.min() / counts.max() > 0.9
    w = p.weights("log_ratio")
    assert (w[~speed] == 1).all() and np.isclose(w[speed].mean(), 1.0)


def _train_loss(trained, d):
    from cudaperf_jax.ranker import train as tr
    p = d.pairs["train"]
    rows = np.arange(len(d.table))
    s = tr.score_rows(trained.score_fn, trained.params, trained.data, rows, 256)
    return float(np.mean(np.logaddexp(0.0, s[p.lose] - s[p.win])))


FEATURES = RankerConfig(encoder="features", hidden=16)
SLOW_TINY = pytest.param(TINY, marks=pytest.mark.slow, id="transformer")


@pytest.mark.parametrize("mcfg", [pytest.param(FEATURES, id="features"), pytest.param(TINY, id="transformer")])
def test_tiny_training_loss_goes_down(data, mcfg):  # both in the default run (~10 s for the transformer)
    before = _train_loss(fit.train(tiny_config(), mcfg, data, None, steps=0, progress=False), data)
    after = _train_loss(fit.train(tiny_config(), mcfg, data, None, progress=False), data)
    assert after < before - 0.05, (before, after)


@pytest.mark.parametrize("mcfg", [pytest.param(FEATURES, id="features"), SLOW_TINY])
def test_load_and_score_round_trip(data, tmp_path, mcfg):
    from cudaperf_jax.experiment import open_run
    from cudaperf_jax.ranker import train as tr
    from cudaperf_jax.ranker.scorer import Ranker
    cfg = tiny_config(steps=12)
    run = open_run(tmp_path, cfg, name="train_ranker")
    trained = fit.train(cfg, mcfg, data, run, progress=False)
    fit.write_ranker_file(tmp_path, mcfg, data, trained, cfg)
    run.close()
    r = Ranker.load(tmp_path, compile_baseline=False)
    rows = np.flatnonzero(data.table.split == "test")[:11]
    tasks = [data.table.tasks[data.table.task_row[n]] for n in rows]
    sources = [data.table.source[n] for n in rows]
    from kernels_harness.features.analyse import analyse
    feats = [analyse(t, s, compile=False).to_dict() for t, s in zip(tasks, sources)]
    raw = r.raw_scores(tasks, sources, feats)
    np.testing.assert_allclose(raw, tr.score_rows(trained.score_fn, trained.params, trained.data, rows, 16),
                               rtol=1e-4, atol=1e-5)
    p = r.score(tasks, sources, feats)
    assert p.dtype == np.float32 and p.shape == (len(rows),) and ((p > 0) & (p < 1)).all()
    for k, t in enumerate(tasks):  # a baseline scores exactly 1/2 against itself
        if data.table.baseline[rows[k]]:
            assert abs(p[k] - 0.5) < 1e-5
    empty = r.score(tasks[:2], sources[:2], [{}, {}])      # uncompiled candidates: no features
    assert empty.shape == (2,) and np.isfinite(empty).all()
    # a checkpoint step directory loads the same model
    step_dir = next(p for p in (tmp_path / "checkpoints").iterdir() if p.name.isdigit())
    np.testing.assert_allclose(Ranker.load(step_dir, compile_baseline=False).raw_scores(tasks, sources, feats), raw,
                               rtol=1e-5)
    with pytest.raises(FileNotFoundError, match="ranker.json"):
        Ranker.load(tmp_path / "nowhere")
    assert dataclasses.asdict(r.config) == dataclasses.asdict(mcfg)


@pytest.mark.slow
def test_backbone_encoder_trains_only_its_top_layers(data, tmp_path):
    import jax
    from flax import nnx

    from cudaperf_jax.experiment import open_run
    from cudaperf_jax.ranker.scorer import Ranker
    from tests.cudaperf_jax.models import tiny
    hf = tmp_path / "policy"
    tiny.hf_model("llama").save_pretrained(hf)
    tiny.tokenizer().save_pretrained(hf)
    mcfg = RankerConfig(encoder="backbone", backbone=str(hf), train_layers=1, max_len=32, hidden=16)
    start = fit.train(tiny_config(), mcfg, data, None, steps=0, progress=False)
    cfg = tiny_config(steps=6)
    run = open_run(tmp_path / "run", cfg, name="train_ranker")
    trained = fit.train(cfg, mcfg, data, run, progress=False)
    fit.write_ranker_file(tmp_path / "run", mcfg, data, trained, cfg)
    run.close()
    before = nnx.state(start.model.encoder.decoder)
    after = nnx.state(trained.model.encoder.decoder)
    changed = {jax.tree_util.keystr(p): not np.array_equal(a, b) for (p, a), b in
               zip(jax.tree_util.tree_flatten_with_path(before)[0], jax.tree.leaves(after))}
    assert not any(v for k, v in changed.items() if "[0]" in k or "embed" in k), changed   # frozen: layer 0, embedding
    assert any(v for k, v in changed.items() if "[1]" in k)                               # trained: the top layer
    rows = np.flatnonzero(data.table.split == "test")[:3]
    tasks = [data.table.tasks[data.table.task_row[n]] for n in rows]
    p = Ranker.load(tmp_path / "run", compile_baseline=False).score(tasks, [data.table.source[n] for n in rows],
                                                                    [{}, {}, {}])
    assert p.shape == (3,) and ((p > 0) & (p < 1)).all()
