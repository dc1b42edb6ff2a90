"""benchmarks/soak.py on the cpu backend: a run stopped after its first chunk is continued by a later sitting
(--resume_from its JSON, another --out) to the whole mix, verdicts as labelled and nothing leaked; a JSON of
another mix is refused in one sentence."""
import importlib.util
import json
import subprocess
from pathlib import Path

import pytest

SOAK = Path(__file__).resolve().parents[3] / "benchmarks" / "soak.py"


def _soak():
    spec = importlib.util.spec_from_file_location("soak_benchmark", SOAK)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_second_sitting_finishes_the_first_runs_mix(tmp_path, capsys):
    soak = _soak()
    common = ["--n", "6", "--chunk", "3", "--backend", "cpu", "--workers", "2", "--compile_workers", "2", "--no_torch"]
    # a child this process had before the pool (as a test runner may) is not a leak of the pool's
    before = subprocess.Popen(["sleep", "120"])
    try:
        assert soak.main(common + ["--max_minutes", "0.0001", "--out", str(tmp_path / "a")]) == 0
    finally:
        before.kill()
        before.wait()
    first = json.loads((tmp_path / "a" / "soak_cpu.json").read_text())
    assert first["summary"]["n_run"] == 3
    assert soak.main(common + ["--resume_from", str(tmp_path / "a" / "soak_cpu.json"), "--out", str(tmp_path / "b")]) == 0
    assert "1 chunks already saved" in capsys.readouterr().out   # the second sitting runs chunk 1 only
    both = json.loads((tmp_path / "b" / "soak_cpu.json").read_text())
    assert both["summary"]["n_run"] == 6 and both["summary"]["accuracy"] == 1.0
    assert [c["index"] for c in both["chunks"]] == [0, 1]
    assert both["chunks"][0]["verdicts"] == first["chunks"][0]["verdicts"]   # taken over, not rerun
    assert not any(both["summary"]["leaks"][k] for k in ("orphans", "escaped_files", "after_close_descendants"))
    with pytest.raises(SystemExit, match="that run had chunk 3, this one 2"):
        soak.main(["--n", "6", "--chunk", "2", "--backend", "cpu", "--no_torch",
                   "--resume_from", str(tmp_path / "a" / "soak_cpu.json"), "--out", str(tmp_path / "c")])
