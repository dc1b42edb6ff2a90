"""Guard zones, poison and the output comparison (numpy path; the cupy path runs the same code)."""
import numpy as np
import pytest

from kernels_harness.run import arrays


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_canary_and_poison_are_nan_for_floats(dtype):
    g = arrays.allocate(np, arrays.np_dtype(dtype), (5,))
    np.seterr(invalid="ignore")  # NaN -> float64 casts of bfloat16 warn
    assert np.isnan(g.base.astype(np.float64)).all()
    g.view[...] = 1
    g.poison(1)
    assert np.isnan(g.view.astype(np.float64)).all()
    assert g.guards_intact()


def test_out_of_bounds_write_breaks_a_guard_and_pointer_points_at_the_view():
    g = arrays.allocate(np, np.dtype(np.int32), (4, 3))
    assert g.ptr == g.view.ctypes.data
    assert g.guards_intact()
    g.base[g.guard + g.n] = 0  # one element past the end
    assert not g.guards_intact()
    h = arrays.allocate(np, np.dtype(np.float32), (8,))
    h.base[h.guard - 1] = 0.0  # one before the start
    assert not h.guards_intact()


def test_compare_within_tolerance_and_first_bad_index():
    ref = np.linspace(-1, 1, 1000).astype(np.float32)
    out = ref + np.float32(5e-6)
    r = arrays.compare(np, out, ref, 1e-5, 1e-5)
    assert r["ok"] and r["bad"] == 0 and 4e-6 < r["max_abs_err"] < 6e-6
    out[17] += 1e-3
    out[600] += 2e-3
    r = arrays.compare(np, out, ref, 1e-5, 1e-5)
    assert not r["ok"] and r["bad"] == 2 and r["first_bad"] == 17
    assert r["max_abs_err"] == pytest.approx(2e-3 + 5e-6, rel=1e-2)


def test_nan_or_inf_where_the_reference_is_finite_fails_but_matching_nan_passes():
    ref = np.array([1.0, np.nan, np.inf, 2.0], dtype=np.float32)
    assert arrays.compare(np, ref.copy(), ref, 0, 0)["ok"]
    out = ref.copy()
    out[0] = np.nan
    r = arrays.compare(np, out, ref, 1e-5, 1e-5)
    assert not r["ok"] and r["nonfinite"] == 1 and r["max_abs_err"] is None and r["first_bad"] == 0
    out = ref.copy()
    out[2] = -np.inf
    assert not arrays.compare(np, out, ref, 1e-5, 1e-5)["ok"]


def test_integer_outputs_compare_exactly():
    ref = np.arange(10, dtype=np.int32)
    out = ref.copy()
    assert arrays.compare(np, out, ref, 0.0, 0.0)["ok"]
    out[3] += 1
    r = arrays.compare(np, out, ref, 0.0, 0.0)
    assert not r["ok"] and r["bad"] == 1 and r["max_abs_err"] == 1.0


def test_bitwise_equal_sees_nan_payloads_and_single_bits():
    a = np.array([1.0, np.nan], dtype=np.float32)
    assert arrays.bitwise_equal(np, a, a.copy())
    b = a.copy()
    b.view(np.uint32)[0] ^= 1
    assert not arrays.bitwise_equal(np, a, b)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int8", "int64"])
@pytest.mark.parametrize("n", [1, 3, 1037, 4097, 262181])
def test_arrays_start_aligned_like_cuda_malloc(dtype, n):
    """A vectorised kernel (float4 stores) relies on cudaMalloc's 256-byte alignment; an odd length must not shift
    the array off it (the soak found `vectorized` of ew_4_map_abs_affine, N=1037, failing on it)."""
    from kernels_harness.run.arrays import ALIGN_BYTES, allocate
    g = allocate(np, np.dtype(dtype), (n,))
    assert g.ptr % ALIGN_BYTES == 0 and g.view.ctypes.data == g.ptr
    assert g.first_out_of_bounds() is None
    g.base[g.guard + n] = 1
    assert g.first_out_of_bounds() == n
