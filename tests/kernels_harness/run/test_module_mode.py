"""torch2cuda references run as KernelBench runs them: train mode (BatchNorm on the batch's statistics), dropout
off; a task's module_mode "eval" keeps the running statistics. Judged on the cpu backend with KernelBench 33."""
import dataclasses
import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from kernels_harness.tasks import schema
from kernels_harness.tasks.errors import TaskError
from kernels_harness.tasks.torch_source import set_module_mode

BN = Path(__file__).resolve().parents[3] / "data/kernelbench/tasks/level1_33_batchnorm.json"

KERNEL = """#include <cuda_runtime.h>
// one thread per channel: BATCH_STATS ? the batch's mean and variance : the running statistics
__global__ void bn_kernel(const float* x, const float* w, const float* b, const float* rm, const float* rv, float* out,
                          int n, int c, int hw) {
    int ch = blockIdx.x * blockDim.x + threadIdx.x;
    if (ch >= c) return;
    float mean = rm[ch], var = rv[ch];
    if (BATCH_STATS) {
        double s = 0.0, s2 = 0.0;
        for (int i = 0; i < n; ++i)
            for (int j = 0; j < hw; ++j) { double v = x[((long long)i * c + ch) * hw + j]; s += v; s2 += v * v; }
        double cnt = (double)n * hw;
        mean = (float)(s / cnt);
        var = (float)(s2 / cnt - (s / cnt) * (s / cnt));
    }
    float inv = rsqrtf(var + 1e-5f);
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < hw; ++j) {
            long long k = ((long long)i * c + ch) * hw + j;
            out[k] = (x[k] - mean) * inv * w[ch] + b[ch];
        }
}
extern "C" int batchnorm(const float* x, const float* bn_weight, const float* bn_bias, const float* bn_running_mean,
                         const float* bn_running_var, const long long* bn_num_batches_tracked, float* out, int x_d0,
                         int x_d1, int x_d2, int x_d3, int out_d0, int out_d1, int out_d2, int out_d3,
                         cudaStream_t stream) {
    bn_kernel<<<(x_d1 + 63) / 64, 64, 0, stream>>>(x, bn_weight, bn_bias, bn_running_mean, bn_running_var, out,
                                                   x_d0, x_d1, x_d2 * x_d3);
    return (int)cudaGetLastError();
}
"""


def test_train_mode_except_dropout():
    model = torch.nn.Sequential(torch.nn.BatchNorm1d(3), torch.nn.Dropout(0.5), torch.nn.LSTM(4, 4, 2, dropout=0.3),
                                torch.nn.LSTM(4, 4), torch.nn.MultiheadAttention(4, 2, dropout=0.1),
                                torch.nn.MultiheadAttention(4, 2))
    set_module_mode(model)
    assert model.training and model[0].training and not model[1].training and not model[2].training
    assert model[3].training and not model[4].training and model[5].training
    set_module_mode(model, "eval")
    assert not any(m.training for m in model.modules())
    with pytest.raises(TaskError, match="module_mode 'test'"):
        set_module_mode(model, "test")


def test_batchnorm_is_judged_on_the_batch_statistics_unless_the_task_says_eval():
    from kernels_harness.run import HarnessPool
    task = schema.load_task(BN)
    task = dataclasses.replace(task, configs=task.configs[:1])
    batch, running = KERNEL.replace("BATCH_STATS", "1"), KERNEL.replace("BATCH_STATS", "0")
    as_eval = dataclasses.replace(task, extra={**task.extra, "module_mode": "eval"})
    with HarnessPool(backend="cpu", workers=1, features=False) as pool:
        res = pool.evaluate([(task, batch), (task, running), (as_eval, batch), (as_eval, running)])
    assert [r.status for r in res] == ["ok", "wrong", "wrong", "ok"], [(r.status, r.error) for r in res]


def test_task_file_with_an_unknown_module_mode_is_one_sentence():
    d = json.loads(BN.read_text())
    d["module_mode"] = "inference"
    with pytest.raises(TaskError, match="module_mode 'inference' must be 'train'"):
        schema._parse_task(d)
