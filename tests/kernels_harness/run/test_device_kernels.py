"""The harness's Numba CUDA kernels: the one-pass comparison agrees with the array version.

On the CPU through Numba's CUDA simulator (in a subprocess, since the simulator must be chosen
before numba.cuda is imported); on the GPU (`gpu` marker) with CuPy arrays and the real kernels.
"""
import json
import subprocess
import sys

import numpy as np
import pytest

from kernels_harness.run import arrays

SIM = r'''
import json, numpy as np
from kernels_harness.run.device_kernels import _numba_kernels
k = _numba_kernels()
rng = np.random.default_rng(0)
ref = rng.uniform(-1, 1, 200).astype(np.float32)
cases = {}
for name, edit in [("same", None), ("two_bad", [(17, 1e-3), (150, 2e-3)]), ("nan", [(5, float("nan"))])]:
    out = ref.copy()
    for i, v in edit or []:
        out[i] = v if np.isnan(v) else out[i] + v
    accf = np.zeros(2); acci = np.array([0, 0, out.size], dtype=np.int64)
    k["compare"][1, 32](out, ref, 1e-5, 1e-5, accf, acci)
    cases[name] = {"accf": accf.tolist(), "acci": acci.tolist()}
# the scale-aware rule: a softmax-like reference (all values below atol = 1e-4) against zeros and itself
from kernels_harness.run import arrays
sm = (np.exp(rng.uniform(-1, 1, 300)) / 4e5).astype(np.float32)
for name, out in [("zeros", np.zeros_like(sm)), ("softmax_same", sm.copy())]:
    acc = np.zeros(1)
    k["absmax"][1, 32](sm, acc)
    atol = arrays.effective_atol(1e-4, float(acc[0]))
    accf = np.zeros(2); acci = np.array([0, 0, out.size], dtype=np.int64)
    k["compare"][1, 32](out, sm, atol, 1e-5, accf, acci)
    cases[name] = {"scale": float(acc[0]), "atol": atol, "acci": acci.tolist()}
print(json.dumps(cases))
'''


def test_numba_compare_kernel_matches_array_compare_in_the_simulator():
    pytest.importorskip("numba")
    p = subprocess.run([sys.executable, "-c", SIM], capture_output=True, text=True, timeout=240,
                       env={**__import__("os").environ, "NUMBA_ENABLE_CUDASIM": "1"}, check=False)
    assert p.returncode == 0, p.stderr[-2000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert got["same"]["acci"] == [0, 0, 200] and got["same"]["accf"][0] == 0.0
    assert got["two_bad"]["acci"] == [2, 0, 17]
    rng = np.random.default_rng(0)
    ref = rng.uniform(-1, 1, 200).astype(np.float32)
    out = ref.copy()
    out[17] += 1e-3
    out[150] += 2e-3
    want = arrays.compare(np, out, ref, 1e-5, 1e-5)
    assert got["two_bad"]["accf"][0] == pytest.approx(want["max_abs_err"], rel=1e-6)
    assert got["nan"]["acci"] == [1, 1, 5]
    # the same scale-aware rule as arrays.compare: zeros fail against a reference below atol everywhere
    sm = (np.exp(rng.uniform(-1, 1, 300)) / 4e5).astype(np.float32)
    want = arrays.compare(np, np.zeros_like(sm), sm, 1e-4, 1e-5)
    assert got["zeros"]["scale"] == pytest.approx(want["scale"]) and got["zeros"]["atol"] == pytest.approx(want["atol"])
    assert not want["ok"] and got["zeros"]["acci"][0] == want["bad"] == 300 and got["zeros"]["acci"][2] == 0
    assert got["softmax_same"]["acci"] == [0, 0, 300]


@pytest.mark.gpu
def test_numba_compare_agrees_with_cupy_on_the_gpu():
    cp = pytest.importorskip("cupy")
    from kernels_harness.run.backends import CudaBackend
    from kernels_harness.run.device_kernels import make_compare, make_flush
    be = CudaBackend(0)
    compare, path = make_compare(be)
    flush, fpath = make_flush(be)
    flush()
    be.stream.synchronize()
    ref = cp.random.uniform(-1, 1, 1 << 22).astype(cp.float32)
    out = ref.copy()
    out[12345] += 1e-2
    out[777777] = cp.nan
    a = compare(out, ref, 1e-5, 1e-5)
    b = arrays.compare(cp, out, ref, 1e-5, 1e-5)
    assert path == "numba" and fpath == "numba"
    assert (a["ok"], a["bad"], a["nonfinite"], a["first_bad"]) == (b["ok"], b["bad"], b["nonfinite"], b["first_bad"])
    assert a["bad"] == 2 and a["first_bad"] == 12345
    # the scale-aware rule on the device: zeros against a softmax over 393,216 columns fail on both paths
    x = cp.random.uniform(-1, 1, (2, 393216), dtype=cp.float32)
    e = cp.exp(x - x.max(axis=1, keepdims=True))
    sm = e / e.sum(axis=1, keepdims=True)
    z = cp.zeros_like(sm)
    a, b = compare(z, sm, 1e-4, 1e-5), arrays.compare(cp, z, sm, 1e-4, 1e-5)
    assert not a["ok"] and not b["ok"] and a["bad"] == b["bad"] and a["atol"] == pytest.approx(b["atol"])
    assert compare(sm.copy(), sm, 1e-4, 1e-5)["ok"]
