"""The H200 measurement script's CPU-side parts: stratified task order and the one-library-per-build
batching (many implementations, renamed entries, one nvcc call). Timing itself is a GPU test."""
import shutil
import subprocess

import pytest

from kernels_harness.datasets import measure, registry


def _by_family(n=3):
    return {f.name: [registry.build(f.name, p) for p in registry.variants(f.name)[:n]] for f in registry.FAMILIES}


def test_stratified_order_takes_every_family_first():
    by = _by_family()
    order = measure.stratified(by, seed=0)
    assert len(order) == sum(len(v) for v in by.values())
    first = [t.family for t in order[:len(by)]]
    assert sorted(first) == sorted(by)            # one of each family before any family repeats
    assert [t.id for t in measure.stratified(by, seed=0)] == [t.id for t in order]
    assert [t.id for t in measure.stratified(by, seed=1)] != [t.id for t in order]


def test_combined_source_renames_entries_and_isolates_kernels():
    by = _by_family(1)
    order = measure.stratified(by)[:4]
    items = [(ti, ii, t, im) for ti, t in enumerate(order) for ii, im in enumerate(t.implementations)]
    src = measure.combined_source(items)
    for ti, ii, t, _ in items:
        assert f'extern "C" int {measure.symbol(ti, ii)}(' in src
        assert f"namespace ns_t{ti}_i{ii} {{" in src
    assert src.count("#include <cuda_runtime.h>") == 1


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_one_shared_library_exports_every_implementation(tmp_path):
    by = _by_family(1)
    hist = [registry.build("histogram", p) for p in registry.variants("histogram")[:2]]
    assert hist[0].source != hist[1].source  # different compile-time bin counts in one library
    order = [by["transpose"][0], by["softmax"][0], by["matmul"][0], *hist]  # templates, namespaces, macros
    items = [(ti, ii, t, im) for ti, t in enumerate(order) for ii, im in enumerate(t.implementations)]
    built = measure.compile_batch(items, tmp_path, "b0", "sm_90")
    paths = {v[0] for v in built.values()}
    assert len(paths) == 1 and None not in paths          # one library for the whole batch
    syms = subprocess.run(["nm", "-D", "--defined-only", paths.pop()], capture_output=True, text=True, check=False).stdout
    for ti, ii, _, _ in items:
        assert measure.symbol(ti, ii) in syms
    src = measure.combined_source(items)
    assert src.count("#define NBINS") == src.count("#undef NBINS") == sum(len(t.implementations) for t in hist)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_a_broken_implementation_does_not_sink_its_batch(tmp_path):
    import dataclasses
    t = registry.build("histogram", registry.variants("histogram")[0])
    bad = dataclasses.replace(t.implementations[1], source=t.implementations[1].source.replace("__syncthreads();", "syntax error;", 1))
    t = dataclasses.replace(t, implementations=(t.implementations[0], bad))
    built = measure.compile_batch([(0, 0, t, t.implementations[0]), (0, 1, t, bad)], tmp_path, "b1", "sm_90")
    assert built[(0, 0)][0] is not None
    assert built[(0, 1)][0] is None and "error" in built[(0, 1)][2]


@pytest.mark.gpu
def test_measure_times_a_few_tasks_on_the_gpu(tmp_path):
    rc = measure.main(["--out", str(tmp_path), "--max_seconds", "90", "--max_tasks", "6"])
    assert rc == 0
    from kernels_harness.datasets import times
    m = times.load(tmp_path / "times")
    assert len(m) >= 1 and (m.agrees == 1).any()


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_plan_only_runs_without_a_gpu(tmp_path, capsys):
    import json
    assert measure.main(["--plan_only", "--max_tasks", "30", "--batch", "8", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    plan = json.loads(out[out.index("{"):])
    assert plan["tasks"] == 30 and plan["batches"] >= 30 * 3 // 8 - 1
    assert len(set(plan["families_first"])) == len(registry.FAMILIES)
    assert plan["first_batch"]["built"] == plan["first_batch"]["implementations"] >= 8


def test_resume_skips_finished_tasks_and_redoes_incomplete_ones(tmp_path):
    import json
    p = tmp_path / "results.jsonl"
    lines = [{"task": "a", "time_ms": []}, {"task": "b", "incomplete": True, "time_ms": []},
             {"task": "c", "incomplete": True}, {"task": "c", "time_ms": []}, {"task": "d", "fatal": True}]
    p.write_text("\n".join(json.dumps(x) for x in lines) + "\nnot json\n")
    assert measure.measured_tasks(p) == {"a", "c", "d"}
    assert measure.measured_tasks(tmp_path / "missing.jsonl") == set()
