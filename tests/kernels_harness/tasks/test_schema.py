"""Task files: the documented JSON form loads; malformed ones fail with a one-sentence TaskError."""
import copy
import json
import warnings

import numpy as np
import pytest

from kernels_harness.tasks import expr, inits
from kernels_harness.tasks.errors import TaskError
from kernels_harness.tasks.schema import Task, load_task

SAXPY = {
    "id": "saxpy", "track": "c2cuda", "entry": "saxpy",
    "source": "void saxpy(int n, float a, const float* x, float* y) "
              "{ for (int i = 0; i < n; i++) y[i] = a * x[i] + y[i]; }",
    "signature": [{"name": "n", "role": "scalar", "dtype": "int32", "value": "N"},
                  {"name": "a", "role": "scalar", "dtype": "float32", "value": "2.5"},
                  {"name": "x", "role": "in", "dtype": "float32", "shape": ["N"]},
                  {"name": "y", "role": "inout", "dtype": "float32", "shape": ["N"]}],
    "configs": [{"N": 1000}, {"N": 1000000}, {"N": 16777216}],
    "tolerance": {"atol": 1e-5, "rtol": 1e-5}, "flops": "2*N", "min_bytes": "12*N",
}


def test_documented_form_loads_and_round_trips(tmp_path):
    path = tmp_path / "saxpy.json"
    path.write_text(json.dumps(SAXPY))
    task = load_task(path)
    assert task.c_prototype() == ('extern "C" int saxpy(int n, float a, const float* x, float* y, '
                                  'cudaStream_t stream)')
    assert task.flops_at(task.configs[1]) == 2e6 and task.min_bytes_at(task.configs[0]) == 12000
    assert task.scalar(task.signature[1], task.configs[0]) == 2.5
    assert task.shape(task.signature[3], task.configs[2]) == (16777216,)
    assert Task.from_dict(json.loads(task.to_json())) == task
    assert task.tolerance_for("float16") == (1e-2, 1e-2)  # never tighter than the dtype allows


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.pop("entry"), "missing the field 'entry'"),
    (lambda d: d.update(track="c2rust"), "track 'c2rust'"),
    (lambda d: d["signature"][2].update(dtype="float128"), "dtype 'float128'"),
    (lambda d: d["signature"][2].update(role="output"), "role 'output'"),
    (lambda d: d["signature"][2].pop("shape"), "missing the field 'shape'"),
    (lambda d: d["signature"][2].update(shape=["M"]), "does not define ['M']"),
    (lambda d: d["signature"][3].update(role="in"), "at least one 'out' or 'inout'"),
    (lambda d: d["signature"][2].update(init="gaussian(0,1)"), "init 'gaussian(0,1)' is not one of"),
    (lambda d: d.update(flops="__import__('os')"), "not allowed"),
    (lambda d: d.update(configs=[]), "at least one input configuration"),
    (lambda d: d["signature"].append(dict(d["signature"][2])), "unique"),
    (lambda d: d.update(id="../etc/passwd"), "may only hold"),
    (lambda d: d["tolerance"].update(atol="max(1e-5, 1e-9*M)"), "tolerance atol at configs[0]"),
    (lambda d: d["tolerance"].update(rtol="1e-5 - 1e-9*N"), "must be a finite number >= 0"),
    (lambda d: d["tolerance"].update(atol=[1e-5]), "tolerance must be an object"),
])
def test_malformed_tasks_say_what_to_fix(mutate, message):
    d = copy.deepcopy(SAXPY)
    mutate(d)
    with pytest.raises(TaskError) as err:
        Task.from_dict(d)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_tolerance_may_grow_with_the_config():
    d = copy.deepcopy(SAXPY)
    d["tolerance"]["atol"] = "max(1e-5, 1e-9*N)"
    task = Task.from_dict(d)
    assert Task.from_dict(json.loads(task.to_json())) == task
    assert [task.tolerance_for("float32", c)[0] for c in task.configs] == pytest.approx([1e-5, 1e-3, 0.016777216])
    assert task.tolerance_for("float16", task.configs[0]) == (1e-2, 1e-2)
    with pytest.raises(TaskError, match="depends on the config"):
        task.tolerance_for("float32")


def test_unreadable_files(tmp_path):
    with pytest.raises(TaskError, match="does not exist"):
        load_task(tmp_path / "nope.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(TaskError, match="not valid JSON"):
        load_task(tmp_path / "bad.json")


def test_expressions_are_arithmetic_only():
    assert expr.evaluate("ceil(N / 32) * 32 + max(M, 2)", {"N": 33, "M": 1}) == 66
    with pytest.raises(TaskError):
        expr.evaluate("N.__class__", {"N": 1})
    with warnings.catch_warnings():   # what Python only warns about is an error of the task file, not a warning
        warnings.simplefilter("error")
        with pytest.raises(TaskError, match="invalid decimal literal"):
            expr.evaluate("2if N else 3", {"N": 1})
        assert expr.symbols("2if N else 3") == set()


def test_init_generators_draw_valid_structures():
    rng = np.random.default_rng(0)
    ptr = inits.generate("csr_rowptr(NNZ)", rng, (11,), np.int32, {"NNZ": 57})
    assert ptr[0] == 0 and ptr[-1] == 57 and np.all(np.diff(ptr) >= 0)
    perm = inits.generate("permutation", rng, (100,), np.int64, {})
    assert sorted(perm.tolist()) == list(range(100))
    x = inits.generate(None, rng, (1000,), np.float32, {})
    assert x.dtype == np.float32 and -1 <= x.min() < -0.9 and 0.9 < x.max() <= 1
