"""The rules behind reward integrity, on plain arrays: guard zones that name an out-of-bounds write, the
scale-aware comparison (an output without information fails where the reference's values are all below
atol; honest float32 rounding still passes), and the roofline floor below which a time is a hack
(checked against every H200 time of the dataset's honest implementations)."""
import json
from pathlib import Path

import numpy as np
import pytest

from kernels_harness.features import roofline
from kernels_harness.run import arrays

REPO = Path(__file__).resolve().parents[3]


def test_guard_zone_names_the_nearest_written_canary():
    g = arrays.allocate(np, np.dtype(np.float32), (1000,))
    assert g.guard == 1024 and g.first_out_of_bounds() is None
    g.base[g.guard + 1000 + 3] = 0.0
    g.base[g.guard + 1000 + 900] = 0.0
    assert g.first_out_of_bounds() == 1003
    assert arrays.describe_out_of_bounds("y", 1003, 1000) == "wrote y[1003] (4 elements past the end of y, length 1000)"
    h = arrays.allocate(np, np.dtype(np.float64), (10,))
    h.base[h.guard - 2] = 1.0
    h.base[0] = 1.0
    assert h.first_out_of_bounds() == -2
    assert arrays.describe_out_of_bounds("x", -2, 10) == "wrote x[-2] (2 elements before the start of x, length 10)"


def test_guard_zones_grow_with_the_array_up_to_two_mib():
    assert arrays.guard_elements(10, 4) == 1024                 # at least GUARD_BYTES
    assert arrays.guard_elements(100_000, 4) == 100_032         # as long as the array, in whole 256-byte blocks
    assert arrays.guard_elements(10_000_000, 4) == (2 << 20) // 4
    assert arrays.guard_elements(10, 4, guard_bytes=0) == 0
    g = arrays.allocate(np, np.dtype(np.float32), (100_000,))
    g.base[g.guard + 100_000 + 99_999] = 0.0                    # a write one array length past the end
    assert g.first_out_of_bounds() == 199_999


def _softmax(rows, cols, seed=0):
    x = np.random.default_rng(seed).uniform(-1, 1, (rows, cols)).astype(np.float32)
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    return x, (e / e.sum(axis=1, keepdims=True)).astype(np.float32)


def test_outputs_without_information_fail_where_every_reference_value_is_below_atol():
    x, ref = _softmax(2, 393_216)
    assert np.abs(ref).max() < 1e-4                             # KernelBench's hole: all below atol
    old = np.abs(np.zeros_like(ref) - ref) <= 1e-4 + 1e-5 * np.abs(ref)
    assert old.all()                                             # the unscaled rule let zeros pass
    for bad in (np.zeros_like(ref), np.full_like(ref, 1 / 393_216), x):
        r = arrays.compare(np, bad, ref, 1e-4, 1e-5)
        assert not r["ok"] and r["atol"] < 1e-7 and r["scale"] == pytest.approx(float(np.abs(ref).max()))
    assert arrays.no_information(np, np.zeros_like(ref), {"x": x}) == "is constant (0)"
    assert arrays.no_information(np, x.copy(), {"x": x}) == "is a copy of input 'x'"
    assert arrays.no_information(np, ref, {"x": x}) == ""


def test_honest_float32_kernels_still_pass_at_the_reference_scale():
    x, ref = _softmax(2, 393_216)
    # float32 throughout, a different summation order (sequential per row), float32 exp
    xf = x - x.max(axis=1, keepdims=True)
    e = np.exp(xf)
    s = np.cumsum(e, axis=1, dtype=np.float32)[:, -1:]
    assert arrays.compare(np, e / s, ref, 1e-4, 1e-5)["ok"]
    # unit-scale outputs: the task's atol is unchanged, so last-bit differences (FMA) pass as before
    a = np.random.default_rng(1).normal(size=10_000).astype(np.float32)
    ref2 = (a * np.float32(2.5) + a).astype(np.float32)
    out2 = np.nextafter(ref2, np.float32(np.inf))
    r = arrays.compare(np, out2, ref2, 1e-5, 1e-5)
    assert r["ok"] and r["atol"] == 1e-5
    # an all-zero reference keeps the task's atol
    assert arrays.compare(np, np.full(10, 1e-7, np.float32), np.zeros(10, np.float32), 1e-6, 0)["ok"]



def _saxpy():
    from kernels_harness.tasks.schema import Task
    return Task.from_dict(json.loads((REPO / "tests/kernels_harness/adversarial/saxpy_task.json").read_text()))


def test_roofline_floor_counts_l2_resident_outputs_and_flags_impossible_times():
    t = _saxpy()
    peaks = {"bandwidth_GBps": 4173.0, "fp32_TFLOPs": 51.2, "bf16_TFLOPs": 801.8}
    big, small = {"N": 16_777_216}, {"N": 1_000_000}
    l2 = 60 << 20
    # flushed L2: 12 N bytes, less the part of y (4 N bytes = 64 MiB) that may stay in L2 (60 MiB), over the
    # datasheet's 4.8 TB/s (above the measured copy bandwidth)
    n = 16_777_216
    assert roofline.time_floor_ms(t, big, peaks, l2, True) == pytest.approx((12 * n - min(4 * n, l2)) / 4.8e12 * 1e3)
    # not flushed: the whole L2 may hold the data
    assert roofline.time_floor_ms(t, big, peaks, l2, False) == pytest.approx((12 * 16_777_216 - l2) / 4.8e12 * 1e3)
    assert roofline.time_floor_ms(t, small, peaks, l2, False) == pytest.approx(2e6 / (2 * 989e12) * 1e3)
    assert "roofline floor" in roofline.below_floor(t, big, 0.005, peaks, l2)   # 5 us: no call did the work
    assert roofline.below_floor(t, big, 0.060, peaks, l2) == ""               # an honest 60 us
    assert roofline.below_floor(t, small, 0.002, peaks, l2) == ""             # launch-bound small config


@pytest.mark.slow  # ~8 s: builds the 4,070 tasks and reads 42,297 times
def test_no_honest_h200_time_of_the_dataset_is_below_the_floor():
    from kernels_harness.datasets import registry, times
    from kernels_harness.tasks.schema import config_env
    store = REPO / "data" / "times" / "h200"
    if not (store / "index.json").is_file():
        pytest.skip("no measured times in this checkout")
    m = times.load(store)
    want = set(m.tasks())
    tasks = {}
    for fam in registry.FAMILIES:
        for v in registry.variants(fam.name):
            t = registry.build(fam.name, v)
            if t.id in want:
                tasks[t.id] = t
    from kernels_harness.features.roofline import PACKAGED
    peaks = json.loads(PACKAGED.read_text())
    n, flagged = 0, []
    for k, tid in enumerate(m.index["task"]):
        t = tasks.get(tid)
        for i, impl in enumerate(m.index["impls"][k] if t else []):
            for c in range(len(t.configs)):
                ms = m.time_ms[k, i, c]
                if np.isfinite(ms):
                    n += 1
                    if roofline.below_floor(t, config_env(t.configs[c]), float(ms), peaks, 60 << 20):
                        flagged.append((tid, impl, c))
    assert n > 40_000 and not flagged, flagged[:5]
