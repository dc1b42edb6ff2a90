"""The emulation corpus: one Case per corpus/<name>.cu, with its signature, sizes and numpy reference.

Used by tests/kernels_harness/emulation/test_corpus.py (cpu backend) and by
`python -m kernels_harness.emulation.corpus_gpu` (the same kernels with nvcc on a GPU). References
compute in float64 (or exact integers) from the very inputs the kernels get.
"""
import numpy as np

from kernels_harness.emulation.corpus import (
    Arg,
    Case,
    bf16_bits_to_f32,
    f32_to_bf16_bits,
)


def _i(name, n, role="scalar", dtype="int32"):
    return Arg(name, role, dtype, value=n)


def A(name, role, dtype, shape, init=None):
    return Arg(name, role, dtype, tuple(shape) if isinstance(shape, (tuple, list)) else (shape,), init=init)


def f64(x):
    return np.asarray(x, dtype=np.float64)


def bf16_round(x):
    return bf16_bits_to_f32(f32_to_bf16_bits(np.asarray(x, dtype=np.float32)))


def _reduce_case(name, n=10000):
    return Case(name, name, (A("x", "in", "float32", n), A("out", "out", "float32", 1), _i("n", n)),
                lambda v: {"out": [f64(v["x"]).sum()]}, atol=1e-3, rtol=1e-4, tags=("reduction",))


def _matmul_case(name, M, N, K, tags):
    return Case(name, name, (A("A", "in", "float32", (M, K)), A("B", "in", "float32", (K, N)),
                             A("C", "out", "float32", (M, N)), _i("M", M), _i("N", N), _i("K", K)),
                lambda v: {"C": f64(v["A"]) @ f64(v["B"])}, atol=1e-4, rtol=1e-4, tags=tags)


def _softmax(x):
    x = f64(x)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _stencil1d(x, r=3):
    p = np.concatenate([np.zeros(r), f64(x), np.zeros(r)])
    return sum(p[r + k:r + k + len(x)] for k in range(-r, r + 1))


def _jacobi(u, iters):
    u = f64(u).astype(np.float32)
    for _ in range(2 * iters):
        v = u.copy()
        v[1:-1, 1:-1] = np.float32(0.25) * (u[1:-1, :-2] + u[1:-1, 2:] + u[:-2, 1:-1] + u[2:, 1:-1])
        u = v
    return u


def _conv3x3(img, f):
    img, f = f64(img), f64(f).reshape(3, 3)
    h, w = img.shape
    p = np.zeros((h + 2, w + 2))
    p[1:-1, 1:-1] = img
    return sum(f[dy, dx] * p[dy:dy + h, dx:dx + w] for dy in range(3) for dx in range(3))


def _layernorm(x, g, b, eps):
    x = f64(x)
    mu = x.mean(axis=1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * f64(g) + f64(b)


def _rmsnorm_half(x, w, eps):
    x = f64(x)
    r = 1.0 / np.sqrt((x * x).mean(axis=1, keepdims=True) + eps)
    return (x * r * f64(w)).astype(np.float16)


def _gelu_tanh(v):
    v = f64(v)
    return 0.5 * v * (1.0 + np.tanh(0.7978845608 * (v + 0.044715 * v ** 3)))


def _erf(x):
    import math
    return np.vectorize(math.erf)(f64(x))


def _math_mix(x):
    v = f64(x)
    v32 = np.asarray(x, dtype=np.float32)
    return (np.exp(v) * 0.1 + np.log(v) + np.sqrt(v) + 1 / np.sqrt(v) + np.sin(v) * np.cos(v) + np.tanh(v) + _erf(v)
            + v ** 1.5 + (2 * v + 1) + (v * v - 1) + 1 / v + np.clip(v - 1, 0, 1) + np.log1p(v) + 2.0 ** v + v
            + np.floor(v32 * np.float32(3)) + np.ceil(v) + np.trunc(v32 * np.float32(5)))


def _ballot_rank(x):
    pos = f64(x) > 0
    rank = np.full(len(x), -1, dtype=np.int64)
    for w in range(0, len(x), 32):
        seg = pos[w:w + 32]
        rank[w:w + 32][seg] = np.arange(seg.sum())
    return pos.sum(), rank


def _warp_groups(x, size, fill=0.0):
    n = len(x)
    pad = (-n) % size
    return np.concatenate([f64(x), np.full(pad, fill)]).reshape(-1, size)


def _file_scope(v, n=500, t=64):
    xi = _warp_groups(v["xi"], t)
    xf = _warp_groups(v["xf"], t)
    return {"sums": xi.sum(axis=1), "yf": np.roll(xf, -1, axis=1).reshape(-1)[:n]}


def _dyn_large(x, elems=16384):
    s = np.zeros(elems)
    s[:len(x)] = 2 * f64(x)
    k = np.arange(len(x))
    return s[elems - 1 - k] + s[k]


def _bitops(v, n=1000, nwords=32):
    k = np.asarray(v["idx"], dtype=np.int64)
    bits = np.zeros(nwords * 32, dtype=bool)
    bits[k] = (k % 3 != 0) & (k % 5 != 0)
    words = (bits.reshape(nwords, 32) * (np.uint64(1) << np.arange(32, dtype=np.uint64))).sum(axis=1)
    return {"bits": words, "counter": [n], "down": [-2 * n, 12345], "total": [k.sum()]}


def _poly(c, x, deg):
    c, x = f64(c), f64(x)
    return sum(c[k] * x ** k for k in range(deg + 1))


def _spmv(v, rows=40):
    y = np.zeros(rows)
    rp, ci, vals, x = v["rowptr"], v["colidx"], f64(v["vals"]), f64(v["x"])
    for r in range(rows):
        y[r] = sum(vals[k] * x[ci[k]] for k in range(rp[r], rp[r + 1]))
    return y


def _half2(v):
    x, y = v["x"].astype(np.float16), v["y"].astype(np.float16)
    z = (x * y).astype(np.float16) + x
    return z.astype(np.float16) - (x * np.float16(0.5)).astype(np.float16)


CASES = [
    Case("vector_add", "vector_add", (A("a", "in", "float32", 3000), A("b", "in", "float32", 3000),
                                      A("c", "out", "float32", 3000), _i("n", 3000)),
         lambda v: {"c": f64(v["a"]) + f64(v["b"])}, tags=("elementwise",)),
    Case("saxpy", "saxpy", (_i("n", 1000), Arg("a", "scalar", "float32", value=2.5), A("x", "in", "float32", 1000),
                            A("y", "inout", "float32", 1000)),
         lambda v: {"y": 2.5 * f64(v["x"]) + f64(v["y"])}, tags=("elementwise",)),
    Case("relu_inplace", "relu_inplace", (A("x", "inout", "float32", 777), _i("n", 777)),
         lambda v: {"x": np.maximum(f64(v["x"]), 0)}, tags=("elementwise",)),
    _reduce_case("reduce_smem_two_pass"),
    _reduce_case("reduce_shfl_atomic"),
    Case("max_shfl_xor", "max_shfl_xor", (A("x", "in", "float32", (37, 70)), A("out", "out", "float32", 37),
                                          _i("rows", 37), _i("cols", 70)),
         lambda v: {"out": f64(v["x"]).max(axis=1)}, tags=("warp",)),
    Case("dot_double_atomic", "dot_double_atomic", (A("a", "in", "float64", 5000), A("b", "in", "float64", 5000),
                                                    A("out", "out", "float64", 1), _i("n", 5000)),
         lambda v: {"out": [np.dot(v["a"], v["b"])]}, atol=1e-9, rtol=1e-9, tags=("reduction", "atomic")),
    _matmul_case("matmul_naive", 37, 45, 29, ("matmul",)),
    _matmul_case("matmul_tiled", 50, 40, 70, ("matmul", "barrier")),
    _matmul_case("matmul_register_tiled", 70, 45, 50, ("matmul", "barrier", "dynamic_smem")),
    Case("transpose_padded", "transpose_padded", (A("inp", "in", "float32", (45, 70)), A("out", "out", "float32", (70, 45)),
                                                  _i("rows", 45), _i("cols", 70)),
         lambda v: {"out": f64(v["inp"]).T}, atol=0, rtol=0, tags=("transpose", "barrier")),
    Case("transpose_naive", "transpose_naive", (A("inp", "in", "int32", (19, 23)), A("out", "out", "int32", (23, 19)),
                                                _i("rows", 19), _i("cols", 23)),
         lambda v: {"out": v["inp"].T}, tags=("transpose",)),
    Case("scan_block_hillis", "scan_block_hillis", (A("inp", "in", "float32", 700), A("out", "out", "float32", 700),
                                                    _i("n", 700)),
         lambda v: {"out": np.cumsum(f64(v["inp"]))}, atol=1e-4, rtol=1e-4, tags=("scan", "barrier")),
    Case("scan_multiblock", "scan_multiblock", (A("inp", "in", "int32", 5000, "randint(0, 10)"),
                                                A("out", "out", "int32", 5000), _i("n", 5000)),
         lambda v: {"out": np.concatenate([[0], np.cumsum(v["inp"])[:-1]])}, tags=("scan", "barrier", "multi_kernel")),
    Case("scan_warp_shfl", "scan_warp_shfl", (A("inp", "in", "float32", 1000), A("out", "out", "float32", 1000),
                                              _i("n", 1000)),
         lambda v: {"out": np.cumsum(_warp_groups(v["inp"], 32), axis=1).reshape(-1)[:1000]}, atol=1e-5,
         tags=("scan", "warp")),
    Case("histogram_atomic", "histogram_atomic", (A("data", "in", "int32", 5000, "randint(-2, 40)"),
                                                  A("bins", "out", "uint32", 32), _i("n", 5000), _i("nbins", 32)),
         lambda v: {"bins": np.bincount(v["data"][(v["data"] >= 0) & (v["data"] < 32)], minlength=32)},
         tags=("histogram", "atomic")),
    Case("histogram_smem", "histogram_smem", (A("data", "in", "uint8", 6000, "randint(0, 256)"),
                                              A("bins", "out", "int32", 64), _i("n", 6000)),
         lambda v: {"bins": np.bincount(v["data"] % 64, minlength=64)}, tags=("histogram", "atomic", "barrier")),
    Case("softmax_block", "softmax_block", (A("x", "in", "float32", (9, 300)), A("y", "out", "float32", (9, 300)),
                                            _i("rows", 9), _i("cols", 300)),
         lambda v: {"y": _softmax(v["x"])}, atol=1e-6, rtol=1e-5, tags=("softmax", "barrier")),
    Case("softmax_warp", "softmax_warp", (A("x", "in", "float32", (13, 100)), A("y", "out", "float32", (13, 100)),
                                          _i("rows", 13), _i("cols", 100)),
         lambda v: {"y": _softmax(v["x"])}, atol=1e-6, rtol=1e-5, tags=("softmax", "warp")),
    Case("layernorm", "layernorm", (A("x", "in", "float32", (6, 200)), A("gamma", "in", "float32", 200),
                                    A("beta", "in", "float32", 200), A("y", "out", "float32", (6, 200)),
                                    _i("rows", 6), _i("cols", 200), Arg("eps", "scalar", "float32", value=1e-5)),
         lambda v: {"y": _layernorm(v["x"], v["gamma"], v["beta"], 1e-5)}, atol=1e-4, rtol=1e-4,
         tags=("layernorm", "warp", "barrier")),
    Case("rmsnorm_half", "rmsnorm_half", (A("x", "in", "float16", (10, 96)), A("w", "in", "float16", 96),
                                          A("y", "out", "float16", (10, 96)), _i("rows", 10), _i("cols", 96),
                                          Arg("eps", "scalar", "float32", value=1e-6)),
         lambda v: {"y": _rmsnorm_half(v["x"], v["w"], 1e-6)}, atol=2e-3, rtol=2e-3, tags=("half", "warp")),
    Case("stencil_1d", "stencil_1d", (A("inp", "in", "float32", 1000), A("out", "out", "float32", 1000), _i("n", 1000)),
         lambda v: {"out": _stencil1d(v["inp"])}, atol=1e-5, tags=("stencil", "barrier")),
    Case("stencil_2d_jacobi", "stencil_2d_jacobi", (A("u0", "in", "float32", (20, 33)), A("out", "out", "float32", (20, 33)),
                                                    _i("h", 20), _i("w", 33), _i("iters", 3)),
         lambda v: {"out": _jacobi(v["u0"], 3)}, atol=1e-6, tags=("stencil", "multi_kernel")),
    Case("conv2d_constant", "conv2d_constant", (A("img", "in", "float32", (30, 45)), A("filt", "in", "float32", 9),
                                                A("out", "out", "float32", (30, 45)), _i("h", 30), _i("w", 45)),
         lambda v: {"out": _conv3x3(v["img"], v["filt"])}, atol=1e-5, tags=("stencil", "constant")),
    Case("half_axpy", "half_axpy", (_i("n", 1000), Arg("a", "scalar", "float32", value=0.75),
                                    A("x", "in", "float16", 1000), A("y", "inout", "float16", 1000)),
         lambda v: {"y": (0.75 * f64(v["x"]) + f64(v["y"])).astype(np.float16)}, atol=1e-3, rtol=1e-3,
         tags=("half",)),
    Case("half2_mul_add", "half2_mul_add", (A("x", "in", "float16", 512), A("y", "in", "float16", 512),
                                            A("z", "out", "float16", 512), _i("n", 512)),
         lambda v: {"z": _half2(v)}, atol=1e-3, rtol=1e-3, tags=("half", "vectorized")),
    Case("bf16_gelu", "bf16_gelu", (A("x", "in", "bfloat16", 1000, "uniform(-3, 3)"), A("y", "out", "bfloat16", 1000),
                                    _i("n", 1000)),
         lambda v: {"y": bf16_round(_gelu_tanh(v["x"]))}, atol=1e-2, rtol=1e-2, tags=("bf16",)),
    Case("bf16_dot_rows", "bf16_dot_rows", (A("a", "in", "bfloat16", (20, 100)), A("b", "in", "bfloat16", (20, 100)),
                                            A("out", "out", "float32", 20), _i("rows", 20), _i("cols", 100)),
         lambda v: {"out": (f64(v["a"]) * f64(v["b"])).sum(axis=1)}, atol=1e-4, rtol=1e-4, tags=("bf16", "warp")),
    Case("dyn_smem_reverse", "dyn_smem_reverse", (A("inp", "in", "float32", 1000), A("out", "out", "float32", 1000),
                                                  _i("n", 1000)),
         lambda v: {"out": np.concatenate([c[::-1] for c in np.split(f64(v["inp"]), range(96, 1000, 96))])},
         atol=0, rtol=0, tags=("dynamic_smem", "barrier")),
    Case("dyn_smem_file_scope", "dyn_smem_file_scope", (A("xi", "in", "int32", 500), A("sums", "out", "int32", 8),
                                                        A("xf", "in", "float32", 500), A("yf", "out", "float32", 500),
                                                        _i("n", 500)),
         _file_scope, atol=0, rtol=0, tags=("dynamic_smem", "barrier")),
    Case("dyn_smem_large", "dyn_smem_large", (A("x", "in", "float32", 10000), A("y", "out", "float32", 10000),
                                              _i("n", 10000)),
         lambda v: {"y": _dyn_large(v["x"])}, atol=1e-6, tags=("dynamic_smem", "barrier")),
    Case("template_scale", "template_scale", (A("xf", "in", "float32", 1000), A("yf", "inout", "float32", 1000),
                                              A("xd", "in", "float64", 1000), A("yd", "inout", "float64", 1000),
                                              _i("n", 1000)),
         lambda v: {"yf": 1.5 * f64(v["xf"]) + f64(v["yf"]), "yd": -0.25 * v["xd"] + v["yd"]}, atol=1e-6,
         tags=("template",)),
    Case("vectorized_float4", "vectorized_float4", (A("x", "in", "float32", 1001), A("y", "out", "float32", 1001),
                                                    _i("n", 1001)),
         lambda v: {"y": 3 * f64(v["x"]) + 1}, atol=1e-6, tags=("vectorized",)),
    Case("vector_types_mix", "vector_types_mix", (A("a", "in", "int32", 600, "randint(-50, 50)"),
                                                  A("b", "in", "float64", 600), A("si", "out", "int32", 300),
                                                  A("sd", "out", "float64", 300), _i("n", 300)),
         lambda v: {"si": v["a"][0::2] * 3 - v["a"][1::2] + 3, "sd": v["b"][0::2] * v["b"][1::2] + v["b"][0::2]},
         atol=1e-12, tags=("vectorized",)),
    Case("ballot_count", "ballot_count", (A("x", "in", "float32", 1000), A("count", "out", "int32", 1),
                                          A("rank", "out", "int32", 1000), _i("n", 1000)),
         lambda v: dict(zip(("count", "rank"), ([_ballot_rank(v["x"])[0]], _ballot_rank(v["x"])[1]))),
         tags=("warp", "atomic")),
    Case("warp_vote_any_all", "warp_vote_any_all", (A("x", "in", "float32", 960, "uniform(-0.95, 0.95)"),
                                                    A("any_out", "out", "int32", 30), A("all_out", "out", "int32", 30),
                                                    _i("n", 960)),
         lambda v: {"any_out": (_warp_groups(v["x"], 32) > 0.9).any(axis=1),
                    "all_out": (_warp_groups(v["x"], 32) > -0.9).all(axis=1)}, tags=("warp",)),
    Case("syncthreads_count", "syncthreads_count", (A("x", "in", "float32", 1000), A("cnt", "out", "int32", 8),
                                                    A("any_big", "out", "int32", 8), A("all_gt", "out", "int32", 8),
                                                    _i("n", 1000)),
         lambda v: {"cnt": (_warp_groups(v["x"], 128) > 0).sum(axis=1),
                    "any_big": (_warp_groups(v["x"], 128) > 0.99).any(axis=1),
                    "all_gt": (_warp_groups(v["x"], 128) > -1).all(axis=1)}, tags=("barrier",)),
    Case("atomic_minmax", "atomic_minmax", (A("x", "in", "int32", 3000, "randint(-1000000, 1000000)"),
                                            A("f", "in", "float32", 3000), A("mn", "out", "int32", 1),
                                            A("mx", "out", "int32", 1), A("fmx", "out", "float32", 1), _i("n", 3000)),
         lambda v: {"mn": [v["x"].min()], "mx": [v["x"].max()], "fmx": [f64(v["f"]).max()]}, atol=0, rtol=0,
         tags=("atomic",)),
    Case("atomic_bitops", "atomic_bitops", (A("idx", "in", "int32", 1000, "permutation"),
                                            A("bits", "out", "uint32", 32), A("counter", "out", "uint32", 1),
                                            A("down", "out", "int32", 2), A("total", "out", "uint64", 1),
                                            _i("n", 1000), _i("nwords", 32)),
         _bitops, tags=("atomic",)),
    Case("math_intrinsics", "math_intrinsics", (A("x", "in", "float32", 1000, "uniform(0.1, 2)"),
                                                A("y", "out", "float32", 1000), _i("n", 1000)),
         lambda v: {"y": _math_mix(v["x"])}, atol=1e-4, rtol=1e-5, tags=("math",)),
    Case("fast_math_approx", "fast_math_approx", (A("x", "in", "float32", 1000), A("y", "out", "float32", 1000),
                                                  _i("n", 1000)),
         lambda v: {"y": np.exp(f64(v["x"])) + np.log(f64(v["x"]) + 2) + np.sin(f64(v["x"])) + np.cos(f64(v["x"]))
                    + np.sqrt(f64(v["x"]) + 2)}, atol=5e-5, rtol=1e-5, tags=("math",)),
    Case("gelu_double", "gelu_double", (A("x", "in", "float64", 700), A("y", "out", "float64", 700),
                                        _i("n", 700, dtype="int64")),
         lambda v: {"y": 0.5 * v["x"] * (1 + _erf(v["x"] / np.sqrt(2)))}, atol=1e-12, rtol=1e-12, tags=("math",)),
    Case("device_functions", "device_functions", (A("c", "in", "float32", 6), A("x", "in", "float32", 500),
                                                  A("y", "out", "float32", 500), _i("n", 500)),
         lambda v: {"y": np.clip(_poly(v["c"], v["x"], 5), 0, 1) + _poly(v["c"], v["x"], 2)}, atol=1e-5,
         tags=("device_function", "constant")),
    Case("gemv_warp", "gemv_warp", (A("A", "in", "float32", (50, 64)), A("x", "in", "float32", 64),
                                    A("y", "out", "float32", 50), _i("rows", 50), _i("cols", 64)),
         lambda v: {"y": f64(v["A"]) @ f64(v["x"])}, atol=1e-5, tags=("warp", "vectorized")),
    Case("volume_3d", "volume_3d", (A("inp", "in", "float32", (5, 9, 17)), A("out", "out", "float32", (5, 9, 17)),
                                    _i("D", 5), _i("H", 9), _i("W", 17)),
         lambda v: {"out": f64(v["inp"]) * (np.arange(17)[None, None, :] + 2 * np.arange(9)[None, :, None]
                                            + 3 * np.arange(5)[:, None, None])}, atol=1e-5, tags=("grid3d",)),
    Case("bitonic_sort_block", "bitonic_sort_block", (A("inp", "in", "float32", (4, 256)),
                                                      A("out", "out", "float32", (4, 256)), _i("segments", 4)),
         lambda v: {"out": np.sort(v["inp"], axis=1)}, atol=0, rtol=0, tags=("sort", "barrier")),
    Case("spmv_csr", "spmv_csr", (A("rowptr", "in", "int32", 41, "csr_rowptr(300)"),
                                  A("colidx", "in", "int32", 300, "randint(0, 50)"), A("vals", "in", "float32", 300),
                                  A("x", "in", "float32", 50), A("y", "out", "float32", 40), _i("rows", 40)),
         lambda v: {"y": _spmv(v)}, atol=1e-5, tags=("sparse",)),
    Case("reduce_add_sync_int", "reduce_add_sync_int", (A("x", "in", "int32", 960, "randint(-100, 100)"),
                                                        A("sums", "out", "int32", 30), A("maxs", "out", "int32", 30),
                                                        _i("n", 960)),
         lambda v: {"sums": v["x"].reshape(30, 32).sum(axis=1), "maxs": v["x"].reshape(30, 32).max(axis=1)},
         tags=("warp", "reduction")),
    Case("occupancy_launch", "occupancy_launch", (A("x", "in", "float32", 3000), A("y", "out", "float32", 3000),
                                                  _i("n", 3000)),
         lambda v: {"y": f64(v["x"]) ** 2}, atol=1e-6, tags=("runtime_api",)),
    Case("shfl_width_segments", "shfl_width_segments", (A("x", "in", "float32", 1000), A("first", "out", "float32", 1000),
                                                        A("segsum", "out", "float32", 1000), _i("n", 1000)),
         lambda v: {"first": np.repeat(_warp_groups(v["x"], 8)[:, 0], 8)[:1000],
                    "segsum": np.repeat(_warp_groups(v["x"], 8).sum(axis=1), 8)[:1000]}, atol=1e-5, tags=("warp",)),
    Case("syncwarp_smem_reduce", "syncwarp_smem_reduce", (A("x", "in", "float32", 1000), A("out", "out", "float32", 8),
                                                          _i("n", 1000)),
         lambda v: {"out": _warp_groups(v["x"], 128).sum(axis=1)}, atol=1e-5, tags=("warp", "barrier", "reduction")),
    Case("malloc_async_pipeline", "malloc_async_pipeline", (A("x", "in", "float32", 1000), A("y", "out", "float32", 1000),
                                                            _i("n", 1000)),
         lambda v: {"y": (f64(v["x"]) + 1) * f64(v["x"])}, atol=1e-6, tags=("runtime_api", "multi_kernel")),
    Case("reduce_volatile_warp", "reduce_volatile_warp", (A("x", "in", "float32", 5000),
                                                          A("partial", "out", "float32", 10), _i("n", 5000)),
         lambda v: {"partial": _warp_groups(v["x"], 512).sum(axis=1)}, atol=1e-4, rtol=1e-5,
         tags=("reduction", "warp", "barrier", "volatile")),
    Case("coop_groups_tiles", "coop_groups_tiles", (A("x", "in", "float32", 1000), A("sums", "out", "float32", 4),
                                                    A("scans", "out", "float32", 1000), A("maxes", "out", "float32", 1000),
                                                    _i("n", 1000)),
         lambda v: {"sums": _warp_groups(v["x"], 256).sum(axis=1),
                    "scans": np.cumsum(_warp_groups(v["x"], 8), axis=1).reshape(-1)[:1000],
                    "maxes": np.repeat(_warp_groups(v["x"], 8).max(axis=1), 8)[:1000]}, atol=1e-5,
         tags=("warp", "barrier", "reduction", "scan", "cooperative_groups")),
    Case("bias_relu_2d", "bias_relu_2d", (A("x", "in", "float32", (30, 70)), A("bias", "in", "float32", 70),
                                          A("y", "out", "float32", (30, 70)), _i("rows", 30), _i("cols", 70)),
         lambda v: {"y": np.maximum(f64(v["x"]) + f64(v["bias"]), 0)}, atol=1e-6, tags=("elementwise",)),
]
