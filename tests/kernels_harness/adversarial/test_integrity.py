"""Reward integrity beyond the saxpy kernels: KernelBench's softmax tolerance hole (zeros, a constant and a
copy of the input fail, an honest kernel passes), launches of every config in the structural report (a
tail kernel launched on odd sizes only), and `unchecked` when no config fits the cpu backend's budget.
cpu backend in the default run; the same on cuda in the `gpu` tests."""
import dataclasses
import json
from pathlib import Path

import pytest

from kernels_harness.run import HarnessPool
from kernels_harness.tasks.schema import Task

HERE = Path(__file__).parent
SAXPY = Task.from_dict(json.loads((HERE / "saxpy_task.json").read_text()))
SOFTMAX = Task.from_dict(json.loads((HERE / "softmax_task.json").read_text()))
COPY_INPUT = """#include <cuda_runtime.h>
extern "C" int softmax(int rows, int cols, const float* x, float* y, cudaStream_t stream) {
  cudaMemcpyAsync(y, x, (size_t)rows * cols * sizeof(float), cudaMemcpyDeviceToDevice, stream);
  return (int)cudaGetLastError();
}
"""
SOFTMAX_KERNELS = ["softmax_good", "softmax_zeros", "softmax_constant", "copy_input"]


def src(name: str) -> str:
    return COPY_INPUT if name == "copy_input" else (HERE / f"{name}.cu").read_text()


def _softmax_results(backend: str, **kw):
    with HarnessPool(backend, call_timeout_s=30, features=False, **kw) as pool:
        return dict(zip(SOFTMAX_KERNELS, pool.evaluate([(SOFTMAX, src(n)) for n in SOFTMAX_KERNELS])))


def _check_softmax(r: dict, backend: str):
    good = r["softmax_good"]
    assert good.status == "ok", (good.status, good.error)
    for name in ("softmax_zeros", "softmax_constant", "copy_input"):
        assert r[name].status == "wrong", (name, r[name].status, r[name].error)
        assert r[name].correct is False and r[name].speedup is None
    # the sentence says why: the atol was scaled to the reference's magnitude, the output has no information
    assert "scaled to the reference's largest magnitude" in r["softmax_zeros"].error
    assert "the output is constant (0)" in r["softmax_zeros"].error
    assert "the output is constant" in r["softmax_constant"].error
    assert "is a copy of input 'x'" in r["copy_input"].error or "differs" in r["copy_input"].error
    if backend == "cpu":
        assert [c.skipped for c in good.configs] == [False, True]


def test_softmax_tolerance_hole_is_closed_on_cpu():
    _check_softmax(_softmax_results("cpu", workers=2), "cpu")


@pytest.mark.gpu
def test_softmax_tolerance_hole_is_closed_on_gpu():
    r = _softmax_results("cuda")
    _check_softmax(r, "cuda")
    assert all(not c.skipped for c in r["softmax_good"].configs)


ODD = dataclasses.replace(SAXPY, configs=({"N": 1000}, {"N": 1003}))


def _tail(backend: str, **kw):
    with HarnessPool(backend, call_timeout_s=20, **kw) as pool:
        return pool.evaluate([(ODD, src("tail_kernel"))])[0]


def _check_tail(res, recorded: bool):
    assert res.status == "ok", (res.status, res.error)
    kernels = {row["kernel"] for row in res.features["occupancy"]}
    assert kernels == {"saxpy_vec4", "saxpy_tail"}, (res.features["occupancy"], res.features.get("notes"))
    if recorded:  # the tail kernel is launched on config 1 (N = 1003) only
        by_kernel = {la["kernel"]: la["config"] for la in res.launches}
        assert by_kernel == {"saxpy_vec4": 0, "saxpy_tail": 1}, res.launches


def test_structural_report_has_the_launches_of_every_config_on_cpu():
    pytest.importorskip("tree_sitter")
    _check_tail(_tail("cpu", workers=1, cpu_budget_bytes=1 << 20), recorded=True)


@pytest.mark.gpu
def test_structural_report_has_the_tail_kernel_on_gpu():
    _check_tail(_tail("cuda"), recorded=False)


def test_nothing_fits_the_cpu_budget_gives_unchecked():
    with HarnessPool("cpu", workers=1, call_timeout_s=20, features=False, cpu_budget_bytes=4096) as pool:
        res, part = pool.evaluate([(SAXPY, src("good_naive")),
                                   (dataclasses.replace(SAXPY, configs=({"N": 100}, {"N": 1000})), src("good_naive"))])
    assert res.status == "unchecked" and not res.correct and res.speedup is None
    assert all(c.skipped and "exceeds the budget" in c.skip_reason for c in res.configs)
    assert res.error.startswith("no config could be checked on the cpu backend: skipped on the cpu backend")
    assert res.feedback.startswith("Not checked:")
    # some configs checked, some skipped for size: ok, and the result and feedback say which were skipped
    assert part.status == "ok" and [c.skipped for c in part.configs] == [False, True]
    assert "exceeds the budget" in part.configs[1].skip_reason and "unchecked: N=1000" in part.feedback
