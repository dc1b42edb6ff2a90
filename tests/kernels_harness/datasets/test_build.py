"""Shards + manifest: written, reloaded unchanged, incremental on re-runs, validated through the harness."""
import json

from kernels_harness.datasets import build, registry, shards


def test_build_writes_shards_and_reloads_the_same_tasks(tmp_path):
    m = build.build(tmp_path, families=["histogram", "matvec"], shard_size=40, validate_sample=-1, progress=False)
    assert (tmp_path / "manifest.json").is_file()
    paths = [s["path"] for s in m["shards"]]
    assert paths == ["c2cuda/histogram-000.jsonl", "c2cuda/histogram-001.jsonl",
                     "c2cuda/matvec-000.jsonl", "c2cuda/matvec-001.jsonl"]
    expected = [t.to_dict() for t in registry.generate(families=["histogram", "matvec"])]
    loaded = [t.to_dict() for t in shards.load(tmp_path)]
    assert loaded == expected
    assert all(t.family == "matvec" for t in shards.load(tmp_path, families=["matvec"]))
    assert sum(s["n_tasks"] for s in m["shards"]) == len(expected)
    assert "validation" not in m["shards"][0]


def test_rebuild_is_incremental_and_validation_is_recorded(tmp_path):
    m1 = build.build(tmp_path, families=["histogram"], shard_size=64, validate_sample=1, progress=False)
    sh = m1["shards"][0]
    v = sh["validation"]
    assert v["backend"] == "cpu" and v["tasks"] == 1 and v["implementations"] >= 3 and v["failed_tasks"] == []
    shard_file = tmp_path / sh["path"]
    mtime = shard_file.stat().st_mtime_ns
    m2 = build.build(tmp_path, families=["histogram"], shard_size=64, validate_sample=1, progress=False)
    assert shard_file.stat().st_mtime_ns == mtime            # not rewritten
    assert m2["shards"][0]["validation"] == v                # not revalidated
    assert m2["validation_seconds"] == 0
    # a changed shard (tampered file) is rewritten
    shard_file.write_text(shard_file.read_text().replace('"histogram"', '"histogram" ', 1))
    m3 = build.build(tmp_path, families=["histogram"], shard_size=64, validate_sample=-1, progress=False)
    assert shards.sha256(shard_file.read_text()) == m3["shards"][0]["sha256"] == sh["sha256"]
    # a partial build keeps the other families' shards
    build.build(tmp_path, families=["matvec"], shard_size=64, validate_sample=-1, progress=False)
    fams = {s["family"] for s in json.loads((tmp_path / "manifest.json").read_text())["shards"]}
    assert fams == {"histogram", "matvec"}


def test_summary_table_counts_tasks(tmp_path):
    m = build.build(tmp_path, families=["softmax"], validate_sample=-1, progress=False)
    text = build.summary(m)
    assert "torch2cuda" in text and str(len(registry.variants("softmax"))) in text
