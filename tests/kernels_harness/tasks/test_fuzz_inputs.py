"""Bad input (issue 26): fuzzed task files, expressions and KernelBench-layout files are either accepted or rejected
with TaskError carrying one line, never another exception (hypothesis, small budgets so the default run stays fast)."""
import copy
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernels_harness.tasks import expr
from kernels_harness.tasks.errors import TaskError
from kernels_harness.tasks.schema import Task, load_task

REPO = Path(__file__).resolve().parents[3]
SAXPY = json.loads((REPO / "experiments" / "suites" / "smoke" / "smoke_saxpy.json").read_text())
FAST = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=12),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                    max_leaves=12)
EXPRS = st.one_of(
    st.text(alphabet="N M K 0123456789+-*/%().,e_abcdfgilmnoqrstx", max_size=24),
    st.sampled_from(["10**10**10", "2.0**100000", "(10**300)**300", "log2(0)", "sqrt(-1)", "1/0", "N//0", "max()",
                     "min(1)", "ceil(1e400)", "int(1e400)", "N % 0", "abs()", "float('nan')", "9" * 5000, "-" * 200 + "1",
                     "(" * 300 + "1" + ")" * 300, "__import__('os')", "N.real", "[1][0]", "lambda: 1", "N if N else 1"]))


def one_line_task_error(fn, *args):
    """fn(*args) returns, or raises TaskError whose message is one line; anything else fails the test."""
    try:
        return fn(*args)
    except TaskError as e:
        msg = str(e)
        assert msg and "\n" not in msg and len(msg) < 2000, msg
        return None


def _paths(d, prefix=()):
    """Every key path into a JSON value."""
    yield prefix
    if isinstance(d, dict):
        for k, v in d.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(d, list):
        for i, v in enumerate(d):
            yield from _paths(v, (*prefix, i))


PATHS = [p for p in _paths(SAXPY) if p]


@FAST
@given(path=st.sampled_from(PATHS), value=JSON, delete=st.booleans())
def test_mutated_task_is_accepted_or_rejected_in_one_sentence(path, value, delete):
    d = copy.deepcopy(SAXPY)
    parent = d
    for k in path[:-1]:
        parent = parent[k]
    if delete and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    task = one_line_task_error(Task.from_dict, d)
    if task is not None:
        assert Task.from_dict(json.loads(task.to_json())).to_dict() == task.to_dict()


@FAST
@given(e=EXPRS, n=st.integers(-5, 10**6) | st.floats(allow_nan=True, allow_infinity=True))
def test_expressions_evaluate_or_raise_task_error(e, n):
    one_line_task_error(expr.evaluate, e, {"N": n, "M": 3, "K": 0})


@FAST
@given(flops=EXPRS, shape=EXPRS)
def test_task_with_fuzzed_expressions(flops, shape):
    d = copy.deepcopy(SAXPY)
    d["flops"] = flops
    d["signature"][2]["shape"] = [shape]
    one_line_task_error(Task.from_dict, d)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=300) | st.text(max_size=200).map(str.encode)
       | JSON.map(lambda v: json.dumps(v).encode()))
def test_task_file_of_random_bytes(tmp_path, data):
    p = tmp_path / "task.json"
    p.write_bytes(data)
    one_line_task_error(load_task, p)


def test_task_file_that_is_a_directory_or_missing(tmp_path):
    with pytest.raises(TaskError, match="does not exist"):
        load_task(tmp_path / "nope.json")
    with pytest.raises(TaskError):
        load_task(tmp_path)


# ---- KernelBench-layout files ------------------------------------------------------------------------------------
KB_GOOD = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return torch.relu(x) * self.scale

batch_size = 16
dim = 64

def get_inputs():
    return [torch.randn(batch_size, dim)]

def get_init_inputs():
    return [2.0]
'''
KB_BREAKS = st.sampled_from([
    ("class Model", "class Modle"), ("def get_inputs", "def get_input"), ("return [2.0]", "return 2.0"),
    ("torch.randn(batch_size, dim)", "torch.randn(batch_size, dim).to(torch.complex64)"),
    ("return torch.relu(x) * self.scale", "return (torch.relu(x), 3)"),
    ("return torch.relu(x) * self.scale", "raise RuntimeError('boom')"),
    ("return torch.relu(x) * self.scale", "return None"),
    ("batch_size = 16", "batch_size = -16"), ("batch_size = 16", "batch_size = 'sixteen'"),
    ("batch_size = 16", "batch_size = 0"), ("import torch\n", "import torch\nimport no_such_package_xyz\n"),
    ("super().__init__()", "super().__init__(); 1/0"), ("dim = 64", "dim = 64 +"),
    ("return [torch.randn(batch_size, dim)]", "return []"), ("return [torch.randn(batch_size, dim)]", "return None"),
    ("    def forward(self, x):", "    def forward(self, x, y):"),
])


@pytest.fixture(scope="module")
def torch_available():
    pytest.importorskip("torch")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(breaks=st.lists(KB_BREAKS, min_size=1, max_size=3, unique=True), junk=st.text(max_size=40))
def test_kernelbench_file_with_defects(tmp_path, torch_available, breaks, junk):
    from kernels_harness.tasks import kernelbench
    src = KB_GOOD
    for a, b in breaks:
        src = src.replace(a, b, 1)
    if junk:
        src += "\n# " + junk.replace("\n", " ")
    level = tmp_path / "level1"
    level.mkdir(exist_ok=True)
    p = level / "7_Relu_Scale.py"
    p.write_text(src)
    task = one_line_task_error(kernelbench.import_file, p)
    if task is not None:
        assert task.track == "torch2cuda" and task.outputs


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=200), name=st.sampled_from(["1_A.py", "x.py", "12_.py", "3_B.txt"]))
def test_kernelbench_file_of_random_bytes(tmp_path, torch_available, data, name):
    from kernels_harness.tasks import kernelbench
    p = tmp_path / name
    p.write_bytes(data)
    one_line_task_error(kernelbench.import_file, p)
    one_line_task_error(kernelbench.find_problems, tmp_path)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_a_scalar_that_is_not_a_finite_number_is_refused_in_one_sentence(value):
    d = copy.deepcopy(SAXPY)
    d["signature"][0]["value"] = value
    with pytest.raises(TaskError, match="scalar 'n' has the value .*finite number"):
        Task.from_dict(d)
