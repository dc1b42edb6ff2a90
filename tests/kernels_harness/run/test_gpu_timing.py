"""Timing on the H200 (`gpu` marker): repeatable across pools, and work on other streams is counted."""
import pytest

from tests.kernels_harness.adversarial.test_adversarial import TASK, src

SIDE_STREAM = r'''
#include <cuda_runtime.h>
__global__ void slow_saxpy(int n, float a, const float* x, float* y, int iters) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float acc = x[i];
  for (int k = 0; k < iters; k++) acc = acc * 0.999f + 0.001f;
  y[i] = a * x[i] + y[i] + 0.0f * acc;
}
extern "C" int saxpy(int n, float a, const float* x, float* y, cudaStream_t stream) {
  static cudaStream_t side = nullptr;
  if (!side) cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
  slow_saxpy<<<(n + 255) / 256, 256, 0, side>>>(n, a, x, y, 20000);
  return (int)cudaGetLastError();
}
'''


@pytest.mark.gpu
def test_times_repeat_across_two_pools():
    from kernels_harness.run import HarnessPool
    times = []
    for _ in range(2):
        with HarnessPool("cuda", workers=1, features=False) as pool:
            res = pool.evaluate([(TASK, src("good_naive"))])[0]
        assert res.status == "ok", res.error
        times.append(res.configs[2].time_ms)  # N = 16M, ~60 us
    assert times[1] == pytest.approx(times[0], rel=0.05)


@pytest.mark.gpu
def test_work_on_another_stream_is_counted():
    from kernels_harness import hacks
    from kernels_harness.run import HarnessPool
    with HarnessPool("cuda", workers=1, features=False, rules=hacks.Rules.make(disabled=["stream"])) as pool:
        res = pool.evaluate([(TASK, SIDE_STREAM)])[0]
    assert res.status == "ok", res.error
    big = res.configs[2]
    assert big.time_ms > 5 * big.baseline_ms  # the side-stream kernel's time is in the measurement
    assert res.seconds["timed_joined"] == 0  # every config fell back to the device-wide times


@pytest.mark.gpu
def test_a_kernel_on_its_stream_is_timed_without_the_host_round_trip():
    from kernels_harness.run import HarnessPool
    with HarnessPool("cuda", workers=1, features=False) as pool:
        res = pool.evaluate([(TASK, src("good_naive"))])[0]
    assert res.status == "ok", res.error
    assert res.seconds["timed_joined"] == 3  # all three configs: the stream-joined times
    assert 0 <= res.seconds["sync_gap_ms"] < 0.05  # what the old timer added: the host's wake-up


@pytest.mark.gpu
def test_torch2cuda_on_the_gpu_is_timed_against_eager():
    pytest.importorskip("torch")
    from kernels_harness.run import HarnessPool
    from kernels_harness.tasks.schema import Task
    from tests.kernels_harness.run.test_pool import SOLUTION, TORCH_TASK
    with HarnessPool("cuda", workers=1, features=False) as pool:
        res = pool.evaluate([(Task.from_dict(TORCH_TASK), SOLUTION)])[0]
    assert res.status == "ok", res.error
    big = res.configs[2]
    assert big.time_ms and big.baseline_ms  # the baseline is PyTorch eager on the same inputs
    assert res.speedup is not None
