"""Damaged and partial checkpoints (issue 26): the newest one truncated, missing a file or overwritten with garbage
is reported in one sentence naming it, set aside, and the one before it used; metrics resume from there."""
import os
import random

import numpy as np
import pytest

from cudaperf_jax.experiment import CheckpointDamaged, open_run


def _state(step: int) -> dict:
    return {"w": np.arange(4096, dtype=np.float32) * (step + 1), "b": np.full((3,), step, np.int32)}


def _run_to(path, last: int):
    run = open_run(path, {"seed": 3}, name="t")
    for step in range(last + 1):
        run.log(step, {"loss": 1.0 / (step + 1)})
        run.save(step, _state(step))
    run.close()


def _data_files(step_dir):
    files = [p for p in step_dir.rglob("*") if p.is_file()]
    # the array data (largest files), not Orbax's small metadata files
    return sorted(files, key=lambda p: p.stat().st_size, reverse=True)


def _truncate(step_dir):
    for p in _data_files(step_dir)[:2]:
        p.write_bytes(p.read_bytes()[: p.stat().st_size // 3])


def _delete(step_dir):
    for p in _data_files(step_dir)[:2]:
        p.unlink()


def _garbage(step_dir):
    rng = random.Random(0)
    for p in _data_files(step_dir)[:2]:
        p.write_bytes(bytes(rng.randrange(256) for _ in range(p.stat().st_size)))


@pytest.mark.parametrize("damage", [_truncate, _delete, _garbage], ids=["truncated", "deleted", "garbage"])
def test_damaged_newest_checkpoint_is_named_and_the_previous_one_used(tmp_path, capsys, damage):
    _run_to(tmp_path, 3)
    damage(tmp_path / "checkpoints" / "3")
    run = open_run(tmp_path, {"seed": 3}, name="t")
    state = run.restore(_state(0))
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("[t] checkpoint 3 in ") and "could not be read" in err[0]
    assert err[0].endswith("moved to 3.damaged and the run resumes from checkpoint 2.")
    np.testing.assert_array_equal(state["w"], _state(2)["w"])
    np.testing.assert_array_equal(state["b"], _state(2)["b"])
    assert run.restore_step() == 3 and [r["step"] for r in run.metrics()] == [0, 1, 2]
    assert (tmp_path / "checkpoints" / "3.damaged").is_dir() and not (tmp_path / "checkpoints" / "3").exists()
    run.log(3, {"loss": 0.25})               # the resumed run writes step 3 again, checkpoint included
    run.save(3, _state(3))
    run.close()
    again = open_run(tmp_path, {"seed": 3}, name="t")
    np.testing.assert_array_equal(again.restore(_state(0))["w"], _state(3)["w"])
    assert again.restore_step() == 4 and capsys.readouterr().err == ""
    again.close()


def test_unfinished_save_is_ignored(tmp_path, capsys):
    """A save killed before Orbax finalised it leaves a temporary directory: the last finished one is used."""
    _run_to(tmp_path, 1)
    partial = tmp_path / "checkpoints" / "2.orbax-checkpoint-tmp-1234567"
    (partial / "default").mkdir(parents=True)
    (partial / "default" / "some_array").write_bytes(os.urandom(100))
    run = open_run(tmp_path, {"seed": 3}, name="t")
    np.testing.assert_array_equal(run.restore(_state(0))["w"], _state(1)["w"])
    assert run.restore_step() == 2 and capsys.readouterr().err == ""
    run.close()


def test_no_readable_checkpoint_is_one_sentence_and_nothing_moves(tmp_path):
    _run_to(tmp_path, 1)
    for step in (0, 1):
        _garbage(tmp_path / "checkpoints" / str(step))
    run = open_run(tmp_path, {"seed": 3}, name="t")
    with pytest.raises(CheckpointDamaged, match=r"^no checkpoint in .* could be read \(checkpoint 1: .*\); remove"):
        run.restore(_state(0))
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir() if p.name.isdigit()) == ["0", "1"]
    run.close()
