"""HarnessPool end to end on the cpu backend: features and resources, torch2cuda tasks, planning."""
import json

import pytest

from kernels_harness.run import HarnessPool
from kernels_harness.run.assemble import plan_configs
from kernels_harness.tasks.schema import Task
from tests.kernels_harness.adversarial.test_adversarial import TASK, cpu, src

MODULE = '''
import torch
import torch.nn as nn

B = 4
F = 64


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(features))
        self.register_buffer("shift", torch.randn(features))

    def forward(self, x):
        return torch.relu(x) * self.scale + self.shift


def get_inputs():
    return [torch.randn(B, F)]


def get_init_inputs():
    return [F]
'''

SOLUTION = r'''
#include <cuda_runtime.h>
__global__ void k(int n, int f, const float* x, const float* scale, const float* shift, float* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = fmaxf(x[i], 0.0f) * scale[i % f] + shift[i % f];
}
extern "C" int relu_scale(const float* x, const float* scale, const float* shift, float* out, int n, int f,
                          cudaStream_t stream) {
  k<<<(n + 255) / 256, 256, 0, stream>>>(n, f, x, scale, shift, out);
  return (int)cudaGetLastError();
}
'''

TORCH_TASK = {
    "id": "relu_scale", "track": "torch2cuda", "entry": "relu_scale", "source": MODULE,
    "signature": [{"name": "x", "role": "in", "dtype": "float32", "shape": ["B", "F"]},
                  {"name": "scale", "role": "in", "dtype": "float32", "shape": ["F"], "torch_name": "scale"},
                  {"name": "shift", "role": "in", "dtype": "float32", "shape": ["F"], "torch_name": "shift"},
                  {"name": "out", "role": "out", "dtype": "float32", "shape": ["B", "F"]},
                  {"name": "n", "role": "scalar", "dtype": "int32", "value": "B*F"},
                  {"name": "f", "role": "scalar", "dtype": "int32", "value": "F"}],
    "configs": [{"B": 4, "F": 64}, {"B": 16, "F": 256}, {"B": 512, "F": 4096}],
    "constants": ["B", "F"], "tolerance": {"atol": 1e-5, "rtol": 1e-5},
}


@cpu
def test_good_kernel_gets_features_resources_and_launches():
    with HarnessPool("cpu", workers=1, cpu_budget_bytes=1 << 20) as pool:
        res = pool.evaluate([(TASK, src("good_naive"))])[0]
    assert res.status == "ok", res.error
    assert res.launches[0]["kernel"] == "saxpy_k" and res.launches[0]["block"] == (256, 1, 1)
    assert res.launches[0]["grid"][0] == 4  # N = 1000 (the largest config run here) in blocks of 256
    assert res.resources["saxpy_k"]["registers"] > 0  # ptxas, read in the compile worker
    assert 0.0 <= res.features["score"] <= 1.0
    assert res.seconds["compile"] > 0 and res.seconds["execute"] > 0
    assert res.feedback.startswith("Correct on the only checked config (2 larger ones skipped on the cpu backend, "
                                   "unchecked: N=1000000; N=16777216)")
    assert res.launches[0]["config"] == 0  # launches carry the config they were recorded on


KB_MODULE = """
import torch
import torch.nn as nn

batch_size = 64
features = 256


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features))

    def forward(self, x):
        return torch.relu(x * self.weight)


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features]
"""

KB_SOLUTION = r"""
#include <cuda_runtime.h>
__global__ void k(int rows, int cols, const float* x, const float* w, float* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < rows * cols) out[i] = fmaxf(x[i] * w[i % cols], 0.0f);
}
extern "C" int scale_relu(const float* x, const float* weight, float* out, int x_d0, int x_d1, int out_d0,
                          int out_d1, cudaStream_t stream) {
  k<<<(x_d0 * x_d1 + 255) / 256, 256, 0, stream>>>(x_d0, x_d1, x, weight, out);
  return (int)cudaGetLastError();
}
"""


@pytest.fixture(scope="module")
def torch_results(tmp_path_factory):
    """The torch2cuda tasks in one pool (PyTorch is imported once per worker)."""
    pytest.importorskip("torch")
    from kernels_harness.tasks.kernelbench import import_file
    kb = tmp_path_factory.mktemp("level1") / "1_Scale_Relu.py"
    kb.write_text(KB_MODULE)
    task, bf16, imported = Task.from_dict(TORCH_TASK), Task.from_dict(BF16_TASK), import_file(str(kb))
    items = [(task, SOLUTION), (task, SOLUTION.replace("+ shift[i % f]", "- shift[i % f]")),
             (bf16, BF16_SOLUTION), (bf16, BF16_SOLUTION.replace("* 2.0f", "* 2.1f")),
             (imported, KB_SOLUTION), (imported, KB_SOLUTION.replace("0.0f);", "-0.01f);"))]
    with HarnessPool("cpu", workers=1, features=False) as pool:
        return pool.evaluate(items)


@cpu
def test_task_from_the_kernelbench_importer(torch_results):
    good, bad = torch_results[4:]
    assert good.status == "ok", good.error
    assert all(c.correct for c in good.configs)  # the importer's configs are all small here
    assert bad.status == "wrong"


@cpu
def test_torch2cuda_task_checks_against_the_pytorch_module(torch_results):
    good, bad = torch_results[:2]
    assert good.status == "ok", good.error
    assert [c.skipped for c in good.configs] == [False, False, True]  # 512x4096: over the cpu budget
    assert good.configs[1].max_abs_err <= 1e-5
    assert bad.status == "wrong" and "output 'out'" in bad.error


def test_plan_runs_small_configs_first_and_picks_references():
    t = Task.from_dict(json.loads(json.dumps(TASK.to_dict())))
    cpu_plan = plan_configs(t, "cpu", 8 << 20, 64 << 20, 2e8, have_c=True, have_oracle=True)
    assert [(p["index"], p["run"], p["reference"]) for p in cpu_plan] == [
        (0, True, "c"), (1, True, "c"), (2, False, "c")]  # cpu: the native C reference, 16M over budget
    cuda_plan = plan_configs(t, "cuda", 8 << 20, 64 << 20, 2e8, have_c=True, have_oracle=True)
    assert [(p["index"], p["run"], p["reference"]) for p in cuda_plan] == [
        (0, True, "c"), (1, True, "c"), (2, True, "oracle")]  # 16M floats x 2 = 128 MiB > 64 MiB
    no_oracle = plan_configs(t, "cuda", 8 << 20, 64 << 20, 2e8, have_c=True, have_oracle=False)
    assert all(p["run"] and p["reference"] == "c" for p in no_oracle)
    tiny_budget = plan_configs(t, "cpu", 1, 64 << 20, 2e8, have_c=True, have_oracle=True)
    # nothing fits: nothing runs (the verdict is `unchecked`), not even the smallest
    assert [p["run"] for p in tiny_budget] == [False, False, False]
    flops_budget = plan_configs(t, "cpu", 1 << 30, 64 << 20, 2e8, have_c=True, have_oracle=True,
                                cpu_budget_flops=3e6)  # flops = 2*N: 2e3, 2e6, 3.4e7
    assert [p["run"] for p in flops_budget] == [True, True, False]
    assert "FLOPs" in flops_budget[2]["skip_reason"]


BF16_MODULE = '''
import torch
import torch.nn as nn

B = 8
F = 32


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2


def get_inputs():
    return [torch.randn(B, F, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
'''

BF16_SOLUTION = r'''
#include <cuda_runtime.h>
#include <cuda_bf16.h>
__global__ void k(int n, const __nv_bfloat16* x, __nv_bfloat16* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __float2bfloat16(fmaxf(__bfloat162float(x[i]), 0.0f) * 2.0f);
}
extern "C" int relu2(const __nv_bfloat16* x, __nv_bfloat16* out, int n, cudaStream_t stream) {
  k<<<(n + 255) / 256, 256, 0, stream>>>(n, x, out);
  return (int)cudaGetLastError();
}
'''

BF16_TASK = {
    "id": "relu2_bf16", "track": "torch2cuda", "entry": "relu2", "source": BF16_MODULE,
    "signature": [{"name": "x", "role": "in", "dtype": "bfloat16", "shape": ["B", "F"]},
                  {"name": "out", "role": "out", "dtype": "bfloat16", "shape": ["B", "F"]},
                  {"name": "n", "role": "scalar", "dtype": "int32", "value": "B*F"}],
    "configs": [{"B": 8, "F": 32}, {"B": 64, "F": 128}, {"B": 128, "F": 1024}],
    "constants": ["B", "F"], "tolerance": {"atol": 1e-2, "rtol": 1e-2},
}


@cpu
def test_bfloat16_torch2cuda_task(torch_results):
    good, bad = torch_results[2:4]
    assert good.status == "ok", good.error
    assert all(c.correct for c in good.configs)
    assert bad.status == "wrong" and "output 'out'" in bad.error


def _slow_or_huge_reference(body: str) -> dict:
    """TORCH_TASK whose PyTorch module (the harness's reference, not the candidate) runs `body` first."""
    module = MODULE.replace("    def forward(self, x):\n", "    def forward(self, x):\n" + body)
    return {**TORCH_TASK, "id": "relu_scale_ref", "source": module, "configs": TORCH_TASK["configs"][:1]}


@cpu
def test_a_slow_reference_is_not_the_candidates_timeout():
    """The call limit is for the solution's own code; the harness's work (here a reference that takes 2.5 s per
    trial, over the 1 s call limit) only has the job's deadline. Before: `timeout` during the reference."""
    pytest.importorskip("torch")
    task = Task.from_dict(_slow_or_huge_reference("        import time; time.sleep(2.5)\n"))
    hang = SOLUTION.replace("if (i < n) out[i]", "while (((volatile float*)out)[0] == 0.0f || n > 0) { }\n  if (i < n) out[i]")
    with HarnessPool("cpu", workers=1, features=False, call_timeout_s=1.0, job_timeout_s=60) as pool:
        good, hung = pool.evaluate([(task, SOLUTION), (task, hang)])
    assert good.status == "ok", good.error
    assert hung.status == "timeout" and "within 1 s" in hung.error, hung.error  # the solution's own hang still is


@cpu
def test_a_harness_failure_is_retried_then_unchecked_not_the_candidates_error():
    """A reference the harness cannot compute (it runs out of memory, as on a GPU whose memory other processes
    hold) says nothing about the candidate: run again after the configured pauses, then `unchecked`, which
    carries no reward and no penalty. Before: `runtime_error` ('harness error: ...')."""
    pytest.importorskip("torch")
    from kernels_harness.run.pool_config import PoolConfig
    task = Task.from_dict(_slow_or_huge_reference("        torch.empty(1 << 34, dtype=torch.uint8).fill_(1)\n"))
    with HarnessPool("cpu", workers=1, features=False, memory_limit_bytes=4 << 30,
                     config=PoolConfig(infra_retry_pauses_s=(0.1,))) as pool:
        res, = pool.evaluate([(task, SOLUTION)])
    assert res.status == "unchecked", (res.status, res.error)
    assert res.error.startswith("not judged, the harness failed (harness error:") and "no reward" in res.error
    assert res.seconds["infra_retries"] == 1.0 and not res.correct
    assert res.feedback.startswith("Not checked: not judged")


@cpu
def test_a_missing_entry_is_named_as_the_task_names_it():
    """A candidate built in a batch library (its entry renamed there) that only declares the entry: the error names
    `saxpy`, the name the policy must export, not the batch library's symbol."""
    declared = 'extern "C" int saxpy(int n, float a, const float* x, float* y, cudaStream_t stream);\n'
    with HarnessPool("cpu", workers=1, cpu_budget_bytes=1 << 20, features=False) as pool:
        res = pool.evaluate([(TASK, declared), (TASK, src("good_naive"))])
    assert res[0].status == "runtime_error" and res[1].status == "ok"
    assert "does not export `saxpy`" in res[0].error and "cudaperf_" not in res[0].error, res[0].error


@pytest.mark.parametrize("log, name", [
    ('solution.cu(5): error: identifier "torch" is undefined', "torch"),
    ('solution.cu(2): catastrophic error: cannot open source file "torch/extension.h"', "torch"),
    ('solution.cu(7): error: identifier "cublasSgemm_v2" is undefined', "cublasSgemm_v2"),
    ("solution.cu:5:30: error: \u2018thrust\u2019 has not been declared", "thrust"),
    ("solution.cu:5:30: error: 'at' was not declared in this scope", "at"),
    ('solution.cu(5): error: identifier "attn" is undefined', None),
    ('solution.cu(5): error: identifier "n" is undefined', None)])
def test_a_compile_error_naming_a_library_says_that_solutions_use_none(log, name):
    from kernels_harness.feedback import library_hint
    hint = library_hint(log)
    assert (hint is None) if name is None else hint.startswith(f"`{name}` is a library")


@cpu
def test_the_feedback_on_a_library_call_that_does_not_compile_names_the_rule():
    library_call = src("good_naive").replace("a * x[i] + y[i]", "torch.fma(a, x[i], y[i])")
    with HarnessPool(backend="cpu", workers=1) as pool:
        res = pool.evaluate([(TASK, library_call)])[0]
    assert res.status == "compile_error", (res.status, res.error)
    assert "`torch` is a library" in res.feedback, res.feedback
