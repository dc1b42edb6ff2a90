"""The demo's closing table and first correct kernel (experiments/demo_report.py)."""
import math

from experiments import demo_report


def _rec(task, turn, sample, status, source="__global__ void k() {}\n", **kw):
    return {"task": task, "turn": turn, "sample": sample, "status": status, "compiled": status in ("ok", "wrong"),
            "correct": status == "ok", "speedup": None, "source": source, **kw}


ZERO_SHOT = [_rec("relu", 0, 0, "compile_error"), _rec("relu", 0, 1, "wrong"),
             _rec("relu", 1, 0, "ok", source="// second turn\n"), _rec("relu", 1, 1, "ok", source="// other\n")]


def test_table_gives_the_candidates_of_each_row():
    rl = {"turn0/compiled": 0.5, "turn0/correct": 0.0, "turn0/reward/total": -0.1, "turn1/correct": 0.5}
    ev = {"per_turn": {"start/turn0": {"n": 2, "compiled": 1.0, "correct": 0.0, "reward": 0.1}}}
    rows = demo_report.table_rows(ZERO_SHOT, 2, rl, 2, ev)
    assert [(r["stage"], r["n"]) for r in rows] == [("zero-shot, turn 0", 2), ("zero-shot, turn 1", 2),
                                                    ("RL last step, turn 0", 2), ("RL last step, turn 1", 2),
                                                    ("held-out, start policy, turn 0", 2)]
    assert rows[0]["compiled"] == 0.5 and rows[1]["correct"] == 1.0 and rows[3]["compiled"] is None
    text = demo_report.format_table(rows)
    assert text.splitlines()[0].split()[:2] == ["stage", "n"]
    assert "held-out, start policy, turn 0" in text and " -" in text   # a value not computed shows as -
    assert math.isnan(demo_report._fraction([], "correct"))
    # an RL rollout of one turn beside a zero-shot stage of two: one RL row
    rows = demo_report.table_rows(ZERO_SHOT, 2, {"turn0/correct": 0.5, "turn0/compiled": 1.0}, 4, {})
    assert [(r["stage"], r["n"]) for r in rows if r["stage"].startswith("RL")] == [("RL last step, turn 0", 4)]


def test_first_correct_kernel_is_printed_and_saved(tmp_path, capsys):
    held = [_rec("scan", 0, 0, "ok", source="// held out\n", policy="rl")]
    assert demo_report.first_correct([("zero-shot", ZERO_SHOT[:2]), ("held-out", held)]) == ("held-out", held[0])
    path = demo_report.report_first_correct([("zero-shot", ZERO_SHOT), ("held-out", held)], tmp_path, "cpu")
    text = path.read_text()
    assert path.name == "first_correct.cu" and text.endswith("// second turn\n")
    assert "task relu, turn 1, sample 0" in text and "cpu backend" in text
    err = capsys.readouterr().err
    assert "first correct model-written kernel" in err and "// second turn" in err


def test_no_correct_kernel_is_said(tmp_path, capsys):
    assert demo_report.report_first_correct([("zero-shot", ZERO_SHOT[:2])], tmp_path, "cpu") is None
    assert "wrote no correct kernel" in capsys.readouterr().err and not (tmp_path / "first_correct.cu").exists()
