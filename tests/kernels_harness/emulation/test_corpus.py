"""Every corpus kernel, built for the cpu backend, matches its numpy reference (and records its launches)."""
import concurrent.futures as cf
import os
import time
from pathlib import Path

import pytest

from kernels_harness.emulation import BuildResult, EmulatedLibrary, build_shared_library
from kernels_harness.emulation import corpus as corpus_lib

CASES = corpus_lib.load_cases()


def _shared_build(case, shared: Path) -> None:
    """Builds `case` into `shared` unless another pytest-xdist worker has claimed it (lock file)."""
    try:
        os.close(os.open(shared / f"{case.name}.lock", os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        return
    res = build_shared_library(corpus_lib.source_of(case), shared / f"{case.name}.so", checks=False)
    if not res.ok:
        (shared / f"{case.name}.log").write_text(res.log)


def _collect(case, shared: Path, deadline: float) -> BuildResult:
    so, log = shared / f"{case.name}.so", shared / f"{case.name}.log"
    while not (so.exists() or log.exists()) and time.time() < deadline:
        time.sleep(0.2)
    if so.exists():
        return BuildResult(ok=True, log="", path=so)
    return BuildResult(ok=False, log=log.read_text() if log.exists() else "not built in time")


@pytest.fixture(scope="module")
def built(tmp_path_factory, request):
    """All corpus libraries: name -> BuildResult. Workers of one pytest-xdist session share the builds,
    each taking the next unclaimed case, two compilers at a time."""
    base = tmp_path_factory.getbasetemp()
    under_xdist = hasattr(request.config, "workerinput")
    shared = (base.parent if under_xdist else base) / "emu_corpus"
    shared.mkdir(exist_ok=True)
    with cf.ThreadPoolExecutor(2) as ex:
        list(ex.map(lambda c: _shared_build(c, shared), CASES))
    deadline = time.time() + 600
    return {c.name: _collect(c, shared, deadline) for c in CASES}


def test_corpus_is_large_and_covers_the_issue_kinds():
    tags = {t for c in CASES for t in c.tags}
    assert len(CASES) >= 40
    for kind in ("reduction", "matmul", "transpose", "scan", "histogram", "softmax", "layernorm", "stencil", "half",
                 "bf16", "dynamic_smem", "template", "multi_kernel", "warp", "barrier", "atomic", "constant"):
        assert kind in tags, kind


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_corpus_kernel_matches_numpy(case, built):
    res = built[case.name]
    assert res.ok, res.log
    lib = EmulatedLibrary(res.path)
    lib.reset()
    inputs = corpus_lib.make_inputs(case)
    rc, got = corpus_lib.run_on_cpu(lib, case, inputs)
    assert rc == 0, lib.last_error()
    assert lib.last_error() == ""
    report = corpus_lib.compare(case, got, corpus_lib.expected_outputs(case, inputs))
    assert all(r["ok"] for r in report.values()), report
    launches = lib.launches()
    assert launches and all(min(lr["grid"]) >= 1 and min(lr["block"]) >= 1 for lr in launches)


def test_a_wrong_result_is_detected(built):
    """The comparison is not vacuous: a perturbed output fails it."""
    case = next(c for c in CASES if c.name == "matmul_tiled")
    lib = EmulatedLibrary(built[case.name].path)
    inputs = corpus_lib.make_inputs(case)
    _, got = corpus_lib.run_on_cpu(lib, case, inputs)
    got["C"] = got["C"].copy()
    got["C"][3, 4] += 1e-3
    report = corpus_lib.compare(case, got, corpus_lib.expected_outputs(case, inputs))
    assert not report["C"]["ok"] and report["C"]["max_abs_err"] == pytest.approx(1e-3, rel=1e-2)
