"""The GPU corpus runner: its build half works here (nvcc + cpu backend); the full run is a gpu test."""
import importlib.util
import shutil

import pytest

from kernels_harness.emulation import corpus as corpus_lib
from kernels_harness.emulation import corpus_gpu


def test_without_cupy_it_explains_itself(tmp_path, capsys):
    if importlib.util.find_spec("cupy") is not None:
        pytest.skip("CuPy is installed here")
    assert corpus_gpu.main(["--out", str(tmp_path), "--only", "saxpy"]) == 2
    assert "needs CuPy" in capsys.readouterr().out


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_builds_both_backends_and_the_cpu_side_agrees_with_numpy(tmp_path):
    cases = [c for c in corpus_lib.load_cases() if c.name in ("saxpy", "softmax_warp")]
    nv, cpu = corpus_gpu._build_all(cases, None, tmp_path, jobs=2, with_cpu=True)
    for case in cases:
        assert nv[case.name][0] is not None and nv[case.name][0].is_file(), nv[case.name][1]
        path, err = cpu[case.name]
        assert path is not None, err
        inputs = corpus_lib.make_inputs(case)
        rc, outs, msg = corpus_gpu._run_cpu(path, case, inputs)
        assert rc == 0 and msg == ""
        report = corpus_lib.compare(case, outs, corpus_lib.expected_outputs(case, inputs))
        assert all(r["ok"] for r in report.values()), report


@pytest.mark.gpu
def test_whole_corpus_on_the_gpu_matches_numpy_and_the_cpu_backend(tmp_path):
    assert corpus_gpu.main(["--out", str(tmp_path)]) == 0
    assert (tmp_path / "emulation_corpus_gpu.json").is_file()
