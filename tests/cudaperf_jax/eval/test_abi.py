"""The ABI classifier on real verdicts: every case of abi_cases.py judged by the harness on the cpu backend (g++ logs)
and built by nvcc as the cuda backend builds it (nvcc logs), recorded in abi_logs.json; the slow test re-records
them live and checks the same categories."""
import json
import shutil

import pytest

from cudaperf_jax.eval import abi
from kernels_harness.result import EvalResult
from tests.cudaperf_jax.eval import abi_cases

RECORDED = json.loads(abi_cases.LOGS.read_text())
TASKS = abi_cases.load_tasks()


def test_the_recording_is_of_the_current_cases():
    assert set(RECORDED) == set(abi_cases.CASES), "re-record: python -m tests.cudaperf_jax.eval.abi_cases"
    for name, (task, source, _) in abi_cases.CASES.items():
        assert RECORDED[name]["source"] == source and RECORDED[name]["task"] == task, \
            f"{name} changed; re-record: python -m tests.cudaperf_jax.eval.abi_cases"


def _cpu_result(rec: dict) -> EvalResult:
    c = rec["cpu"]
    return EvalResult(task_id=rec["task"], backend="cpu", status=c["status"], error=c["error"],
                      compile_log=c["compile_log"], compiled=c["status"] != "compile_error")


@pytest.mark.parametrize("name", list(abi_cases.CASES))
def test_category_from_the_cpu_backends_verdict(name):
    task, source, expected = abi_cases.CASES[name]
    assert abi.classify(TASKS[task], source, _cpu_result(RECORDED[name])) == expected, RECORDED[name]["cpu"]


@pytest.mark.parametrize("name", [n for n in abi_cases.CASES if not RECORDED.get(n, {}).get("nvcc", {}).get("ok", 1)])
def test_category_from_nvccs_log(name):
    """What the cuda backend reports for a source nvcc rejects: compile_error with nvcc's log."""
    task, source, expected = abi_cases.CASES[name]
    res = EvalResult(task_id=TASKS[task].id, backend="cuda", status="compile_error",
                     compile_log=RECORDED[name]["nvcc"]["log"])
    assert abi.classify(TASKS[task], source, res) == expected, RECORDED[name]["nvcc"]["log"][:400]


def test_the_recorded_logs_hold_the_compilers_wording():
    """The messages the classifier reads, as nvcc 13 and g++ wrote them (a change of compiler shows up here)."""
    nv = {n: r["nvcc"]["log"] for n, r in RECORDED.items()}
    assert "cannot overload functions distinguished by return type alone" in nv["kernel_named_like_export"]
    assert "a host function call cannot be configured" in nv["qwen05_kernel_named_like_export"]
    assert 'more than one instance of overloaded function "saxpy" has "C" linkage' in nv["signature_conflicts_with_echo"]
    assert 'argument of type "const float *" is incompatible with parameter of type "float *"' in nv["const_mismatch"]
    assert 'identifier "N" is undefined' in nv["undeclared_N"]
    assert 'identifier "vec_add_kernel" is undefined' in nv["example_kernel_launched"]
    assert 'identifier "batch_size" is undefined' in nv["relu_undeclared_module_constants"]
    gcc = {n: r["cpu"]["compile_log"] for n, r in RECORDED.items()}
    assert "invalid conversion from 'const float*' to 'float*'" in gcc["const_mismatch"]
    assert "'N' was not declared in this scope" in gcc["undeclared_N"]
    assert "'vec_add_kernel' was not declared in this scope" in gcc["example_kernel_launched"]
    assert "does not export `saxpy`" in RECORDED["misnamed"]["cpu"]["error"]


def test_verdicts_that_are_not_about_the_abi_give_none():
    task = TASKS["saxpy"]
    bad = abi_cases.CASES["misnamed"][1]
    for status in ("ok", "hack", "unchecked"):
        assert abi.classify(task, bad, EvalResult(task_id=task.id, backend="cpu", status=status)) is None
    cut = EvalResult(task_id=task.id, backend="cpu", status="compile_error", compile_log="error: expected '}'")
    assert abi.classify(task, abi_cases.KERNEL, cut, truncated=True) is None      # cut at the token budget
    assert abi.classify(task, abi_cases.KERNEL, cut) == "missing_export"


@pytest.mark.parametrize("param,kind", [
    ("const float* __restrict__ x", "f4*"), ("float *y", "f4*"), ("int n", "i4"), ("unsigned int n", "i4"),
    ("long long n", "i8"), ("int64_t n", "i8"), ("size_t n", "i8"), ("cudaStream_t stream", "stream"),
    ("const __half* h", "f2*"), ("double", "f8"), ("unsigned", "i4"), ("MyType t", "?"),
])
def test_abi_types_of_parameters(param, kind):
    assert abi.abi_type(param) == kind


def test_extern_c_blocks_and_declarations_are_read():
    code = abi._plain('#include <cuda_runtime.h>\nextern "C" {\nint saxpy(int n, float a, const float* x, float* y, '
                      'cudaStream_t s) {\n  return 0;\n}\n}\nextern "C"\nint other(int n);\n__global__ void __launch_bounds__'
                      '(256) k(float* y) { y[0] = f(1); }\n')
    got = {f["name"]: (f["defined"], f["extern_c"], "__global__" in f["head"]) for f in abi.functions(code)}
    assert got["saxpy"] == (True, True, False) and got["other"] == (False, True, False)
    assert got["k"] == (True, False, True)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None or shutil.which("g++") is None, reason="needs nvcc and g++")
def test_live_verdicts_give_the_recorded_categories(tmp_path):
    live = abi_cases.record(tmp_path / "logs.json")
    for name, (task, source, expected) in abi_cases.CASES.items():
        assert live[name]["cpu"]["status"] == RECORDED[name]["cpu"]["status"], name
        assert abi.classify(TASKS[task], source, _cpu_result(live[name])) == expected, name
        if not live[name]["nvcc"]["ok"]:
            res = EvalResult(task_id=task, backend="cuda", status="compile_error", compile_log=live[name]["nvcc"]["log"])
            assert abi.classify(TASKS[task], source, res) == expected, name
