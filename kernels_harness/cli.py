"""The command line: `python -m kernels_harness eval|reference ...`.

  eval --task T.json --solution S.cu [--backend cpu|cuda|auto] [--json]
      Evaluates one solution; prints the EvalResult (with --json: exactly one JSON object on stdout,
      logs on stderr). Exit 0 whatever the verdict; 2 with a one-line reason for a bad task file,
      a missing solution or bad arguments.
  reference --task T.json [--backend ...] [--json]
      Evaluates the task's own implementations and reports each verdict against its label
      (`expected: wrong` ones must come out not-ok). Exit 0 when every label holds, 1 otherwise.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from kernels_harness.tasks.errors import TaskError


class UsageError(Exception):
    """Bad arguments or inputs: printed as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(f"{message} (see `python -m kernels_harness {self.prog.split()[-1]} --help`)")


def _parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="kernels_harness", description="Compile, check and time CUDA solutions of tasks.")
    sub = ap.add_subparsers(dest="command", parser_class=_Parser)
    for name, help_ in (("eval", "evaluate one solution"), ("reference", "evaluate the task's own implementations")):
        p = sub.add_parser(name, help=help_)
        p.add_argument("--task", required=True, help="task file (JSON, version 1)")
        if name == "eval":
            p.add_argument("--solution", required=True, help="CUDA C++ source file of the solution")
        p.add_argument("--backend", default="auto", choices=("cpu", "cuda", "auto"))
        p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
        p.add_argument("--trials", type=int, default=2, help="trials per config (>= 2)")
        p.add_argument("--timeout", type=float, default=20.0, help="seconds one call may take")
        p.add_argument("--cpu-budget-mb", type=float, default=8.0,
                       help="cpu backend: skip configs with more MiB of arrays than this")
        p.add_argument("--cpu-budget-gflops", type=float, default=1.0,
                       help="cpu backend: skip configs whose task needs more GFLOPs than this")
        p.add_argument("--no-checks", action="store_true", help="skip the static reward-hack checks")
        p.add_argument("--allow", action="append", default=[],
                       help="allow a hack rule or a name (repeatable), e.g. --allow timing --allow clock64")
        p.add_argument("--seed", type=int, default=None, help="reproduce a recorded seed (default: unpredictable)")
    return ap


def _clean(x):
    """JSON-safe: non-finite floats become null."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    return x


def format_result(res, label: str = "") -> str:
    """Human-readable EvalResult."""
    head = f"{res.task_id}{' / ' + label if label else ''} [{res.backend}]: {res.status}"
    if res.speedup:
        head += f", speedup {res.speedup:.2f}x"
    lines = [head]
    if res.status == "unchecked":
        lines.append(f"  {res.error}")
    for c in res.configs:
        cfg = ", ".join(f"{k}={v}" for k, v in c.config.items() if k != "name")
        if c.skipped:
            lines.append(f"  config {c.index} ({cfg}): {c.skip_reason}")
            continue
        verdict = "correct" if c.correct else "FAILED"
        err = f", max abs err {c.max_abs_err:.3g}" if c.max_abs_err is not None else ""
        t = f", {c.time_ms:.4g} ms (IQR {c.time_iqr_ms:.2g}, {c.reps} reps)" if c.time_ms else ""
        b = f", baseline {c.baseline_ms:.4g} ms" if c.baseline_ms else ""
        lines.append(f"  config {c.index} ({cfg}): {verdict}{err}{t}{b}")
    for v in res.violations[:5]:
        lines.append(f"  violation: {v['rule']} ({v['name']}) at line {v['line']}: {v['text']}")
    lines.append("  seed: " + str(res.seed))
    lines.append("  feedback: " + res.feedback.replace("\n", "\n            "))
    return "\n".join(lines)


def _pool(args):
    from kernels_harness import hacks
    from kernels_harness.run import HarnessPool
    rules = hacks.Rules(disabled=frozenset(a for a in args.allow if a in hacks.RULES),
                        allow=frozenset(a for a in args.allow if a not in hacks.RULES))
    return HarnessPool(backend=args.backend, workers=1, trials=args.trials, call_timeout_s=args.timeout,
                       cpu_budget_bytes=int(args.cpu_budget_mb * 2**20), cpu_budget_flops=args.cpu_budget_gflops * 1e9,
                       rules=rules, checks=not args.no_checks,
                       progress=not args.json and sys.stderr.isatty(), seed=args.seed)


def _eval(args) -> int:
    from kernels_harness.tasks.schema import load_task
    task = load_task(args.task)
    sol = Path(args.solution)
    if sol.is_dir():
        raise UsageError(f"{str(sol)!r} is a directory; --solution needs one .cu file")
    if not sol.is_file():
        raise UsageError(f"solution file {str(sol)!r} does not exist")
    try:
        source = sol.read_text()
    except UnicodeDecodeError:
        raise UsageError(f"solution file {str(sol)!r} is not UTF-8 text") from None
    with _pool(args) as pool:
        res = pool.evaluate([(task, source)])[0]
    if args.json:
        print(json.dumps(_clean(res.to_dict())))
    else:
        print(format_result(res))
    return 0


def _reference(args) -> int:
    from kernels_harness.tasks.schema import load_task
    task = load_task(args.task)
    if not task.implementations:
        raise UsageError(f"task {task.id!r} has no implementations to run")
    with _pool(args) as pool:
        results = pool.evaluate([(task, impl.source) for impl in task.implementations])
    rows, all_hold = [], True
    for impl, res in zip(task.implementations, results):
        # `unchecked` (no config fits the backend) establishes nothing: it neither holds nor breaks a label
        holds = None if res.status == "unchecked" else (res.status == "ok") == (impl.expected == "correct")
        all_hold &= holds is not False
        rows.append({"name": impl.name, "expected": impl.expected, "status": res.status, "label_holds": holds,
                     "result": res.to_dict()})
    if args.json:
        print(json.dumps(_clean({"status": "ok" if all_hold else "mismatch", "task_id": task.id,
                                 "implementations": rows})))
    else:
        for impl, res, row in zip(task.implementations, results, rows):
            print(format_result(res, impl.name))
            verdict = {True: "holds", False: "DOES NOT HOLD", None: "not established (unchecked)"}[row["label_holds"]]
            print(f"  expected {impl.expected}: {verdict}")
    return 0 if all_hold else 1


def main(argv=None) -> int:
    from kernels_harness.run.pool import HarnessSetupError
    try:
        args = _parser().parse_args(argv)
        if args.command is None:
            raise UsageError("give a command: eval or reference (see `python -m kernels_harness --help`)")
        if args.trials < 2:
            raise UsageError("--trials must be at least 2")
        return _eval(args) if args.command == "eval" else _reference(args)
    except (UsageError, TaskError, HarnessSetupError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
