"""`python -m kernels_harness eval|reference`: verdicts, one JSON object with --json, exit codes."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.kernels_harness.adversarial.test_adversarial import cpu

ADV = Path(__file__).parent / "adversarial"
TASK = ADV / "saxpy_task.json"
ROOT = Path(__file__).resolve().parents[2]


def run(*args, timeout=300):
    p = subprocess.run([sys.executable, "-m", "kernels_harness", *args], capture_output=True, text=True,
                       timeout=timeout, cwd=ROOT, check=False)
    return p.returncode, p.stdout, p.stderr


@cpu
def test_eval_json_prints_exactly_one_object_with_status():
    rc, out, err = run("eval", "--task", str(TASK), "--solution", str(ADV / "wrong_result.cu"), "--backend", "cpu",
                       "--json", "--cpu-budget-mb", "1")
    assert rc == 0, err
    res = json.loads(out)  # the whole stdout is one JSON object
    assert res["status"] == "wrong" and res["correct"] is False and res["task_id"] == "saxpy"
    assert res["configs"][0]["correct"] is False and "differs" in res["configs"][0]["error"]
    assert isinstance(res["seed"], int) and res["feedback"].startswith("Wrong result")


@cpu
def test_eval_text_output_for_a_good_solution():
    rc, out, err = run("eval", "--task", str(TASK), "--solution", str(ADV / "good_naive.cu"), "--backend", "cpu",
                       "--cpu-budget-mb", "1")
    assert rc == 0, err
    assert out.splitlines()[0] == "saxpy [cpu]: ok"
    assert "config 2 (N=16777216): skipped on the cpu backend" in out


def test_hack_verdict_exits_zero():
    rc, out, err = run("eval", "--task", str(TASK), "--solution", str(ADV / "forks.cu"), "--backend", "cpu", "--json")
    assert rc == 0, err
    res = json.loads(out)
    assert res["status"] == "hack" and {v["rule"] for v in res["violations"]} == {"process"}


@pytest.mark.parametrize("args,needle", [
    (["eval", "--task", "/nonexistent/task.json", "--solution", "x.cu"], "does not exist"),
    (["eval", "--task", str(TASK.parent), "--solution", "x.cu"], "is a directory, not a task file; pass one task file"),
    (["eval", "--task", str(TASK), "--solution", str(TASK.parent), "--backend", "cpu"], "--solution needs one .cu file"),
    (["eval", "--task", str(TASK), "--solution", "/nonexistent/s.cu", "--backend", "cpu"], "does not exist"),
    (["eval", "--task", str(TASK)], "--solution"),
    (["eval", "--task", str(TASK), "--solution", str(ADV / "good_naive.cu"), "--backend", "tpu"], "invalid choice"),
    (["frobnicate"], "invalid choice"),
])
def test_bad_arguments_exit_2_with_one_line(args, needle):
    rc, out, err = run(*args)
    assert rc == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and needle in err


def test_bad_task_file_exits_2(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"id": "t", "track": "c2cuda", "entry": "f", "source": "",
                               "signature": [{"name": "x", "role": "sideways", "dtype": "float32", "shape": [4]}],
                               "configs": [{}]}))
    rc, _, err = run("eval", "--task", str(bad), "--solution", str(ADV / "good_naive.cu"), "--backend", "cpu")
    assert rc == 2 and "role 'sideways'" in err and len(err.strip().splitlines()) == 1


@cpu
def test_reference_runs_the_implementations_and_checks_labels():
    rc, out, err = run("reference", "--task", str(TASK), "--backend", "cpu", "--json", "--cpu-budget-mb", "1")
    assert rc == 0, err
    rep = json.loads(out)
    got = {r["name"]: (r["status"], r["label_holds"]) for r in rep["implementations"]}
    assert got == {"naive": ("ok", True), "grid_stride": ("ok", True), "off_by_one": ("wrong", True)}
    assert rep["status"] == "ok"
