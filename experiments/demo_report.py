"""The end of the demo (experiments/demo.py): one table of every stage's candidates, and the first correct kernel the
policy wrote, printed and saved to WORKDIR/first_correct.cu.

    rows = table_rows(zero_shot_records, turns, rl_final, rl_n, evaluation)
    print(format_table(rows))
    first = first_correct([zero_shot_records, held_out_records])     # a candidate record or None
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np


def _fraction(records: list[dict], key: str) -> float:
    return float(np.mean([bool(r[key]) for r in records])) if records else float("nan")


def table_rows(zero_shot: list[dict], turns: int, rl_final: dict, rl_n: int, evaluation: dict) -> list[dict]:
    """[{stage, n, compiled, correct, reward}]: the zero-shot candidates per turn, the last RL step per turn, the
    held-out evaluation per policy and turn. n: the candidates a row covers; reward None where not computed."""
    rows = []
    for t in range(turns):
        rs = [r for r in zero_shot if r["turn"] == t]
        if rs:
            rows.append({"stage": f"zero-shot, turn {t}", "n": len(rs), "compiled": _fraction(rs, "compiled"),
                         "correct": _fraction(rs, "correct"), "reward": None})
    for t in range(len({k.split("/")[0] for k in rl_final if k.startswith("turn")})):   # the RL rollout's turns
        if f"turn{t}/correct" in rl_final:
            rows.append({"stage": f"RL last step, turn {t}", "n": rl_n, "compiled": rl_final.get(f"turn{t}/compiled"),
                         "correct": rl_final[f"turn{t}/correct"], "reward": rl_final.get(f"turn{t}/reward/total")})
    for key, v in (evaluation or {}).get("per_turn", {}).items():
        policy, turn = key.split("/")
        rows.append({"stage": f"held-out, {policy} policy, turn {turn.removeprefix('turn')}", "n": v.get("n"),
                     "compiled": v["compiled"], "correct": v["correct"], "reward": v["reward"]})
    return rows


def format_table(rows: list[dict]) -> str:
    def num(v, fmt):
        return "-" if v is None or (isinstance(v, float) and np.isnan(v)) else format(v, fmt)
    lines = [f"{'stage':<34} {'n':>4} {'compiled':>9} {'correct':>8} {'reward':>8}"]
    for r in rows:
        lines.append(f"{r['stage']:<34} {num(r['n'], 'd'):>4} {num(r['compiled'], '.2f'):>9} "
                     f"{num(r['correct'], '.2f'):>8} {num(r['reward'], '.3f'):>8}")
    return "\n".join(lines)


def first_correct(groups: list[tuple[str, list[dict]]]) -> tuple[str, dict] | None:
    """(stage name, record) of the first correct candidate, searching the stages in order and each by turn, task
    and sample; None if the policy wrote no correct kernel."""
    for stage, records in groups:
        ok = [r for r in records if r.get("correct") and r.get("status") == "ok" and r.get("source")]
        if ok:
            return stage, min(ok, key=lambda r: (r["turn"], r.get("policy", ""), r["task"], r["sample"]))
    return None


def report_first_correct(groups: list[tuple[str, list[dict]]], workdir: Path, backend: str) -> Path | None:
    """Prints the first correct kernel (source, verdict, speedup) and writes it to WORKDIR/first_correct.cu; says so
    when there is none. Returns the file's path or None."""
    found = first_correct(groups)
    if found is None:
        print("\n[demo] no candidate was correct: the policy wrote no correct kernel in this run (see "
              "candidates.jsonl for the harness feedback on each)", file=sys.stderr)
        return None
    stage, r = found
    speed = (f"speedup {r['speedup']:.2f}x over the baseline" if r.get("speedup") else
             "no speedup: the cpu backend checks correctness but measures no time" if backend == "cpu" else
             "speedup not measured")
    where = f"{stage}, task {r['task']}, turn {r['turn']}, sample {r['sample']}" + (
        f", {r['policy']} policy" if r.get("policy") else "")
    header = f"// The first correct kernel the policy wrote in this demo ({where}).\n// Harness verdict: ok; {speed}.\n"
    path = Path(workdir) / "first_correct.cu"
    path.write_text(header + r["source"])
    bar = "-" * 100
    print(f"\n[demo] first correct model-written kernel: {where}\n[demo] verdict ok, {speed}; saved to {path}\n{bar}\n"
          f"{r['source'].rstrip()}\n{bar}", file=sys.stderr)
    return path
