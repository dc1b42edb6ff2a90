"""C reference builds (gcc, C first then C++) and the reference runner on host arrays."""
import numpy as np

from kernels_harness.run import compile as compile_lib
from kernels_harness.run.references import c_reference_outputs
from kernels_harness.tasks.schema import Task
from tests.kernels_harness.run.test_inputs import SAXPY


def test_c_reference_builds_and_computes_saxpy(tmp_path):
    task = Task.from_dict(SAXPY)
    b = compile_lib.build("c_reference", "cpu", task.source, str(tmp_path / "ref.so"))
    assert b["ok"], b["log"]
    x = np.arange(5, dtype=np.float32)
    y = np.ones(5, dtype=np.float32)
    out = c_reference_outputs(b["path"], task, {"N": 5}, {"x": x, "y": y}, {"n": 5, "a": 2.5})
    np.testing.assert_array_equal(out["y"], 2.5 * x + 1)
    np.testing.assert_array_equal(y, np.ones(5))  # the caller's inputs are not touched


def test_cpp_reference_falls_back_to_cxx_and_bad_source_fails_with_log(tmp_path):
    cpp = "#include <algorithm>\nvoid clampit(int n, float* y) { for (int i = 0; i < n; i++) y[i] = std::min(y[i], 0.5f); }"
    b = compile_lib.build("c_reference", "cpu", cpp, str(tmp_path / "c.so"))
    assert b["ok"], b["log"]
    bad = compile_lib.build("c_reference", "cpu", "void f( {", str(tmp_path / "bad.so"))
    assert not bad["ok"] and "error" in bad["log"]
