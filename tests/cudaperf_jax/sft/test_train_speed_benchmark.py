"""benchmarks/train_speed.py compares like with like: transformers' shifted, -100-masked loss over the labels it is
given is our weighted token NLL on the same packed rows; rows of several commands merge into one table and ratio."""
import importlib.util
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from tests.cudaperf_jax.training.test_step import sft_batch

REPO = Path(__file__).resolve().parents[3]


def _load(name: str):
    sys.path.insert(0, str(REPO))
    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_transformers_labels_give_our_weighted_nll():
    hf = _load("train_speed_hf")
    batch = sft_batch(rows=3, length=20, seed=4)
    batch["weights"][:, -1] = 0          # as sft.packing: a row's last position never predicts a response token
    labels = hf.labels_of(batch)
    logits = np.random.default_rng(0).normal(size=(3, 20, 320))
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    # transformers' ForCausalLMLoss: position t predicts labels[:, t + 1]; -100 is ignored
    shifted = labels[:, 1:]
    keep = shifted != -100
    theirs = -np.take_along_axis(logp[:, :-1], np.where(keep, shifted, 0)[..., None], -1)[..., 0][keep].sum()
    ours = -(np.take_along_axis(logp, batch["targets"][..., None], -1)[..., 0] * batch["weights"]).sum()
    assert keep.sum() == batch["weights"].sum() > 0
    assert theirs == pytest.approx(ours, rel=1e-12)


def test_rows_of_several_commands_merge_into_one_table(tmp_path):
    bench = _load("train_speed")
    assert bench.parse_ours("pallas:noremat:block_bwd=32") == ("pallas", False, {"block_bwd": 32})
    assert bench.parse_ours("xla") == ("xla", True, {})
    with pytest.raises(SystemExit, match="ATTENTION"):
        bench.parse_ours("pallas:fast")
    row = {"shape": "6x3072", "targets": "qkvo", "tokens": 100, "padded_tokens": 120}
    bench.merge(tmp_path, [{**row, "framework": "ours", "config": "pallas", "tokens_per_s": 300.0},
                           {**row, "framework": "hf", "config": "sdpa", "error": "OutOfMemoryError: ..."}])
    doc = bench.merge(tmp_path, [{**row, "framework": "hf", "config": "sdpa:ckpt", "tokens_per_s": 150.0},
                                 {**row, "framework": "ours", "config": "pallas", "tokens_per_s": 330.0}])
    assert len(doc["rows"]) == 3                                   # the rerun of ours/pallas replaced its row
    assert doc["ratios"]["6x3072|qkvo"]["ratio"] == 2.2
    assert json.loads((tmp_path / "train_speed.json").read_text())["ratios"] == doc["ratios"]
    text = bench.table(doc)
    assert "error: OutOfMemoryError" in text and "= 2.2" in text
    bench.plot(doc, tmp_path / "train_speed.png")
    assert (tmp_path / "train_speed.png").stat().st_size > 1000
    assert bench.batch_path(SimpleNamespace(model="/m/qwen15.gguf", shape="2x2048", prompt="plain"), tmp_path).name \
        == "batch_qwen15_2x2048_plain.npz"
