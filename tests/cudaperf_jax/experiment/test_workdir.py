"""Run directories: metrics truncation on resume and config mismatch, without subprocesses."""
import json

import pytest

from cudaperf_jax.experiment import ConfigMismatch, open_run


def test_metrics_after_last_checkpoint_are_dropped_on_resume(tmp_path):
    run = open_run(tmp_path, {"seed": 1}, name="t")
    for step in range(3):
        run.log(step, {"x": step * 1.5})
    run.save(1, {"w": [1.0, 2.0]})
    run.close()
    again = open_run(tmp_path, {"seed": 1}, name="t")
    assert again.resumed and again.restore_step() == 2
    assert [r["step"] for r in again.metrics()] == [0, 1]
    restored = again.restore({"w": [0.0, 0.0]})
    assert restored["w"] == [1.0, 2.0]
    again.close()


def test_other_config_or_other_job_is_refused(tmp_path):
    open_run(tmp_path, {"seed": 1, "lr": 0.1}, name="t").close()
    with pytest.raises(ConfigMismatch, match="lr"):
        open_run(tmp_path, {"seed": 1, "lr": 0.2}, name="t")
    with pytest.raises(ConfigMismatch, match="'t' run"):
        open_run(tmp_path, {"seed": 1, "lr": 0.1}, name="other")
    assert json.loads((tmp_path / "config.json").read_text())["config"]["lr"] == 0.1
