"""The pool's device-memory budget (PoolConfig.device_budget): a job reserves an estimate of its arrays before it
takes a worker; holds that do not fit wait, one larger than the budget runs alone; the estimate follows the task."""
import json
import threading
import time
from pathlib import Path

import pytest

from kernels_harness.run.assemble import job_device_bytes, plan_configs
from kernels_harness.run.pool_config import DeviceBudget, PoolConfig
from kernels_harness.tasks.schema import Task, config_env

REPO = Path(__file__).resolve().parents[3]


def test_holds_wait_their_turn_until_they_fit_and_an_oversized_one_runs_alone():
    budget, events = DeviceBudget(10), []

    def job(name, n, secs):
        with budget.hold(n):
            events.append(("start", name, budget.held))
            time.sleep(secs)
        events.append(("end", name))
    a = threading.Thread(target=job, args=("a", 6, 0.4))
    a.start()
    time.sleep(0.05)
    b = threading.Thread(target=job, args=("b", 6, 0.3))   # 6 + 6 > 10: waits for a
    c = threading.Thread(target=job, args=("c", 4, 0.05))   # would fit beside a, but b asked first
    big = threading.Thread(target=job, args=("big", 25, 0.05))   # over the budget: alone, when nothing is held
    for t in (b, c, big):
        t.start()
        time.sleep(0.02)   # asked in this order
    for t in (a, b, c, big):
        t.join(5)
    starts = {e[1]: (i, e[2]) for i, e in enumerate(events) if e[0] == "start"}
    ends = {e[1]: i for i, e in enumerate(events) if e[0] == "end"}
    assert ends["a"] < starts["b"][0] < starts["c"][0] < ends["b"]   # in order; c beside b (6 + 4 fits)
    assert starts["big"][1] == 25   # nothing else held while it ran
    assert all(held <= 10 for name, (_, held) in starts.items() if name != "big")
    assert budget.held == 0


def test_the_estimate_follows_the_largest_config_and_the_track():
    relu = Task.from_dict(json.loads((REPO / "data/kernelbench/tasks/level1_19_relu.json").read_text()))
    plan = plan_configs(relu, "cuda", 8 << 20, 64 << 20, 2e8, have_c=False, have_oracle=False)
    largest = max(relu.config_bytes(config_env(c)) for c in relu.configs)
    est = job_device_bytes(relu, plan)
    # the module's tensors and the candidate's copies (2x), an eager output (0.5x: relu's output is half its arrays)
    # and the smaller configs kept for timing
    assert 2.5 * largest < est < 2.7 * largest
    pool2d = Task.from_dict(json.loads((REPO / "data/kernelbench/tasks/level1_45_average_pooling_2d.json").read_text()))
    big = max(pool2d.config_bytes(config_env(c)) for c in pool2d.configs)
    est2 = job_device_bytes(pool2d, plan_configs(pool2d, "cuda", 8 << 20, 64 << 20, 2e8, have_c=False,
                                                 have_oracle=False))
    assert 2.0 * big < est2 < 2.2 * big   # a small output: little more than the tensors and the copies
    small = plan_configs(relu, "cpu", 8 << 20, 64 << 20, 2e8, have_c=False, have_oracle=False)   # tiny only
    assert job_device_bytes(relu, small) < 0.01 * est


def test_the_budget_is_a_share_and_is_off_by_default_and_on_cpu():
    assert PoolConfig().device_budget == 0.0
    with pytest.raises(ValueError, match="device_budget"):
        PoolConfig(device_budget=1.5)
    from kernels_harness.run import HarnessPool
    with HarnessPool("cpu", workers=1, compile_workers=1, config=PoolConfig(device_budget=0.9)) as pool:
        assert pool.device_budget is None   # the cpu backend's memory is limited per worker instead
