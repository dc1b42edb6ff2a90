"""Export names nvcc's headers already declare (tanh, exp, max, ...): refused in task files, renamed on import."""
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from kernels_harness.build import nvcc
from kernels_harness.tasks import reserved, schema
from kernels_harness.tasks.errors import TaskError

ROOT = Path(__file__).resolve().parents[3]
# op names a user's KernelBench-style problem files are likely to carry
OPS = ["tanh", "exp", "log", "sin", "cos", "abs", "max", "min", "norm", "round", "floor", "ceil", "sqrt", "rsqrt",
       "pow", "erf", "sign", "clamp", "mean", "sum", "prod", "select", "time", "remove", "div", "fma", "relu"]
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None and nvcc._pip_nvcc() is None, reason="needs nvcc")


def _exports(names):
    return "#include <cuda_runtime.h>\n" + "\n".join(reserved._export(n) for n in names)


def test_safe_entry_renames_only_taken_names():
    assert reserved.safe_entry("tanh") == "tanh_op" and reserved.safe_entry("max") == "max_op"
    assert reserved.safe_entry("relu") == "relu" and reserved.safe_entry("scaled_gelu_rowsum") == "scaled_gelu_rowsum"
    assert len(reserved.RESERVED) > 1000 and "tanh" in reserved.RESERVED
    assert reserved.collides("__syncthreads") and reserved.collides("_Exit") and not reserved.collides("_relu")
    assert reserved.safe_entry("__syncthreads") == "k__syncthreads" and reserved.safe_entry("_Exit") == "k_Exit"


def test_task_file_with_a_taken_entry_is_one_sentence():
    d = json.loads((ROOT / "data/kernelbench/tasks/level1_19_relu.json").read_text())
    d["entry"] = "tanh"
    with pytest.raises(TaskError, match=r"entry 'tanh' is a name nvcc's headers already declare.*'tanh_op'"):
        schema._parse_task(d)


@needs_nvcc
def test_every_entry_compiles_as_an_export_and_taken_names_do_not(tmp_path):
    entries = [json.loads(p.read_text())["entry"] for p in sorted((ROOT / "data/kernelbench/tasks").glob("*.json"))]
    names = sorted(set(entries) | {reserved.safe_entry(n) for n in OPS})
    ok = nvcc.build_shared(_exports(names), tmp_path / "ok.so")
    assert ok.ok, ok.log[:2000]
    for name in ("tanh", "max", "time", "__syncthreads"):
        assert not nvcc.build_shared(_exports([name]), tmp_path / f"{name}.so").ok, name


@pytest.mark.slow
@needs_nvcc
def test_generated_list_matches_this_nvcc():
    exe = shutil.which("nvcc") or str(nvcc._pip_nvcc())
    version = subprocess.run([exe, "--version"], capture_output=True, text=True, check=False).stdout.strip().splitlines()[-1]
    header = reserved.NAMES_FILE.read_text().splitlines()[0]
    if version not in header:
        pytest.skip(f"reserved_names.txt was generated with another nvcc ({header})")
    assert set(reserved.generate(exe)) == reserved.RESERVED
