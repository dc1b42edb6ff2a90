"""benchmarks/zero_shot.py on a tiny random policy and the cpu backend: two cells (one per prompt variant) of two
parts (one smoke task each), stopped between parts by --max_minutes, resumed part by part, skipped once complete, and
refused when the settings change."""
import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


def _run(tmp_path, model, *extra):
    cmd = [sys.executable, "benchmarks/zero_shot.py", f"--models={model}", "--suites=smoke", "--smoke_tasks=2",
           "--samples=2", "--temperature=0", "--turns=2", "--max_new_tokens=8", "--backend=cpu", "--workers=1",
           "--prompts=plain,worked_example",
           "--chunk_tasks=1",
           f"--out={tmp_path / 'out'}", f"--work={tmp_path / 'cells'}", f"--compilation_cache={tmp_path / 'jax'}",
           *extra]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900,
                          env={"JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                               "PYTHONPATH": str(REPO)}, check=False)


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ for the cpu backend")
def test_ladder_cells_resume_and_dedupe(tmp_path):
    from tests.cudaperf_jax.models import tiny
    model = tmp_path / "tinyllama"
    tiny.hf_model("llama").save_pretrained(model)
    tiny.tokenizer().save_pretrained(model)
    first = _run(tmp_path, model, "--max_minutes=0.01")      # one part (1 task) always runs; the next would not fit
    assert first.returncode == 0, first.stderr[-3000:]
    assert "2 of 2 cells left (--max_minutes 0.01 reached)" in first.stderr
    cell = tmp_path / "cells" / "tinyllama__plain__smoke"
    assert sorted(p.name for p in cell.iterdir()) == ["key.json", "part_00.json"]   # the first part, kept
    # each part says where its time went: generation (tokens/s), the harness and its verdicts
    part = json.loads((cell / "part_00.json").read_text())
    assert sum(v["n"] for v in part["harness"]["verdicts"].values()) == part["judged"] > 0
    assert "part 1/2: generation " in first.stderr and " tok/s); harness " in first.stderr
    assert "tokens/s); harness" in first.stderr   # and each turn
    # --common compares what has been judged so far: the first part of the plain cell (the other has none)
    common = _run(tmp_path, model, "--common")
    assert common.returncode == 0, common.stderr[-3000:]
    text = (tmp_path / "out" / "common.md").read_text()
    assert "smoke: 1 of 2 tasks judged by all 1 cells" in text and text.count("| tinyllama | plain | smoke | 1 |") == 1
    assert sorted(p.name for p in cell.iterdir()) == ["key.json", "part_00.json"]   # nothing run, nothing changed
    second = _run(tmp_path, model)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "0 finished earlier, 2 to run" in second.stderr and "all 2 cells done (3 part(s) run now" in second.stderr
    assert sorted(p.name for p in cell.iterdir()) == ["candidates.jsonl", "cell.json", "eval.json", "key.json"]
    stamp = {p: p.stat().st_mtime_ns for p in (tmp_path / "cells").rglob("*.json*")}
    third = _run(tmp_path, model)
    assert third.returncode == 0 and "2 finished earlier, 0 to run" in third.stderr and "loaded" not in third.stderr
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "cells").rglob("*.json*")} == stamp   # nothing rerun

    out = tmp_path / "out"
    summary = json.loads((out / "zero_shot.json").read_text())
    assert summary["settings"]["call_timeout_s"] == 30.0 and summary["settings"]["timing"]["min_reps"] == 5
    assert [(c["prompt"], c["suite"], c["tasks"], c["answers"]) for c in summary["cells"]] == [
        ("plain", "smoke", 2, 8), ("worked_example", "smoke", 2, 8)] and summary["pending"] == []
    for cell in summary["cells"]:
        assert [r["turn"] for r in cell["per_turn"]] == [0, 1]
        recs = [json.loads(x) for x in (tmp_path / "cells" / f"tinyllama__{cell['prompt']}__smoke" /
                                        "candidates.jsonl").read_text().splitlines()]
        assert len(recs) == 8 and all("abi" in r and "violations" in r for r in recs)
        # greedy: the two samples of a task are the same answer, judged once (and repeats across turns too)
        distinct = {(r["task"], r["source"]) for r in recs}
        assert cell["deduplicated"] == 8 - len(distinct) >= 4 and cell["judged"] == len(distinct)
    table = (out / "table.md").read_text()
    assert table.count("| tinyllama | ") == 4 and "-> " in table and "## `hack` verdicts" in table
    assert (out / "zero_shot.png").stat().st_size > 1000
    with tarfile.open(out / "cells.tgz") as tar:
        assert sorted(tar.getnames()) == sorted(f"tinyllama__{p}__smoke/{f}" for p in ("plain", "worked_example")
                                                for f in ("candidates.jsonl", "cell.json", "eval.json", "key.json"))
    # another machine: a fresh work directory continues from the cells.tgz a run left in OUT
    moved = _run(tmp_path, model, f"--work={tmp_path / 'cells2'}", f"--resume_from={out / 'cells.tgz'}")
    assert moved.returncode == 0 and "2 finished earlier, 0 to run" in moved.stderr, moved.stderr[-2000:]
    again = _run(tmp_path, model, "--samples=1")
    assert again.returncode == 2 and "holds a cell with other settings (samples)" in again.stderr.splitlines()[-1]


def test_reclassify_recomputes_a_cells_abi_categories(tmp_path):
    """--reclassify: a finished cell's records are classified again (here by the current classifier) without a
    model or the harness, and its eval.json follows."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import zero_shot_cells

    from cudaperf_jax.eval.suites import load_suite
    from tests.cudaperf_jax.eval import abi_cases
    tasks = [t for t in load_suite(REPO / "experiments/suites/smoke") if t.id == "smoke_saxpy"]
    rec = {"task": "smoke_saxpy", "turn": 0, "sample": 0, "status": "runtime_error", "correct": False,
           "speedup": None, "speedup_compile": None, "error": "memory error during config 0", "compile_log": "",
           "truncated": False, "abi": None, "source": abi_cases.QWEN05_SAXPY, "violations": []}
    cell = tmp_path / "cell"
    cell.mkdir()
    (cell / "candidates.jsonl").write_text(json.dumps(rec) + "\n")
    zero_shot_cells.reclassify(cell, tasks)
    assert json.loads((cell / "candidates.jsonl").read_text())["abi"] == "kernel_named_like_export"
    s = json.loads((cell / "eval.json").read_text())
    assert s["abi"] == {"abi_failure": 1.0, "abi": {"kernel_named_like_export": 1}}
    assert s["per_turn"][0]["abi_failure"] == 1.0


def test_a_missing_adapter_of_base_plus_adapter_is_named_before_any_cell_runs(tmp_path):
    from tests.cudaperf_jax.models import tiny
    model = tmp_path / "tinyllama"
    tiny.hf_model("llama").save_pretrained(model)
    tiny.tokenizer().save_pretrained(model)
    out = _run(tmp_path, f"{model}+{tmp_path / 'no_such_adapter'}", "--labels=a")
    assert out.returncode == 2 and "no adapter directory at" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "cells" / "a__plain__smoke" / "part_00.json").exists()
    bad = _run(tmp_path, model, "--labels=a,b")
    assert bad.returncode == 2 and "one label per model" in bad.stderr


def test_part_time_estimate_leaves_out_the_cold_part_once_a_warm_one_is_known(tmp_path):
    """--max_minutes decides from the expected part time; the first part after a model load pays the compilations
    (191 s against 85-112 s on the H200 of 2026-12-07), so it counts only while no warm part is known."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import zero_shot_cells

    def cell(name, parts, finished=False):
        d = tmp_path / name
        d.mkdir()
        (d / "key.json").write_text(json.dumps({"model": "m", "suite": "kernelbench"}))
        if finished:
            (d / "cell.json").write_text(json.dumps({"part_seconds": [s for s, _ in parts],
                                                     "part_cold": [c for _, c in parts]}))
        for j, (s, c) in enumerate(parts if not finished else []):
            (d / f"part_{j:02d}.json").write_text(json.dumps({"seconds": {"total": s}, "cold": c}))
        return d

    a = cell("a", [(191.0, True)])
    assert zero_shot_cells.expected(zero_shot_cells.part_seconds([a]), "m", "kernelbench") == 191.0
    b = cell("b", [(191.0, True), (93.0, False)])
    assert zero_shot_cells.expected(zero_shot_cells.part_seconds([a, b]), "m", "kernelbench") == 93.0
    c = cell("c", [(150.0, True), (85.0, False), (112.0, False)], finished=True)
    assert zero_shot_cells.expected(zero_shot_cells.part_seconds([a, b, c]), "m", "kernelbench") == pytest.approx((93 + 85 + 112) / 3)
    old = tmp_path / "old"   # a part written before the flag: warm
    old.mkdir()
    (old / "key.json").write_text(json.dumps({"model": "m", "suite": "test"}))
    (old / "part_00.json").write_text(json.dumps({"seconds": {"total": 60.0}}))
    assert zero_shot_cells.part_seconds([old]) == {("m", "test"): [60.0]}


SAXPY_OK = (REPO / "tests/kernels_harness/adversarial/good_naive.cu").read_text()   # smoke_saxpy's ABI


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ for the cpu backend")
def test_rejudge_judges_stored_answers_again_in_parts_and_complete_cells(tmp_path):
    """--rejudge: the stored answers get this harness's verdicts (here: two verdicts an older harness got wrong),
    in an unfinished cell's part files and in a complete cell's candidates.jsonl, eval.json and cell.json."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import zero_shot_cells

    from cudaperf_jax.eval.suites import load_suite
    from kernels_harness.run.pool import HarnessPool
    tasks = [t for t in load_suite(REPO / "experiments/suites/smoke") if t.id == "smoke_saxpy"]
    wrong = SAXPY_OK.replace("a * x[i] + y[i]", "a * x[i]")
    old = [{"task": "smoke_saxpy", "turn": 0, "sample": 0, "status": "compile_error", "source": SAXPY_OK,
            "completion": "```cuda\n" + SAXPY_OK + "```", "truncated": False},
           {"task": "smoke_saxpy", "turn": 0, "sample": 1, "status": "ok", "source": wrong, "completion": "",
            "truncated": False}]
    part_cell, done_cell = tmp_path / "part", tmp_path / "done"
    part_cell.mkdir()
    done_cell.mkdir()
    (part_cell / "part_00.json").write_text(json.dumps({"tasks": ["smoke_saxpy"], "records": old, "judged": 2}))
    (done_cell / "candidates.jsonl").write_text("".join(json.dumps(r) + "\n" for r in old))
    (done_cell / "cell.json").write_text(json.dumps({"key": {}, "prompt": "plain"}))
    with HarnessPool(backend="cpu", workers=1, features=False) as pool:
        assert zero_shot_cells.rejudge(part_cell, tasks, pool) == (2, 2)
        assert zero_shot_cells.rejudge(done_cell, tasks, pool) == (2, 2)
    part = json.loads((part_cell / "part_00.json").read_text())
    assert [r["status"] for r in part["records"]] == ["ok", "wrong"] and part["judged"] == 2
    assert part["records"][0]["completion"].startswith("```cuda") and part["records"][0]["correct"] is True
    recs = [json.loads(x) for x in (done_cell / "candidates.jsonl").read_text().splitlines()]
    assert [r["status"] for r in recs] == ["ok", "wrong"] and all("abi" in r for r in recs)
    assert json.loads((done_cell / "eval.json").read_text())["best_of_n"]["correct"] == 1.0
    assert json.loads((done_cell / "cell.json").read_text())["rejudged_backend"] == "cpu"


def test_rejudge_renames_an_export_from_before_the_reserved_name_rename():
    sys.path.insert(0, str(REPO / "benchmarks"))
    import zero_shot_cells

    from kernels_harness.tasks.schema import load_task
    task = load_task(REPO / "data/kernelbench/tasks/level1_22_tanh.json")
    assert task.entry == "tanh_op"
    src = 'extern "C" int tanh(const float* x, float* out, int x_d0, cudaStream_t stream) {\n  return 0;\n}\n'
    assert 'extern "C" int tanh_op(const float* x' in zero_shot_cells._renamed_export(task, src)
    now = src.replace("int tanh(", "int tanh_op(")
    assert zero_shot_cells._renamed_export(task, now) == now
    assert zero_shot_cells._renamed_export(task, "int main() {}") == "int main() {}"


def test_report_names_the_backend_that_judged_the_cells_and_collapses_repeated_violations():
    sys.path.insert(0, str(REPO / "benchmarks"))
    import zero_shot
    import zero_shot_report
    cells = [{"meta": {"backend": "cuda"}}, {"meta": {"backend": "cuda", "rejudged_backend": "cpu"}}]
    assert zero_shot.judged_backend(cells, "cpu") == "cpu, cuda"
    assert zero_shot.judged_backend([{"meta": {"backend": "cuda"}}], "cpu") == "cuda"
    assert zero_shot.judged_backend([{"meta": {}}], "cpu") == "cpu"
    inc = [{"rule": "library", "name": "thrust", "line": 3 + i, "text": "#include <thrust/transform.h>"}
           for i in range(120)]
    text = zero_shot_report.violations_text(
        [{"rule": "library", "name": "cudnn", "line": 2, "text": "#include <cudnn.h>"}] + inc)
    assert text == ("library `cudnn` line 2: `#include <cudnn.h>`; "
                    "library `thrust` line 3: `#include <thrust/transform.h>` (and 119 more lines)")
    assert zero_shot_report.violations_text(inc[:2]).endswith("(and 1 more line)")


def test_a_cells_key_holds_its_prompt_text_so_an_edited_prompt_is_not_mixed_with_old_parts(tmp_path, capsys):
    """The key carries a fingerprint of the variant's text for the cell's tasks: a skeleton that gains the source's
    constants (2026-12-08) changes the key of a cell with such a task and no other; a key written before the
    fingerprint existed is taken as it is."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import zero_shot
    import zero_shot_cells

    from kernels_harness.tasks.schema import Task, load_task
    from tests.cudaperf_jax.prompts.test_variants import ROW_DOT, SMOKE
    plain = Task.from_dict(json.loads(json.dumps(ROW_DOT)))
    d = json.loads(json.dumps(ROW_DOT))
    d["source"] = "#define STRIDE 2\n" + d["source"]
    strided = Task.from_dict(d)
    saxpy = load_task(SMOKE / "smoke_saxpy.json")
    fp = zero_shot.prompt_fingerprint
    assert fp("scaffold", [plain]) != fp("scaffold", [strided])           # the skeleton differs
    assert fp("scaffold", [saxpy]) == fp("scaffold", [saxpy]) != fp("plain", [saxpy])
    assert len(fp("scaffold", [saxpy, plain])) == 16

    class A:
        seed, samples, turns, temperature, top_p, top_k = 0, 4, 2, 0.2, 0.95, 0
        max_new_tokens, max_prompt_tokens, dtype, chunk_tasks = 1024, 4096, "bfloat16", 16

    key = zero_shot.cell_key(A, "m", "scaffold", "test", [saxpy, strided])
    cell = tmp_path / "m__scaffold__test"
    zero_shot_cells.check_key(cell, key)
    zero_shot_cells.check_key(cell, zero_shot.cell_key(A, "m", "scaffold", "test", [saxpy, strided]))   # same
    with pytest.raises(ValueError, match=r"other settings \(prompt_sha\)"):
        zero_shot_cells.check_key(cell, zero_shot.cell_key(A, "m", "scaffold", "test", [saxpy, plain]) | {
            "tasks": key["tasks"]})
    legacy = tmp_path / "old__scaffold__test"
    legacy.mkdir()
    (legacy / "key.json").write_text(json.dumps({k: v for k, v in key.items() if k != "prompt_sha"}))
    zero_shot_cells.check_key(legacy, key)
    assert "recorded before prompts were fingerprinted" in capsys.readouterr().err
    with pytest.raises(ValueError, match=r"\(samples\)"):
        zero_shot_cells.check_key(legacy, key | {"samples": 2})
