"""A cell of the zero-shot ladder on disk (benchmarks/zero_shot.py): one model x prompt x suite, run in parts.

    WORK/<model>__<prompt>__<suite>/
        key.json                 what makes the cell's results (a different key is refused, never mixed)
        part_00.json ...         the records of each part of --chunk_tasks tasks, written when the part ends
        candidates.jsonl         when every part is done: all records (one judged answer per line)
        eval.json, cell.json     the summary (cudaperf_jax.eval.report.build_summary) and counts, seconds

A part is the unit of work that is never lost: a run stopped by --max_minutes (between parts) or killed continues
with the parts not yet written. Metrics are per task, so the parts' records together give the cell's metrics exactly.
"""
from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

PART_SEED = 7919   # part j samples with seed + PART_SEED * j: parts of one cell draw distinct random streams


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)   # atomic: a killed run leaves the old file or the new one


def check_key(cell_dir: Path, key: dict) -> None:
    """Records `key` in a new cell directory; raises ValueError when the directory holds another key."""
    path = cell_dir / "key.json"
    if path.is_file():
        old = json.loads(path.read_text())
        legacy = "prompt_sha" not in old and "prompt_sha" in key   # written before prompts were fingerprinted
        want = {k: v for k, v in key.items() if k != "prompt_sha"} if legacy else key
        if old != want:
            diff = sorted(k for k in want if old.get(k) != want[k])
            raise ValueError(f"{cell_dir} holds a cell with other settings ({', '.join(diff)}); give another --work "
                             "or remove that directory")
        if legacy:
            print(f"[zero_shot] {cell_dir.name}: recorded before prompts were fingerprinted (2026-12-08); taken as "
                  "written with today's prompt text", file=sys.stderr)
        return
    cell_dir.mkdir(parents=True, exist_ok=True)
    _write(path, json.dumps(key, indent=1))


def finished(cell_dir: Path, key: dict) -> dict | None:
    """The cell's meta (cell.json) when it is complete with this key, else None (ValueError: another key)."""
    if not cell_dir.is_dir():
        return None
    check_key(cell_dir, key)
    if (cell_dir / "cell.json").is_file() and (cell_dir / "eval.json").is_file():
        return json.loads((cell_dir / "cell.json").read_text())
    return None


def parts_of(tasks: list, chunk: int) -> list[list]:
    return [tasks[i:i + chunk] for i in range(0, len(tasks), chunk)] if chunk else [tasks]


def part_seconds(cell_dirs: list[Path]) -> dict:
    """{(model, suite): [seconds of each finished part]} from the parts and cells on disk. A cold part (the first
    after a model load: it paid the compilations, 191 s against 85-112 s on the H200 of 2026-12-07) counts only
    while no warm part of that model and suite is known."""
    warm: dict = {}
    cold: dict = {}
    for d in cell_dirs:
        if not (d / "key.json").is_file():
            continue
        key = json.loads((d / "key.json").read_text())
        if (d / "cell.json").is_file():
            meta = json.loads((d / "cell.json").read_text())
            secs = meta.get("part_seconds", [])
            colds = meta.get("part_cold") or [False] * len(secs)
        else:
            parts = [json.loads(p.read_text()) for p in sorted(d.glob("part_*.json"))]
            secs, colds = [p["seconds"]["total"] for p in parts], [p.get("cold", False) for p in parts]
        for sec, c in zip(secs, colds):
            (cold if c else warm).setdefault((key["model"], key["suite"]), []).append(sec)
    return {k: warm.get(k) or cold[k] for k in warm.keys() | cold.keys()}


def expected(seconds: dict, model: str, suite: str) -> float:
    """The mean seconds of a part of this model and suite (else of the suite; 0 when none is known)."""
    for match in (lambda k: k == (model, suite), lambda k: k[1] == suite):
        vals = [s for k, v in seconds.items() if match(k) for s in v]
        if vals:
            return sum(vals) / len(vals)
    return 0.0


def run_cell(sampler, pool, tasks: list, cfg, key: dict, cell_dir: Path, *, chunk: int, seed: int, dedupe: bool,
             may_start, on_part=None, cold=lambda: False) -> bool:
    """Runs the parts of a cell not yet on disk, each only when may_start() says it fits; True when the cell is
    complete (candidates.jsonl, eval.json and cell.json written). cfg: the cell's RolloutConfig; cold(): whether
    the next part is the first since the model was loaded (recorded in the part, see part_seconds)."""
    from experiments.policy_eval import evaluate_policy, harness_breakdown, time_line
    check_key(cell_dir, key)
    parts = parts_of(tasks, chunk)
    for j, part in enumerate(parts):
        path = cell_dir / f"part_{j:02d}.json"
        if path.is_file():
            continue
        if not may_start():
            return False
        t0 = time.perf_counter()
        was_cold = bool(cold())
        ev = evaluate_policy(sampler, pool, part, cfg, seed=seed + PART_SEED * j, dedupe=dedupe, progress=True,
                             log=lambda line: print(f"[zero_shot]   {line}", file=sys.stderr, flush=True))
        slim = [{k: v for k, v in r.items() if k != "features"} for r in ev.records]
        print(f"[zero_shot]   part {j + 1}/{len(parts)}: {time_line(ev)}", file=sys.stderr, flush=True)
        _write(path, json.dumps({"tasks": [t.id for t in part], "records": slim, "judged": ev.judged,
                                 "deduplicated": ev.deduplicated, "generated_tokens": ev.generated_tokens,
                                 "harness": harness_breakdown(ev.candidates),
                                 "seconds": {**{k: round(v, 2) for k, v in ev.seconds.items()},
                                             "total": round(time.perf_counter() - t0, 2)}, "cold": was_cold}))
        if on_part is not None:
            on_part(j, len(parts), time.perf_counter() - t0)
    _finish(tasks, key, cell_dir, len(parts), getattr(pool, "backend", ""))
    return True


def _finish(tasks: list, key: dict, cell_dir: Path, n_parts: int, backend: str) -> None:
    from cudaperf_jax.eval import report
    parts = [json.loads((cell_dir / f"part_{j:02d}.json").read_text()) for j in range(n_parts)]
    records = [r for p in parts for r in p["records"]]
    summary = report.build_summary(records, tasks, ks=(1,), group_by="family")
    secs: dict = {}
    for p in parts:
        for k, v in p["seconds"].items():
            secs[k] = round(secs.get(k, 0.0) + v, 1)
    meta = {"key": key, "model_label": cell_dir.name.split("__")[0], "prompt": key["prompt"], "suite": key["suite"],
            "judged": sum(p["judged"] for p in parts), "deduplicated": sum(p["deduplicated"] for p in parts),
            "generated_tokens": sum(p["generated_tokens"] for p in parts), "parts": n_parts,
            "part_seconds": [p["seconds"]["total"] for p in parts],
            "part_cold": [p.get("cold", False) for p in parts], "seconds": {**secs, "cell": secs.get("total", 0.0)},
            "backend": backend, "finished_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())}
    _write(cell_dir / "candidates.jsonl", "".join(json.dumps(r) + "\n" for r in records))
    _write(cell_dir / "eval.json", json.dumps(summary, indent=1, default=str))
    _write(cell_dir / "cell.json", json.dumps(meta, indent=1))   # last: its presence marks the cell complete
    for j in range(n_parts):
        (cell_dir / f"part_{j:02d}.json").unlink()


def load_cell(cell_dir: Path) -> dict:
    """{"meta", "eval", "hacks"} of a complete cell; hacks: its `hack` verdicts with their violations."""
    meta = json.loads((cell_dir / "cell.json").read_text())
    hacks = []
    for line in (cell_dir / "candidates.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r["status"] == "hack":
            hacks.append({k: r.get(k) for k in ("task", "turn", "sample", "error")}
                         | {"violations": [{k: v.get(k) for k in ("rule", "name", "line", "text")}
                                           for v in r.get("violations") or []]})
    return {"meta": meta, "eval": json.loads((cell_dir / "eval.json").read_text()), "hacks": hacks}


def reclassify(cell_dir: Path, tasks: list) -> None:
    """Recomputes a complete cell's ABI categories (cudaperf_jax.eval.abi, as it is now) and its eval.json from its
    records: the verdict, the error line and the head of the compile log are what the classifier reads."""
    from cudaperf_jax.eval import report
    recs = [json.loads(x) for x in (cell_dir / "candidates.jsonl").read_text().splitlines()]
    _classify(recs, {t.id: t for t in tasks})
    _write(cell_dir / "candidates.jsonl", "".join(json.dumps(r) + "\n" for r in recs))
    summary = report.build_summary(recs, tasks, ks=(1,), group_by="family")
    _write(cell_dir / "eval.json", json.dumps(summary, indent=1, default=str))


def _renamed_export(task, source: str) -> str:
    """`source` with its export renamed to the task's entry where it exports the entry as it was before the
    reserved-name rename (kernels_harness.tasks.reserved: `tanh` -> `tanh_op`, the prompt had asked for `tanh`)."""
    from kernels_harness.tasks.reserved import SUFFIX
    old = task.entry
    while old.endswith(SUFFIX) and not re.search(rf'extern\s+"C"\s+int\s+{re.escape(old)}\s*\(', source):
        old = old[:-len(SUFFIX)]
        m = re.search(rf'(extern\s+"C"\s+int\s+){re.escape(old)}(\s*\()', source)
        if m:
            return source[:m.start()] + m.group(1) + task.entry + m.group(2) + source[m.end():]
    return source


def rejudge(cell_dir: Path, tasks: list, pool) -> tuple[int, int]:
    """Judges a cell's answers (finished or not) again with the harness as it is now, in place: complete cells get
    new candidates.jsonl and eval.json, unfinished ones new part files. The answers are not generated again, so a
    turn's answer still saw the earlier harness's feedback on the turn before. An answer exporting a task's entry
    as it was before the reserved-name rename is judged with the export renamed. Returns (answers, verdicts changed)."""
    from cudaperf_jax.eval import report
    by_id = {t.id: t for t in tasks}
    files = ([cell_dir / "candidates.jsonl"] if (cell_dir / "cell.json").exists()
             else sorted(cell_dir.glob("part_*.json")))
    loaded = {}
    for f in files:
        if f.suffix == ".jsonl":
            loaded[f] = [json.loads(x) for x in f.read_text().splitlines() if x.strip()]
        else:
            loaded[f] = json.loads(f.read_text())
    recs = [r for f, v in loaded.items() for r in (v if isinstance(v, list) else v["records"]) if r["task"] in by_id]
    # each distinct answer as stored -> as judged (renamed once), each distinct judged answer evaluated once
    stored = dict.fromkeys((r["task"], r["source"] or "") for r in recs)
    as_judged = {k: (k[0], _renamed_export(by_id[k[0]], k[1])) for k in stored}
    jobs = list(dict.fromkeys(as_judged.values()))
    verdicts = dict(zip(jobs, pool.evaluate([(by_id[t], src) for t, src in jobs]))) if jobs else {}
    changed = 0
    for f, v in loaded.items():
        rows = v if isinstance(v, list) else v["records"]
        for i, r in enumerate(rows):
            if r["task"] not in by_id:
                continue
            task = by_id[r["task"]]
            res = verdicts[as_judged[(r["task"], r["source"] or "")]]
            new = report.record(task, r["turn"], r["sample"], res, text=r.get("completion", ""), source=r["source"],
                                truncated=r.get("truncated"))
            new = {k: v2 for k, v2 in new.items() if k != "features"}
            changed += new["status"] != r["status"]
            rows[i] = new
        _classify([r for r in rows if r["task"] in by_id], by_id)
        _write(f, "".join(json.dumps(r) + "\n" for r in v) if isinstance(v, list) else json.dumps(v))
    if (cell_dir / "cell.json").exists():
        rows = loaded[cell_dir / "candidates.jsonl"]
        _write(cell_dir / "eval.json", json.dumps(report.build_summary(rows, tasks, ks=(1,), group_by="family"),
                                                  indent=1, default=str))
        meta = json.loads((cell_dir / "cell.json").read_text())
        meta["rejudged_utc"] = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
        meta["rejudged_backend"] = getattr(pool, "backend", "")
        _write(cell_dir / "cell.json", json.dumps(meta, indent=1))
    return len(recs), changed


def _classify(recs: list[dict], by_id: dict) -> None:
    """Sets each record's "abi" from its verdict, error line and compile log (cudaperf_jax.eval.abi as it is now)."""
    from cudaperf_jax.eval.abi import classify
    from kernels_harness.result import EvalResult
    for r in recs:
        res = EvalResult(task_id=r["task"], backend="", status=r["status"], error=r.get("error", ""),
                         compile_log=r.get("compile_log", ""))
        r["abi"] = classify(by_id[r["task"]], r["source"], res, truncated=bool(r.get("truncated")))


def records(cell_dir: Path) -> list[dict]:
    """The judged answers of a cell, complete (candidates.jsonl) or not (its finished parts)."""
    if (cell_dir / "cell.json").exists():
        return [json.loads(x) for x in (cell_dir / "candidates.jsonl").read_text().splitlines()]
    return [r for f in sorted(cell_dir.glob("part_*.json")) for r in json.loads(f.read_text())["records"]]


def common_cells(cell_dirs: list[Path], tasks: list) -> tuple[list[dict], list]:
    """Cells of one suite compared on the tasks every one of them has judged, finished or not: per cell a
    zero_shot_report row (ABI categories recomputed with cudaperf_jax.eval.abi as it is now), and those tasks."""
    from cudaperf_jax.eval import report
    recs = {d: records(d) for d in cell_dirs}
    recs = {d: rs for d, rs in recs.items() if rs}
    if not recs:
        return [], []
    ids = set.intersection(*({r["task"] for r in rs} for rs in recs.values()))
    common = [t for t in tasks if t.id in ids]
    by_id = {t.id: t for t in common}
    rows = []
    for d, rs in recs.items():
        rs = [r for r in rs if r["task"] in by_id]
        _classify(rs, by_id)
        s = report.build_summary(rs, common, ks=(1,), group_by="family")
        key = json.loads((d / "key.json").read_text())
        hacks = [{k: r.get(k) for k in ("task", "turn", "sample", "error")} | {"violations": r.get("violations") or []}
                 for r in rs if r["status"] == "hack"]
        rows.append({"eval": s, "meta": {"model_label": d.name.split("__")[0], "prompt": key["prompt"],
                                         "suite": key["suite"], "judged": len(rs), "deduplicated": "-",
                                         "seconds": {}}, "hacks": hacks})
    return rows, common
