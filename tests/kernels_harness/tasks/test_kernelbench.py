"""The KernelBench-layout importer: signature in ABI order, configs, entry names, one-line errors,
agreement with the torch2cuda generator, and an imported task judged by the harness."""
import shutil

import pytest

torch = pytest.importorskip("torch")

from kernels_harness.tasks import kernelbench as kb
from kernels_harness.tasks.errors import TaskError
from kernels_harness.tasks.schema import Task, config_env

EXAMPLE_TEXT = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """y = sum over the last axis of gelu(x * scale) + bias."""

    def __init__(self, features: int, scale: float):
        super().__init__()
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.nn.functional.gelu(x * self.scale) + self.bias
        return y.sum(dim=-1)


batch = 4096
features = 1024


def get_inputs():
    return [torch.randn(batch, features)]


def get_init_inputs():
    return [features, 0.5]
'''


@pytest.fixture()
def example(tmp_path):
    d = tmp_path / "level1"
    d.mkdir()
    p = d / "3_Scaled_GELU_RowSum.py"
    p.write_text(EXAMPLE_TEXT)
    return p


def test_entry_names():
    assert kb.entry_name("3_Scaled_GELU_RowSum.py") == "scaled_gelu_rowsum"
    assert kb.entry_name("level2/17_Conv2d_ReLU.py") == "conv2d_relu"
    assert kb.entry_name("12_3D-Pooling.py") == "k_3d_pooling"
    assert kb.entry_name("level1/22_Tanh.py") == "tanh_op"    # `tanh` is declared by nvcc's headers
    assert kb.entry_name("5_Max.py") == "max_op"


def test_import_example(example):
    t = kb.import_file(example)
    assert t.track == "torch2cuda" and t.entry == "scaled_gelu_rowsum" and t.id == "level1_3_scaled_gelu_rowsum"
    assert [(a.name, a.role, a.torch_name) for a in t.signature] == [
        ("x", "in", None), ("bias", "in", "bias"), ("out", "out", None),
        ("x_d0", "scalar", None), ("x_d1", "scalar", None), ("out_d0", "scalar", None)]
    assert t.signature[0].shape == ("x_d0", "x_d1")
    assert t.extra["constants"] == ["batch", "features"]
    small, _, large = t.configs
    assert (large["batch"], large["features"]) == (4096, 1024)
    assert (small["batch"], small["features"]) == (256, 64)
    assert small["x_d0"] == 256 and small["x_d1"] == 64 and small["bias_d0"] == 64 and small["out_d0"] == 256
    assert Task.from_dict(t.to_dict()) == t
    assert t.c_prototype() == ('extern "C" int scaled_gelu_rowsum(const float* x, const float* bias, float* out, '
                               'int x_d0, int x_d1, int out_d0, cudaStream_t stream)')
    assert t.min_bytes_at(config_env(small)) == 4 * (256 * 64 + 64 + 256)


def test_explicit_configs_and_errors(example, tmp_path):
    t = kb.import_file(example, configs=[{"batch": 2, "features": 8}, {"batch": 3, "features": 16}])
    assert [c["x_d1"] for c in t.configs] == [8, 16]
    with pytest.raises(TaskError, match="not module constants"):
        kb.import_file(example, configs=[{"nope": 3}])
    bad = tmp_path / "level1" / "4_NoModel.py"
    bad.write_text("import torch\nbatch = 8\ndef get_inputs():\n    return []\n")
    with pytest.raises(TaskError, match="defines no Model"):
        kb.import_file(bad)
    tasks, errors = kb.import_report(tmp_path)
    assert [t.entry for t in tasks] == ["scaled_gelu_rowsum"] and len(errors) == 1 and "4_NoModel" in errors[0]
    with pytest.raises(TaskError, match="neither"):
        kb.import_dir(tmp_path / "missing")
    out = kb.write_tasks(tasks, tmp_path / "json")
    assert Task.from_dict(__import__("json").loads(out[0].read_text())) == tasks[0]


def test_generated_torch_tasks_match_the_importer():
    """The generator's signatures (names, order, shapes) are what the importer derives from the module."""
    from kernels_harness.datasets import registry
    for fam in ("elementwise_chain", "reduction_chain", "softmax", "normalization", "linear_epilogue", "conv_epilogue"):
        for params in registry.variants(fam)[:3]:
            gen = registry.build(fam, params)
            consts = [{k: c[k] for k in gen.extra["constants"]} for c in gen.configs[:2]]
            imp = kb.import_source(gen.source, f"{fam}/1_x.py", configs=consts)
            gen_arrays = [(a.name, a.role, a.torch_name) for a in gen.arrays]
            imp_arrays = [(a.name, a.role, a.torch_name) for a in imp.arrays]
            assert gen_arrays == imp_arrays, (gen.id, gen_arrays, imp_arrays)
            for c_gen, c_imp in zip(gen.configs[:2], imp.configs):
                for a, b in zip(gen.arrays, imp.arrays):
                    assert gen.shape(a, config_env(c_gen)) == imp.shape(b, config_env(c_imp)), (gen.id, a.name)


SOLUTION = r'''
#include <cuda_runtime.h>
#include <math.h>
__global__ void rowsum(const float* x, const float* bias, float* out, int rows, int cols) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  float s = 0.0f;
  for (int j = 0; j < cols; ++j) {
    float v = 0.5f * x[(long long)r * cols + j];
    s += 0.5f * v * (1.0f + erff(v * 0.7071067811865476f)) BIAS;
  }
  out[r] = s;
}
extern "C" int scaled_gelu_rowsum(const float* x, const float* bias, float* out, int x_d0, int x_d1, int out_d0,
                                  cudaStream_t stream) {
  rowsum<<<(x_d0 + 127) / 128, 128, 0, stream>>>(x, bias, out, x_d0, x_d1);
  return (int)cudaGetLastError();
}
'''


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ for the cpu backend")
def test_imported_task_judged_by_the_harness(example):
    import dataclasses

    from kernels_harness.run import HarnessPool
    t = kb.import_file(example, configs=[{"batch": 8, "features": 32}, {"batch": 16, "features": 64},
                                         {"batch": 64, "features": 256}])
    t = dataclasses.replace(t, tolerance={"atol": 1e-3, "rtol": 1e-3})
    with HarnessPool(backend="cpu", workers=1, features=False) as pool:
        good, wrong = pool.evaluate([(t, SOLUTION.replace("BIAS", "+ bias[j]")), (t, SOLUTION.replace("BIAS", ""))])
    assert good.status == "ok", (good.error, [c.error for c in good.configs])
    assert wrong.status == "wrong"


def test_command_line(example, tmp_path, capsys):
    assert kb.main([str(example.parent), "--out", str(tmp_path / "tasks")]) == 0
    assert "imported 1 problems" in capsys.readouterr().out
    assert (tmp_path / "tasks" / "level1_3_scaled_gelu_rowsum.json").is_file()
    assert kb.main([str(tmp_path / "nowhere"), "--out", str(tmp_path / "x")]) == 2
