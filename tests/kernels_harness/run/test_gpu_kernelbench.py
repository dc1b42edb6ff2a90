"""KernelBench on the GPU (`gpu` marker, ~2 min on an H100): level1_19_relu (4 configs, the largest 12 GiB of arrays)
is judged with its module built on the GPU and shared with the checks, the torch.compile baseline is measured by a
task's first candidate and reused by the next (the same numbers as a pool that measures it every time), and a slow
correct kernel gets the call limit per timing repetition."""
import json
from pathlib import Path

import pytest

from tests.kernels_harness.adversarial.test_adversarial import TASK as SAXPY

REPO = Path(__file__).resolve().parents[3]
RELU_TASK = REPO / "data/kernelbench/tasks/level1_19_relu.json"

RELU = r'''
#include <cuda_runtime.h>
__global__ void relu_k(const float* __restrict__ x, float* __restrict__ o, long n) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    float v = x[i];
    o[i] = v > 0.f ? v : 0.f;
  }
}
extern "C" int relu(const float* x, float* out, int x_d0, int x_d1, int out_d0, int out_d1, cudaStream_t stream) {
  long n = (long)x_d0 * x_d1;
  long blocks = (n + BLOCK - 1) / BLOCK;
  relu_k<<<(int)(blocks < 262144 ? blocks : 262144), BLOCK, 0, stream>>>(x, out, n);
  return (int)cudaGetLastError();
}
'''


def relu(block: int) -> str:
    return f"#define BLOCK {block}\n" + RELU


WRONG = relu(256).replace("v > 0.f ? v : 0.f", "v > 0.5f ? v : 0.f")   # wrong on (0, 0.5]: inputs are rand()


def _task():
    from kernels_harness.tasks.schema import Task
    return Task.from_dict(json.loads(RELU_TASK.read_text()))


def _pool(reuse: bool = True):
    from cudaperf_jax.eval.config import EVAL_TIMING
    from kernels_harness.run import HarnessPool, PoolConfig
    return HarnessPool("cuda", workers=1, features=False, torch_compile=True, timing_params=EVAL_TIMING.as_kwargs(),
                       call_timeout_s=30, job_timeout_s=300,
                       config=PoolConfig(reuse_compile_baseline=reuse, device_budget=0.9))


@pytest.mark.gpu
def test_kernelbench_compile_baseline_is_measured_once_and_reused():
    pytest.importorskip("torch")
    from kernels_harness.tasks.schema import config_env
    task = _task()
    with _pool() as pool:   # one worker: the jobs run one after the other (racing workers may both measure)
        a, b, bad = pool.evaluate([(task, relu(256)), (task, relu(512)), (task, WRONG)])
        later = pool.evaluate([(task, relu(1024))])[0]
    with _pool(reuse=False) as pool:
        alone = pool.evaluate([(task, relu(512))])[0]
    assert bad.status == "wrong", bad.error
    for r in (a, b, later, alone):
        assert r.status == "ok", r.error
        assert r.speedup is not None and all(c.time_ms and c.baseline_ms and c.compile_baseline_ms for c in r.configs)
    first, second = (a, b) if a.configs[0].compile_baseline_from == "measured" else (b, a)
    assert [c.compile_baseline_from for c in first.configs] == ["measured"] * 4
    assert [c.compile_baseline_from for c in second.configs] == ["reused"] * 4
    assert [c.compile_baseline_from for c in later.configs] == ["reused"] * 4   # for the pool's life
    assert [c.compile_baseline_ms for c in second.configs] == [c.compile_baseline_ms for c in first.configs]
    assert [c.compile_baseline_from for c in alone.configs] == ["measured"] * 4
    # the same numbers as measuring every time: the largest config (12 GiB, ~3 ms; smaller ones are launch-bound
    # and vary run to run) within 20%, the speedups over eager (interleaved in every job) within 25%
    big = task.configs.index(max(task.configs, key=lambda c: c["x_d0"] * c["x_d1"]))
    assert second.configs[big].compile_baseline_ms == pytest.approx(alone.configs[big].compile_baseline_ms, rel=0.2)
    assert second.speedup == pytest.approx(alone.speedup, rel=0.25)
    # the module and its inputs live once on the GPU (drawn there, shared with the checks): device memory of the
    # job under 3x the largest config's arrays (the copies before held 4-6x: out of memory on an 80 GB H100)
    largest = task.config_bytes(config_env(task.configs[big])) / 2**30
    for r in (first, second):
        assert 0 < r.seconds["device_gib"] < 3 * largest, (r.seconds["device_gib"], largest)
        assert "budget_wait" in r.seconds   # each job reserved its ~34 GB in the pool's device budget first


SLOW = r'''
#include <cuda_runtime.h>
__device__ float sink;
__global__ void delay(float a, long iters) {   // one thread, a chain of dependent FMAs: ~0.7 s on an H100
  float acc = a;
  for (long k = 0; k < iters; k++) acc = acc * 0.9999f + 0.0001f;
  if (acc == 12345.f) sink = acc;
}
__global__ void saxpy_k(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" int saxpy(int n, float a, const float* x, float* y, cudaStream_t stream) {
  delay<<<1, 1, 0, stream>>>(a, 300000000L);
  saxpy_k<<<(n + 255) / 256, 256, 0, stream>>>(n, a, x, y);
  return (int)cudaGetLastError();
}
'''


@pytest.mark.gpu
def test_a_slow_correct_kernel_gets_the_call_limit_per_timing_repetition():
    from kernels_harness.run import HarnessPool
    params = {"warmup": 2, "min_reps": 5, "budget_s": 0.0}   # 7 calls a config in timing, one limit each
    with HarnessPool("cuda", workers=1, features=False, call_timeout_s=2, timing_params=params) as pool:
        res = pool.evaluate([(SAXPY, SLOW)])[0]
    assert res.status == "ok", res.error
    slowest = max(c.time_ms for c in res.configs)
    assert 7 * slowest > 2000   # the 7 calls together exceed the call limit: one limit for them all timed out
    assert res.speedup < 0.01
