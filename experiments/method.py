"""The method's experiment (issue 45) as a resumable chain for GPU machines that keep nothing: zero-shot, SFT with a
LoRA adapter, multi-turn GRPO with a LoRA adapter on the full reward (seeds 0 and 1) and without the structural and
ranker terms, each policy evaluated per turn on KernelBench level 1, the test split and val; then the report and the
published adapters.

    python experiments/method.py run --root ROOT --budget_minutes M [--model NAME|PATH] [--size full|dev]
                                     [--stages a,b] [--suites kernelbench,test,val]
    python experiments/method.py pack --root ROOT --out DIR                 # what must come back from the machine
    python experiments/method.py restore --root ROOT --from DIR [DIR ...]   # packed files, the chain dir, cells.tgz
    python experiments/method.py collect --from DIR [--chain benchmarks/results/method_chain]
    python experiments/method.py report (--root ROOT | --from DIR ...) --out benchmarks/results/method_<date>
    python experiments/method.py publish (--root ROOT | --from DIR ...) --out adapters

`run` runs the next unfinished stages in order (experiments/method_plan.py) until the budget: each stage is a
subprocess in ROOT, killed with everything it started when the budget ends, and resumes the next time from its run
directory's checkpoint (SFT every 10 steps, RL every step) or its evaluation's finished parts; a finished stage is
stamped (ROOT/stamps/). It prints one line per stage: finished, stopped at the budget (with its step or cells), not
started, waiting for another stage, or failed (with its log's tail).

One device call (at most 10 minutes), in the repository's root on the GPU machine, the model already in its cache:

    python3 experiments/method.py restore --root /root/method --from benchmarks/results/method_chain
    python3 experiments/method.py run --root /root/method --budget_minutes 8
    python3 experiments/method.py pack --root /root/method --out $OUT

`restore` never goes back (a policy further along in ROOT is kept), so every call may begin with it, on a fresh
machine or a warm one. Back here, `collect --from DIR` (DIR: the files the call brought back) replaces the files of
the chain directory, one per policy, each under 20 MB; commit that directory. README.md, "The method's chain", gives
the whole procedure, the model's transfer to a fresh machine included.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
from experiments import method_chain as chain
from experiments.method_launch import launch
from experiments.method_plan import ORDER, Plan, PlanError, Stage

CHAIN_DIR = REPO / "benchmarks" / "results" / "method_chain"


def log(msg: str) -> None:
    print(msg, flush=True)


# ---- progress of a stage ----------------------------------------------------------------------------
def _rows(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def progress(root: Path, plan: Plan, st: Stage) -> str:
    """A few words on how far a stage is."""
    run = root / "runs" / st.policy
    if st.kind in ("sft", "rl", "ranker"):
        rows = _rows(run / "metrics.jsonl")
        cfg = json.loads((run / "config.json").read_text()).get("config", {}) if (run / "config.json").is_file() else {}
        step = chain.latest_step(run)
        text = f"checkpoint at step {step}" if step is not None else "no checkpoint yet"
        if cfg.get("steps"):
            text += f" of {cfg['steps']}"
        last = rows[-1] if rows else {}
        if st.kind == "sft":
            vals = [r["val_loss"] for r in rows if "val_loss" in r]
            text += f", loss {last['loss']:.3f}" if "loss" in last else ""
            text += f", val loss {vals[-1]:.3f}" if vals else ""
        elif st.kind == "rl" and last:
            turns = [last.get(f"turn{t}/correct") for t in range(8) if f"turn{t}/correct" in last]
            text += (f", reward {last.get('reward/total', 0):.3f}, correct per turn "
                     + "/".join(f"{c:.2f}" for c in turns)
                     + f", equal groups {last.get('equal_groups', 0)}/{last.get('groups', 0)}")
        return text
    if st.kind == "eval":
        dirs = plan.cell_dirs(st, root)
        done = sum((d / "cell.json").is_file() for d in dirs)
        parts = sum(len(list(d.glob("part_*.json"))) for d in dirs if not (d / "cell.json").is_file())
        return f"cells {done}/{len(dirs)} complete" + (f", {parts} part(s) of the others" if parts else "")
    return ""


def _how_far(root: Path, plan: Plan, st: Stage) -> str:
    """' (progress)' of a stage, or '' for stages that report none (tasks, base)."""
    text = progress(root, plan, st)
    return f" ({text})" if text else ""


def _log_tail(path: Path, n: int = 6) -> str:
    if not path.is_file():
        return ""
    lines = [x for x in path.read_text(errors="replace").replace("\r", "\n").splitlines() if x.strip()]
    return "\n    ".join(lines[-n:])


# ---- run ----------------------------------------------------------------------------------------------
def check_plan(root: Path, plan: Plan) -> None:
    """Writes ROOT/plan.json, or refuses a root that holds another model's or size's chain."""
    path = root / "plan.json"
    mine = json.loads(json.dumps({**plan.to_json(), "policies": plan.policies(),
                                  "local_stages": [s.name for s in plan.stages() if s.local]}))
    if path.is_file():
        old = json.loads(path.read_text())
        diff = [k for k in ("model", "size", "evals") if old.get(k) != mine[k]]
        if diff:
            raise PlanError(f"{root} holds the chain of {old.get('model')} at size {old.get('size')} ({', '.join(diff)} "
                            "differ); pass the same --model and --size, or another --root")
    chain._atomic(path, json.dumps(mine, indent=1))


class Lock:
    """ROOT/.lock: one driver per root."""

    def __init__(self, root: Path):
        self.path = root / ".lock"

    def __enter__(self):
        if self.path.is_file():
            pid = int(self.path.read_text().strip() or 0)
            if pid and pid != os.getpid() and Path(f"/proc/{pid}").exists():
                raise PlanError(f"another driver (pid {pid}) runs in {self.path.parent}; wait for it or end it")
        self.path.write_text(str(os.getpid()))
        return self

    def __exit__(self, *exc):
        self.path.unlink(missing_ok=True)


def _model_missing(plan: Plan) -> str | None:
    from cudaperf_jax import assets
    if assets.is_model_name(plan.model):
        return None if assets.cached_path(assets.get_spec(plan.model)) else (
            f"{plan.model} is not in the model cache; fill it first: python -m cudaperf_jax.assets fetch "
            f"{plan.model} [--file PATH | --wheels DIR]")
    return None if Path(plan.model).exists() else f"no model at {plan.model}; pass a registered name or a path"


def run(root: Path, plan: Plan, names: list[str], budget_s: float, suites: tuple[str, ...] | None = None) -> int:
    """Runs the selected (default: all) stages in order until `budget_s`; 0 unless a stage failed."""
    stages = plan.select(names) if names else plan.stages()
    root.mkdir(parents=True, exist_ok=True)
    t_start = time.monotonic()
    deadline = t_start + budget_s
    with Lock(root):
        check_plan(root, plan)
        todo = [s for s in stages if not chain.is_done(root, s.name)]
        if any(s.kind in ("base", "eval") for s in todo) and (why := _model_missing(plan)):
            log(f"[method] error: {why}")
            return 2
        status = 0
        for st in stages:
            try:
                line, stop, failed = run_stage(root, plan, st, deadline, suites)
            except SystemExit:                  # a signal: the stage and what it started are gone already
                _history(root, st.name, f"interrupted by a signal{_how_far(root, plan, st)}")
                raise
            log(f"[method] {st.name}: {line}")
            _history(root, st.name, line)
            if failed:
                status = 1
            if stop:
                break
        log(f"[method] {(time.monotonic() - t_start) / 60:.1f} of {budget_s / 60:.1f} min used")
        return status


def _history(root: Path, stage: str, line: str) -> None:
    with open(root / "history.jsonl", "a") as f:
        f.write(json.dumps({"stage": stage, "line": line, "utc": time.strftime("%Y-%m-%d %H:%M:%S",
                                                                                time.gmtime())}) + "\n")


def expected_part_seconds(root: Path) -> float:
    """The mean seconds of an evaluation part on this chain so far (0 when none is known): an evaluation starts only
    when one part (and the model's load) still fits, since the ladder always runs its first part."""
    secs = []
    for d in (root / "cells").glob("*") if (root / "cells").is_dir() else []:
        if (d / "cell.json").is_file():
            secs += json.loads((d / "cell.json").read_text()).get("part_seconds", [])
        else:
            secs += [json.loads(p.read_text())["seconds"]["total"] for p in d.glob("part_*.json")]
    return sum(secs) / len(secs) if secs else 0.0


def run_stage(root: Path, plan: Plan, st: Stage, deadline: float, suites) -> tuple[str, bool, bool]:
    """(the stage's line, whether the chain stops here, whether it failed)."""
    if chain.is_done(root, st.name):
        return "finished earlier", False, False
    if st.kind == "eval" and _cells_complete(root, plan, st):
        chain.write_stamp(root, st.name, {"seconds": 0, "cells": "restored"})
        return "finished (its cells were complete already)", False, False
    if st.kind == "eval" and suites is not None and _cells_complete(root, plan, st, suites):
        return f"suites {','.join(suites)} finished earlier", False, False
    waits = [n for n in st.needs if not chain.is_done(root, n)]
    if waits:
        return f"waits for {', '.join(waits)}", False, False
    left = deadline - time.monotonic()
    need = max(st.min_seconds, 1.0)
    if st.kind == "eval" and st.min_seconds:
        need = max(need, 90.0 + expected_part_seconds(root))
    if left < need:
        return f"not started: {left / 60:.1f} min left, it needs {need / 60:.1f} to be worth starting", True, False
    cmd = plan.command(st, REPO, (left - 20.0) / 60.0, suites if st.kind == "eval" else None)
    logfile = root / "logs" / f"{st.name}.log"
    rc, secs = launch(cmd, root, logfile, left)
    took = f"{secs / 60:.1f} min"
    if rc is None:
        return f"stopped at the budget after {took}{_how_far(root, plan, st)}", True, False
    if rc != 0:
        return f"failed (exit {rc}) after {took}; {logfile}:\n    {_log_tail(logfile)}", True, True
    if st.kind == "eval" and not _cells_complete(root, plan, st):
        part = suites is not None and set(suites) != set(plan.evals.suites)
        if part and _cells_complete(root, plan, st, suites):
            return f"suites {','.join(suites)} done in {took}{_how_far(root, plan, st)}", False, False
        return f"stopped between parts at the budget after {took}{_how_far(root, plan, st)}", True, False
    chain.write_stamp(root, st.name, {"seconds": round(secs, 1)})
    return f"finished in {took}{_how_far(root, plan, st)}", False, False


def _cells_complete(root: Path, plan: Plan, st: Stage, suites=None) -> bool:
    return all((d / "cell.json").is_file() for d in plan.cell_dirs(st, root, suites))


# ---- report / publish sources -----------------------------------------------------------------------
def _source_root(args) -> tuple[Path, object]:
    """(a root to read, a TemporaryDirectory to keep alive or None): --root as is, --from restored into a temp root."""
    if args.root:
        return Path(args.root), None
    import tempfile
    tmp = tempfile.TemporaryDirectory(prefix="method_report_")
    chain.restore(Path(tmp.name), [Path(p) for p in args.source], echo=lambda m: None)
    return Path(tmp.name), tmp


def _plan_of(root: Path) -> Plan:
    path = root / "plan.json"
    if not path.is_file():
        raise PlanError(f"{root} holds no chain (no plan.json); run `method.py run` there or restore a pack")
    meta = json.loads(path.read_text())
    return Plan.of(meta["model"], meta["size"])


def publish(root: Path, out: Path, max_bytes: int = 20_000_000) -> list[Path]:
    """out/<policy>/: each finished policy's adapter in PEFT format on the base model (an RL adapter combined with
    the SFT adapter under it, so BASE+out/<policy> is the whole policy), and out/README.md with the commands."""
    from cudaperf_jax import assets
    from cudaperf_jax.models.peft_io import combine_peft_dirs
    plan = _plan_of(root)
    base_id = assets.hf_id(plan.model) if assets.is_model_name(plan.model) else None
    sft = root / "runs" / f"sft-{plan.tag}" / "adapter"
    written = []
    for policy in plan.policies():
        if policy == "ranker" or not chain.is_done(root, policy):
            continue
        dirs = [sft] if policy == f"sft-{plan.tag}" else [sft, root / "runs" / policy / "adapter"]
        dest = combine_peft_dirs(dirs, out / policy, base_model_name_or_path=base_id)
        size = sum(f.stat().st_size for f in dest.iterdir())
        if size > max_bytes:
            raise chain.ChainError(f"{dest} is {size / 1e6:.1f} MB, over the {max_bytes / 1e6:.0f} MB the repository "
                                   "holds per adapter; publish it in bfloat16 or with a lower rank")
        written.append(dest)
        log(f"[method] publish: {dest} ({size / 1e6:.2f} MB)")
    from experiments.method_report import adapters_readme
    (out / "README.md").write_text(adapters_readme(root, plan, written))
    return written


# ---- command line ---------------------------------------------------------------------------------------
def parse(argv=None) -> argparse.Namespace:
    fmt = argparse.RawDescriptionHelpFormatter
    ap = argparse.ArgumentParser(prog="experiments/method.py", description=__doc__, formatter_class=fmt)
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="{run,pack,restore,collect,report,publish}")
    stages = ", ".join(ORDER)
    r = sub.add_parser("run", help="run the next unfinished stages until the budget",
                       description=f"Runs the next unfinished stages in order ({stages}) until the budget; each "
                       "resumes where the last run of it stopped. One line per stage says what it did.")
    r.add_argument("--root", required=True, help="the chain's directory on this machine (created if missing)")
    r.add_argument("--budget_minutes", type=float, required=True,
                   help="stop every stage after this many minutes (a device call: 8 of its 10)")
    r.add_argument("--stages", default="", help=f"comma-separated, of {stages} (default: all, in order)")
    r.add_argument("--model", default="qwen2.5-coder-1.5b", help="the policy model: a registered name (in the "
                   "model cache: python -m cudaperf_jax.assets fetch NAME) or a path (default: %(default)s)")
    r.add_argument("--size", default="full", choices=["full", "dev"],
                   help="full: the experiment; dev: a CPU smoke run of every stage in minutes (default: %(default)s)")
    r.add_argument("--suites", default="", help="evaluate only these suites now, of kernelbench,test,val "
                   "(default: all)")
    p = sub.add_parser("pack", help="write what must come back from this machine (at most 8 files, 64 MB)")
    p.add_argument("--root", required=True, help="the chain's directory")
    p.add_argument("--out", required=True, help="where to write the files (on a device machine: $OUT)")
    s = sub.add_parser("restore", help="seed a root from packed files, the chain directory or a ladder's cells.tgz")
    s.add_argument("--root", required=True, help="the chain's directory (created if missing)")
    s.add_argument("--from", dest="source", nargs="+", required=True,
                   help="packed files or directories of them (e.g. benchmarks/results/method_chain)")
    c = sub.add_parser("collect", help="put a pack into the chain directory of the repository")
    c.add_argument("--from", dest="source", required=True, help="the directory of files `pack` wrote")
    c.add_argument("--chain", default=str(CHAIN_DIR), help="the chain directory (default: this repository's "
                   "benchmarks/results/method_chain)")
    for name in ("report", "publish"):
        q = sub.add_parser(name, help="the results table and plots" if name == "report" else
                           "the finished adapters in PEFT format, each under 20 MB")
        src = q.add_mutually_exclusive_group(required=True)
        src.add_argument("--root", help="a chain's directory")
        src.add_argument("--from", dest="source", nargs="+", help="packed files or directories of them (the chain "
                         "directory and any later packs)")
        q.add_argument("--out", required=True, help="results.json, summary.md and plots" if name == "report" else
                       "one PEFT directory per policy, and README.md with the commands that load them")
    return ap.parse_args(argv)


def _model_arg(model: str) -> str:
    from cudaperf_jax import assets
    if assets.is_model_name(model):
        return model
    p = Path(model).expanduser()
    if not p.exists():
        raise PlanError(f"no model at {model}; pass a registered name ({', '.join(assets.names())}) or a path")
    return str(p.resolve())


def main(argv=None) -> int:
    a = parse(argv)
    try:
        if a.cmd == "run":
            plan = Plan.of(_model_arg(a.model), a.size)
            names = [x for x in a.stages.split(",") if x]
            suites = tuple(x for x in a.suites.split(",") if x) or None
            bad = [x for x in suites or () if x not in plan.evals.suites]
            if bad:
                raise PlanError(f"--suites {','.join(bad)}: choose among {','.join(plan.evals.suites)}")
            return run(Path(a.root), plan, names, 60.0 * a.budget_minutes, suites)
        if a.cmd == "pack":
            chain.pack(Path(a.root), Path(a.out), echo=log)
        elif a.cmd == "restore":
            chain.restore(Path(a.root), [Path(x) for x in a.source], echo=log)
        elif a.cmd == "collect":
            chain.collect(Path(a.source), Path(a.chain), echo=log)
        else:
            root, keep = _source_root(a)
            try:
                if a.cmd == "report":
                    from experiments.method_report import report
                    report(root, _plan_of(root), Path(a.out), echo=log)
                else:
                    publish(root, Path(a.out))
            finally:
                if keep is not None:
                    keep.cleanup()
    except (PlanError, chain.ChainError, OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
