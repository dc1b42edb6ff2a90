"""The reduction family's float32 tolerance grows with the reduction length: on the largest column-sum config
(262,147 rows, the soak's failure) every honest accumulation order passes against a sequential float32
reference and the exact sum, while a dropped row, a repeated row or a float16 accumulator still fail.
The kernels' orders are simulated in numpy on the family's own inputs (harness inputs, harness compare)."""
import numpy as np
import pytest

from kernels_harness.datasets import registry
from kernels_harness.run import arrays
from kernels_harness.run.inputs import host_inputs

TASK = "reduce_0_sum_axis0_none_float32_tall_ld1"


def _sequential(x):
    """One thread per column adding rows in order (naive, unrolled4: the cuda backend's reference)."""
    return np.add.reduce(x, axis=0)  # along axis 0 numpy adds row after row, no pairwise blocking


def _tiled_32x8(x):
    """tiled_32x8: thread row y sums rows y, y+8, ...; row 0 then adds the other seven partials in order."""
    acc = _sequential(x[0::8])
    for y in range(1, 8):
        acc = acc + _sequential(x[y::8])
    return acc


def _tree(x):
    """A shared-memory tree: pairs of rows, then pairs of pairs (pairwise summation)."""
    while x.shape[0] > 1:
        if x.shape[0] % 2:
            x = np.concatenate([x, np.zeros_like(x[:1])])
        x = x[0::2] + x[1::2]
    return x[0]


def _atomics(x, rng):
    """One atomicAdd per element: a sequential sum in whatever order the blocks arrive."""
    return _sequential(x[rng.permutation(x.shape[0])])


@pytest.fixture(scope="module")
def case():
    v = next(v for v in registry.variants("reduction") if v["name"] == TASK)
    task = registry.build("reduction", v)
    config = task.configs[-1]
    assert (config["R"], config["C"]) == (262147, 135)
    return task, config


def test_long_float32_column_sum_tolerance_passes_honest_orders_and_rejects_defects(case):
    task, config = case
    atol, rtol = task.tolerance_for("float32", config)
    assert atol > 1e-3 and rtol == pytest.approx(1e-3)  # grown for this config only
    assert task.tolerance_for("float32", task.configs[0]) == pytest.approx((1e-3, 1e-3))
    old_fails = 0
    for seed in (2, 3):  # two trials, as the harness runs; on both the old atol rejects an honest order
        x = host_inputs(task, config, seed)["x"][:, :config["C"]]  # the ld padding is not summed
        rng = np.random.default_rng(seed)
        exact = x.sum(axis=0, dtype=np.float64)
        seq = _sequential(x)
        honest = {"sequential": seq, "tiled_32x8": _tiled_32x8(x), "tree": _tree(x), "atomics": _atomics(x, rng)}
        wrong = {"drops the last row": _sequential(x[:-1]), "adds row 0 twice": seq + x[0],
                 "float16 accumulator": np.add.reduce(x, axis=0, dtype=np.float16).astype(np.float32)}
        for ref_name, ref in (("exact", exact.astype(np.float32)), ("sequential float32", seq)):
            for name, out in honest.items():
                res = arrays.compare(np, out, ref, atol, rtol)
                assert res["ok"], (seed, name, ref_name, res)
                old_fails += not arrays.compare(np, out, ref, 1e-3, 1e-3)["ok"]
            for name, out in wrong.items():
                assert not arrays.compare(np, out, ref, atol, rtol)["ok"], (seed, name, ref_name)
    assert old_fails >= 2  # the soak's finding: the old atol, 1e-3, rejects honest orders here


def test_only_sums_grow_their_tolerance():
    by_op = {}
    for v in registry.variants("reduction"):
        if v["dtype"] == "float32" and v["regime"] == "tall" and v["axis"] == 0:
            by_op.setdefault(v["op"], registry.build("reduction", v).tolerance)
    for op, tol in by_op.items():
        assert isinstance(tol["atol"], str) == (op in ("sum", "l1", "sumsq")), (op, tol)
    for fam in ("elementwise", "stencil", "transpose", "gather_scatter", "conv"):
        t = registry.build(fam, registry.variants(fam)[0])
        assert all(isinstance(t.tolerance[k], (int, float)) for k in ("atol", "rtol")), (fam, t.tolerance)
