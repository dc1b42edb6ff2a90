"""Known-good and adversarial saxpy solutions get the right verdict, and the pool stays healthy.

Runs on the cpu backend (emulation) in the default suite; the `gpu` tests at the end run the same
kernels on the cuda backend (H200). Static-check hacks (exit, fork, other stream, clock spin) are
also run with the checks off, to show that the worker isolation catches them at run time.
"""
import json
from pathlib import Path

import pytest

from kernels_harness.run import HarnessPool
from kernels_harness.tasks.schema import Task

HERE = Path(__file__).parent
TASK = Task.from_dict(json.loads((HERE / "saxpy_task.json").read_text()))


def src(name: str) -> str:
    return (HERE / f"{name}.cu").read_text()


def _cpu_backend_ready() -> bool:
    try:
        from kernels_harness.run.backends import emulation_module
        return hasattr(emulation_module(), "build_shared_library")
    except ImportError:
        return False


cpu = pytest.mark.skipif(not _cpu_backend_ready(), reason="the cpu emulation backend is not available")

# name -> verdicts accepted on the cpu backend with the static checks on
EXPECTED = {
    "good_naive": {"ok"},
    "good_vectorized": {"ok"},
    "wrong_result": {"wrong"},
    "nan_output": {"wrong"},
    "writes_nothing": {"wrong"},
    "oob_write": {"wrong"},
    "oob_write_far": {"wrong"},
    "oob_write_before": {"wrong"},
    "oob_read": {"wrong", "runtime_error"},
    "never_ends": {"timeout"},
    "segfault_host": {"runtime_error"},
    "calls_exit": {"hack"},
    "forks": {"hack"},
    "alloc_100gb": {"runtime_error"},
    "mutates_input": {"wrong"},
    "cached_results": {"wrong"},
    "other_stream": {"hack"},
    "spins_on_clock": {"hack"},
    # KernelBench's adversarial kernels (src/kernelbench/unit_tests/test_kernels), ported to the solution ABI
    "kb_zero_out_inputs": {"wrong"},
    "kb_result_reuse": {"wrong"},
    "kb_stale_output": {"wrong", "runtime_error"},
    "kb_own_stream": {"hack"},
    # correct in every trial; only the timing on cuda can expose it (the cpu backend measures no time)
    "skips_repeated_work": {"ok"},
}


@pytest.fixture(scope="module")
def cpu_results():
    names = list(EXPECTED)
    # N = 1000 only (1 MiB budget): fast verdicts even on a loaded machine; N = 1M and 16M are skipped
    with HarnessPool("cpu", workers=2, call_timeout_s=8, cpu_budget_bytes=1 << 20, features=False) as pool:
        results = dict(zip(names, pool.evaluate([(TASK, src(n)) for n in names])))
        # the pool still serves after hangs and crashes: the good kernel passes again (twice in one call:
        # the same source is built once and judged twice, with different inputs)
        again, twice = pool.evaluate([(TASK, src("good_naive")), (TASK, src("good_naive"))])
        assert twice.status == "ok" and twice.seed != again.seed
    return results, again


@cpu
@pytest.mark.parametrize("name", list(EXPECTED))
def test_verdict_on_cpu(cpu_results, name):
    res = cpu_results[0][name]
    assert res.status in EXPECTED[name], (res.status, res.error, res.compile_log[-500:])
    if res.status == "ok":
        ran = [c for c in res.configs if not c.skipped]
        assert res.correct and len(ran) == 1 and ran[0].correct
        skipped = [c for c in res.configs if c.skipped]
        assert len(skipped) == 2 and all("cpu backend" in c.skip_reason for c in skipped)
        assert ran[0].max_abs_err is not None and ran[0].max_abs_err <= 1e-5
        assert res.speedup is None and res.seed is not None
    else:
        assert not res.correct and res.feedback


@cpu
def test_failure_messages_say_what_went_wrong(cpu_results):
    r = cpu_results[0]
    assert "NaN/Inf" in r["nan_output"].error
    assert "past the end of y" in r["oob_write"].error
    assert "modified its input array 'x'" in r["mutates_input"].error
    assert "trial 1" in r["cached_results"].error  # trial 0 is right; fresh inputs in trial 1 expose it
    assert "config 0" in r["never_ends"].error
    assert {v["rule"] for v in r["other_stream"].violations} == {"stream"}
    assert {v["rule"] for v in r["spins_on_clock"].violations} == {"timing"}
    assert r["calls_exit"].compiled is False and r["calls_exit"].violations[0]["name"] == "exit"


@cpu
def test_out_of_bounds_writes_name_the_array_and_the_offset(cpu_results):
    r = cpu_results[0]
    assert "wrote y[1000] (1 element past the end of y, length 1000)" in r["oob_write"].error
    assert "wrote y[1000] (1 element past the end of y, length 1000)" in r["oob_write_far"].error
    assert "wrote y[-2] (2 elements before the start of y, length 1000)" in r["oob_write_before"].error
    assert not r["oob_write"].correct and r["oob_write"].configs[0].correct is False


@cpu
def test_kernelbench_adversarial_kernels_are_caught(cpu_results):
    r = cpu_results[0]
    assert "modified its input array 'x'" in r["kb_zero_out_inputs"].error
    assert "differs" in r["kb_result_reuse"].error or "NaN" in r["kb_result_reuse"].error
    assert {v["rule"] for v in r["kb_own_stream"].violations} == {"stream"}
    for name in ("kb_zero_out_inputs", "kb_result_reuse", "kb_stale_output", "kb_own_stream"):
        assert not r[name].correct and r[name].speedup is None


@cpu
def test_pool_keeps_serving_after_hangs_and_crashes(cpu_results):
    assert cpu_results[1].status == "ok"


@cpu
def test_isolation_catches_exit_fork_and_crash_without_static_checks():
    with HarnessPool("cpu", workers=1, call_timeout_s=8, checks=False, features=False, cpu_budget_bytes=1 << 20) as pool:
        names = ["calls_exit", "forks", "segfault_host", "good_naive"]
        res = dict(zip(names, pool.evaluate([(TASK, src(n)) for n in names])))
    assert res["calls_exit"].status == "runtime_error" and "died" in res["calls_exit"].error
    # the sandbox's seccomp filter ends the worker at the fork (kernels_harness.run.sandbox)
    assert res["forks"].status == "runtime_error" and "sandbox stopped the solution" in res["forks"].error
    assert res["segfault_host"].status == "runtime_error" and "SEGV" in res["segfault_host"].error
    assert res["good_naive"].status == "ok"


# ---- the same kernels on the H200 ------------------------------------------------------------------
GPU_EXPECTED = dict(EXPECTED,
                    # fails where the GPU has less than 100 GB free; on an H200 it succeeds, and mapping and freeing
                    # 100 GB in every timed call runs past the call limit (the 2026-12-06 H200 soak): no reward
                    alloc_100gb={"ok", "runtime_error", "timeout"},
                    # timed on cuda: no call does the work after the first, below the roofline floor
                    skips_repeated_work={"hack"},
                    # far writes may also fault on a GPU (cudaErrorIllegalAddress)
                    oob_write_far={"wrong", "runtime_error"})


@pytest.fixture(scope="module")
def gpu_results():
    names = list(GPU_EXPECTED)
    with HarnessPool("cuda", call_timeout_s=15) as pool:
        results = dict(zip(names, pool.evaluate([(TASK, src(n)) for n in names])))
        again = pool.evaluate([(TASK, src("good_naive")), (TASK, src("good_vectorized"))])
    return results, again


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(GPU_EXPECTED))
def test_verdict_on_gpu(gpu_results, name):
    res = gpu_results[0][name]
    assert res.status in GPU_EXPECTED[name], (res.status, res.error, res.compile_log[-500:])


@pytest.mark.gpu
def test_gpu_out_of_bounds_and_impossible_speedup_messages(gpu_results):
    r = gpu_results[0]
    assert "wrote y[1000] (1 element past the end of y, length 1000)" in r["oob_write"].error
    assert "wrote y[-2] (2 elements before the start of y" in r["oob_write_before"].error
    assert "roofline floor" in r["skips_repeated_work"].error and r["skips_repeated_work"].speedup is None
    assert "modified its input array 'x'" in r["kb_zero_out_inputs"].error


@pytest.mark.gpu
def test_gpu_own_stream_without_static_checks_is_timed_honestly():
    """KernelBench's test_non_default_stream: the work on the kernel's own stream is counted (the timer
    synchronises the device), so the speedup stays near 1 and nothing is below the roofline."""
    with HarnessPool("cuda", call_timeout_s=15, checks=False) as pool:
        res = pool.evaluate([(TASK, src("kb_own_stream"))])[0]
    assert res.status in ("ok", "runtime_error"), (res.status, res.error)
    if res.status == "ok":
        assert res.speedup is not None and res.speedup < 2.0


@pytest.mark.gpu
def test_gpu_good_kernels_are_timed_against_the_baseline(gpu_results):
    for res in gpu_results[1]:
        assert res.status == "ok", res.error
        assert all(c.correct and not c.skipped for c in res.configs)
        big = res.configs[2]  # N = 16M: ~0.06 ms on an H200
        assert 0.01 < big.time_ms < 1.0 and big.baseline_ms and big.reps >= 10
        assert big.time_iqr_ms < 0.2 * big.time_ms
        assert 0.5 < res.speedup < 2.0
