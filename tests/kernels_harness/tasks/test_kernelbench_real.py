"""The importer on KernelBench's real files (data/kernelbench): constraints of the module survive the
shrinking (groups, derived shapes, asserted image sizes), `dim`-named sizes shrink, and every one of the
250 problems imports (slow)."""
from pathlib import Path

import pytest

pytest.importorskip("torch")

from kernels_harness.tasks import kernelbench as kb
from kernels_harness.tasks import torch_source
from kernels_harness.tasks.schema import Task, config_env

DATA = Path(__file__).resolve().parents[3] / "data" / "kernelbench"


def test_constants_and_derived_overrides():
    src = "out_channels = 64\nN = 2048 * 2\nbias_shape = (out_channels, 1, 1)\nnum = out_channels\nx = foo()\n"
    c = torch_source.module_constants(src)
    assert c["N"].value == 4096 and not c["N"].derived
    assert c["num"].value == 64 and c["num"].depends == ("out_channels",)
    assert "bias_shape" not in c and "x" not in c
    ns = torch_source.exec_module(src.replace("x = foo()\n", ""), {"out_channels": 8, "extra": 3})
    assert ns["bias_shape"] == (8, 1, 1) and ns["num"] == 8 and ns["extra"] == 3


def test_dim_named_sizes_shrink():
    t, rep = kb.import_file_report(DATA / "level1" / "23_Softmax.py")
    small = t.configs[0]
    assert "dim" in rep["candidates"] and small["dim"] < t.configs[-1]["dim"]
    assert small["x_d1"] == small["dim"]


def test_derived_shape_follows_and_reference_agrees():
    """level2 ConvTranspose + bias_shape=(out_channels,1,1): the bias parameter shrinks with the channels,
    and the harness's PyTorch reference produces exactly the shapes the importer recorded."""
    from kernels_harness.run.references import torch_values
    f = next((DATA / "level2").glob("2_ConvTranspose2d_BiasAdd_Clamp_Scaling_Clamp_Divide.py"))
    t = kb.import_file(f)
    small = t.configs[0]
    assert small["out_channels"] < t.configs[-1]["out_channels"] and small["bias_d0"] == small["out_channels"]
    vals = torch_values(t, small, seed=1)
    for a in t.arrays:
        assert tuple(vals[a.name].shape) == t.shape(a, config_env(small)), a.name
    assert Task.from_dict(t.to_dict()) == t


def test_fallback_keeps_the_module_constraints():
    """ShuffleNet's unit asserts channels divisible by its groups: the first candidate (everything shrunk)
    fails and is reported; configs that shrink fewer constants are kept; the shipped task file is what the
    importer makes."""
    f = DATA / "level3" / "25_ShuffleNetUnit.py"
    t, rep = kb.import_file_report(f)
    assert len(t.configs) >= 2 and rep["dropped"], rep
    assert all(d["reason"] for d in rep["dropped"])
    shipped = Task.from_dict(__import__("json").loads((DATA / "tasks" / f"{t.id}.json").read_text()))
    assert shipped.configs == t.configs


@pytest.mark.slow
def test_all_250_problems_import(tmp_path):
    reports: list = []
    tasks, errors = kb.import_report(DATA, reports=reports)
    assert errors == [] and len(tasks) == 250
    assert sum(len(t.configs) >= 3 for t in tasks) >= 245
    _jp, mp = kb.write_report(reports, tmp_path)
    assert "250 of 250 files imported" in mp.read_text()
