"""PyTorch eager and torch.compile times of every KernelBench problem on one GPU, into the time store.

    python -m kernels_harness.datasets.kernelbench_times --tasks data/kernelbench/tasks --out /tmp/kb \\
        --resume_from benchmarks/results/kernelbench_times_h200_partial --max_seconds 480 \\
        --archive $OUT/kernelbench_times.tgz

Each problem (a task JSON of --tasks, or imported from the KernelBench-layout --suite) is timed on
every config eagerly and, on the configs chosen by --compile_configs (default: the largest, the file's
own sizes that KernelBench reports), after torch.compile, with the harness's timing protocol (see
kernels_harness.datasets.kernelbench_measure). --workers processes share the one GPU: they compile in
parallel on the CPU cores while the timed regions take turns under an exclusive lock, and device memory
is reserved in a ledger; a task that runs out of device memory while sharing is measured again at the
end with the GPU to itself. Problems are handed out in order from a queue; each finished one is
appended to $out/results.jsonl at once, so a re-run resumes, and --resume_from seeds the run with the
records of earlier runs (their results*.jsonl and provenance.json), which are not measured again. At
--max_seconds the workers are stopped (an unfinished problem is left for the next run), and the store
($out/times: implementations `torch_eager`, the baseline, and `torch_compile`) and provenance.json are
written; without tensorstore on the GPU machine, `--write_only --out DIR` writes the store later.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import re
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from kernels_harness.datasets import times as times_lib
from kernels_harness.datasets.kernelbench_report import (
    plot_compile_speedups,
    recheck,
    summary_table,
)
from kernels_harness.run.gpu_share import MemoryLedger, WorkQueue, append_jsonl

RESULTS = "results.jsonl"
RECHECK = "recheck:"    # queue ids of seeded tasks timed again, into recheck.jsonl (not the store)
MAX_RESTARTS = 8        # worker processes restarted after a crash (a sticky CUDA error ends one)


def _tasks(args) -> dict:
    from kernels_harness.tasks.schema import load_task
    if args.tasks:
        tasks = [load_task(p) for p in sorted(Path(args.tasks).glob("*.json"))]
    else:
        from kernels_harness.tasks import kernelbench as kb
        tasks = kb.import_dir(args.suite, skip_errors=True)
    return {t.id: t for t in tasks}


def _order(tasks: dict) -> list[str]:
    """Level, then problem number: the cheap level-1 operators first."""
    def key(tid):
        m = re.match(r"level(\d+)_(\d+)_", tid)
        return (int(m.group(1)), int(m.group(2)), tid) if m else (99, 0, tid)
    return sorted(tasks, key=key)


def result_files(out: Path) -> list[Path]:
    return sorted(out.glob("results*.jsonl"))


def finished(out: Path) -> set[str]:
    """Tasks with a measured record (a fatal stub of a crashed worker is tried again by the next run)."""
    return {r["task"] for p in result_files(out) for r in times_lib.iter_results(p) if "time_ms" in r}


def seed(out: Path, sources: list[str], gpu: str = "") -> list[dict]:
    """Copies the records of earlier runs (files or directories of results*.jsonl) into out/results.jsonl
    (tasks already there are kept); returns the provenance.json of each source directory. A source whose
    provenance names another GPU than `gpu` (when both are known) is not copied: times of two GPUs never mix."""
    have = finished(out)
    earlier = []
    for src in filter(None, sources):
        p = Path(src)
        files = result_files(p) if p.is_dir() else [p]
        prov = (p if p.is_dir() else p.parent) / "provenance.json"
        entry = json.loads(prov.read_text()) if prov.is_file() else {}
        if gpu and entry.get("gpu") and entry["gpu"] != gpu:
            print(f"NOT seeding from {src}: measured on {entry['gpu']}, this is {gpu}", flush=True)
            earlier.append({"source": str(src), "records_seeded": 0, "skipped": f"other GPU ({entry['gpu']})"})
            continue
        n = 0
        for f in files:
            for r in times_lib.iter_results(f):
                if r["task"] not in have and "time_ms" in r:
                    append_jsonl(out / RESULTS, dict(r, seeded_from=r.get("seeded_from") or str(src)))
                    have.add(r["task"])
                    n += 1
        earlier.append({"source": str(src), "records_seeded": n, "provenance": entry})
        print(f"seeded {n} records from {src}", flush=True)
    return earlier


def gpu_name() -> str:
    """The first GPU's name as nvidia-smi gives it ("" without one); no CUDA context is made."""
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30, check=False)
        return smi.stdout.strip().splitlines()[0].strip() if smi.returncode == 0 and smi.stdout.strip() else ""
    except (OSError, subprocess.SubprocessError):
        return ""


# ---- worker process ------------------------------------------------------------------------------------
def worker(args) -> int:
    from kernels_harness.datasets import kernelbench_measure as kbm
    out = Path(args.out)
    tasks = _tasks(args)
    queue = WorkQueue(out / ("queue.alone" if args.alone else "queue"))
    m = kbm.Measurer(args.device, str(out / "gpu.lock"), ledger=None if args.alone else _ledger(args, out),
                 timing={"budget_s": args.budget_s, "max_reps": args.max_reps, "min_reps": args.min_reps,
                         "warmup": args.warmup},
                 compile_which=args.compile_configs, max_config_bytes=args.max_config_gib * 2**30,
                 deadline=args.deadline, alone=args.alone)
    m.torch.set_num_threads(max(1, args.threads))
    tag = f"[worker {os.getpid()}{' alone' if args.alone else ''}]"
    parent = os.getppid()
    _die_with_parent()
    while time.time() < args.deadline and os.getppid() == parent and (tid := queue.claim()) is not None:
        t0 = time.time()
        again = tid.startswith(RECHECK)
        tid = tid.removeprefix(RECHECK)
        try:
            rec = m.measure_task(tasks[tid])
        except kbm.OutOfTime:
            print(f"{tag} {tid}: stopped at the deadline, left for the next run", flush=True)
            return 0
        except kbm.NeedsGpuAlone as e:
            append_jsonl(out / "alone.jsonl", {"task": tid, "why": str(e)})
            print(f"{tag} {tid}: out of device memory while sharing ({e}); measured alone at the end", flush=True)
            continue
        rec["wall_s"] = round(time.time() - t0, 2)
        rec["run"] = args.run
        append_jsonl(out / ("recheck.jsonl" if again else RESULTS), rec)
        print(f"{tag} {tid} {rec['wall_s']} s {'; '.join(rec['errors'])[:200]}", flush=True)
        if args.device == "cuda" and not _device_ok(m.torch):
            print(f"{tag} the CUDA context is broken (sticky error); a fresh worker takes over", flush=True)
            return 3
    return 0


def _ledger(args, out: Path) -> MemoryLedger:
    cap = args.gpu_mem_gib * 2**30
    if not cap and args.device == "cuda":
        import torch
        cap = 0.85 * torch.cuda.mem_get_info()[1] - args.workers * (1 << 30)
    return MemoryLedger(out / "memory.json", int(cap or 64 << 30))


def _device_ok(torch) -> bool:
    try:
        torch.cuda.synchronize()
        return True
    except Exception:  # noqa: BLE001
        return False


# ---- parent ----------------------------------------------------------------------------------------------
def _worker_cmd(args, alone: bool) -> list[str]:
    cmd = [sys.executable, "-m", "kernels_harness.datasets.kernelbench_times", "--worker",
           "--tasks", args.tasks, "--suite", args.suite, "--out", args.out, "--device", args.device,
           "--compile_configs", args.compile_configs, "--budget_s", str(args.budget_s),
           "--max_reps", str(args.max_reps), "--min_reps", str(args.min_reps), "--warmup", str(args.warmup),
           "--max_config_gib", str(args.max_config_gib), "--workers", str(args.workers),
           "--gpu_mem_gib", str(args.gpu_mem_gib), "--threads", str(args.threads),
           "--deadline", str(args.deadline), "--run", args.run]
    return cmd + (["--alone"] if alone else [])


def _worker_env(args) -> dict:
    env = dict(os.environ)
    env.setdefault("TORCHINDUCTOR_CACHE_DIR", args.inductor_cache)
    env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", str(max(1, args.threads)))
    env.setdefault("OMP_NUM_THREADS", str(max(1, args.threads)))
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _stop(procs) -> None:
    for p in procs:
        if p.poll() is None:
            p.terminate()
    t = time.time()
    for p in procs:
        try:
            p.wait(timeout=max(0.1, 5 - (time.time() - t)))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def _die_with_parent() -> None:
    """Linux: this worker gets SIGTERM when the parent process dies (no orphan keeps the GPU busy)."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def run_workers(args, queue: WorkQueue, n: int, alone: bool) -> dict:
    """Runs n worker processes over `queue` until it is empty or the deadline; restarts crashed ones."""
    out, env = Path(args.out), _worker_env(args)

    def start():
        return subprocess.Popen(_worker_cmd(args, alone), env=env)
    procs, restarts, stopped = [start() for _ in range(n)], 0, False
    while any(p.poll() is None for p in procs):
        if time.time() > args.deadline + 10:
            print("deadline: stopping the workers", flush=True)
            _stop(procs)
            stopped = True
            break
        time.sleep(0.5)
        for i, p in enumerate(procs):
            if p.returncode not in (None, 0) and not getattr(p, "handled", False):
                p.handled = True
                _crashed(out, queue, p)
                if restarts < MAX_RESTARTS and queue.remaining() and time.time() < args.deadline:
                    procs[i], restarts = start(), restarts + 1
    for p in procs:
        if not stopped and p.returncode not in (None, 0) and not getattr(p, "handled", False):
            _crashed(out, queue, p)
    return {"workers": n, "restarts": restarts, "stopped_at_deadline": stopped}


def _crashed(out: Path, queue: WorkQueue, p) -> None:
    """A fatal stub for the task a dead worker had claimed and not finished (not tried again in this run)."""
    done = {r["task"] for p in result_files(out) for r in times_lib.iter_results(p)}
    done |= {r["task"] for r in times_lib.iter_results(out / "alone.jsonl")}
    for tid in queue.claimed_by(p.pid):
        if tid not in done and p.returncode != 3 and not tid.startswith(RECHECK):
            append_jsonl(out / RESULTS, {"task": tid, "fatal": True,
                                         "errors": [f"the worker process died (exit code {p.returncode})"]})
            print(f"{tid}: the worker died (exit code {p.returncode}); recorded as fatal", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", default="data/kernelbench", help="a KernelBench-layout directory")
    ap.add_argument("--tasks", default="", help="a directory of imported task JSON files (instead of --suite)")
    ap.add_argument("--out", default=os.environ.get("OUT", "out"), help="work and result directory")
    ap.add_argument("--resume_from", action="append", default=[],
                    help="results*.jsonl file or directory of an earlier run (repeatable): not measured again")
    ap.add_argument("--max_seconds", type=float, default=480.0, help="wall-clock budget, writing included")
    ap.add_argument("--workers", type=int, default=8, help="worker processes sharing the GPU")
    ap.add_argument("--threads", type=int, default=1, help="CPU threads per worker (torch, inductor builds)")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"), help="cpu: a dry run of the pipeline")
    ap.add_argument("--compile_configs", default="largest", choices=("largest", "all", "none"))
    ap.add_argument("--budget_s", type=float, default=0.1, help="timing budget per config (Timer.measure)")
    ap.add_argument("--max_reps", type=int, default=100)
    ap.add_argument("--min_reps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--max_config_gib", type=float, default=float("inf"),
                    help="configs with more GiB of arrays are not measured (cpu dry runs)")
    ap.add_argument("--gpu_mem_gib", type=float, default=0.0, help="device memory to share (0: 85%% of the GPU)")
    ap.add_argument("--only", default="", help="regular expression: measure only matching task ids")
    ap.add_argument("--limit", type=int, default=0, help="measure at most this many new tasks (0: all)")
    ap.add_argument("--recheck", type=int, default=0,
                    help="time this many seeded tasks again (first, beside the others) and compare")
    ap.add_argument("--write_s", type=float, default=25.0, help="seconds kept back for the store and archive")
    ap.add_argument("--inductor_cache", default="/tmp/cudaperf_kb_inductor")
    ap.add_argument("--archive", default="", help="also pack results, provenance and store into this .tgz")
    ap.add_argument("--write_only", action="store_true", help="only write the store from out's results")
    ap.add_argument("--store", default="", help="where the store goes (default: out/times)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--alone", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--deadline", type=float, default=float("inf"), help=argparse.SUPPRESS)
    ap.add_argument("--run", default="", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.worker:
        return worker(args)
    argv = list(sys.argv[1:] if argv is None else argv)
    if args.write_only:
        prov = json.loads((out / "provenance.json").read_text()) if (out / "provenance.json").is_file() else {}
        write_store(out, prov, args.store)
        return 0
    t0 = time.time()
    started = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    args.run = started
    args.deadline = t0 + args.max_seconds - args.write_s
    earlier = seed(out, args.resume_from, gpu_name() if args.device == "cuda" else "")
    if (out / "provenance.json").is_file():  # an earlier run in this directory: its record is kept
        last = json.loads((out / "provenance.json").read_text())
        earlier = last.pop("earlier_runs", []) + [{"source": str(out), "provenance": last}] + earlier
    tasks = _tasks(args)
    if not args.tasks:  # the workers read the imported tasks instead of importing the suite again
        args.tasks = str(out / "tasks")
        Path(args.tasks).mkdir(exist_ok=True)
        for t in tasks.values():
            (Path(args.tasks) / f"{t.id}.json").write_text(json.dumps(t.to_dict()))
    done = finished(out)
    todo = [t for t in _order(tasks) if t not in done and re.search(args.only or "", t)]
    todo = todo[:args.limit] if args.limit else todo
    seeded = [r["task"] for r in times_lib.iter_results(out / RESULTS) if "seeded_from" in r and r["task"] in tasks]
    todo = [RECHECK + t for t in seeded[:args.recheck]] + todo
    print(f"{len(tasks)} problems, {len(done)} already recorded, {len(todo)} to measure with "
          f"{args.workers} workers (deadline in {args.deadline - t0:.0f} s)", flush=True)
    queue = WorkQueue(out / "queue", todo)
    phases = [run_workers(args, queue, max(1, min(args.workers, len(todo))), alone=False)] if todo else []
    alone = [r["task"] for r in times_lib.iter_results(out / "alone.jsonl")]
    alone = list(dict.fromkeys(t for t in alone if t not in finished(out)))
    if alone and time.time() < args.deadline:
        print(f"{len(alone)} problems measured again with the GPU to themselves: {', '.join(alone)}", flush=True)
        phases.append(run_workers(args, WorkQueue(out / "queue.alone", alone), 1, alone=True))
    protocol = {"workers": args.workers, "threads_per_worker": args.threads, "device": args.device,
                "compile_configs": args.compile_configs, "inputs": "drawn on the device (torch_values build_on_device)",
                "timing": {"budget_s": args.budget_s, "max_reps": args.max_reps, "min_reps": args.min_reps,
                           "warmup": args.warmup, "target_rel_iqr": 0.02},
                "sharing": "timed regions exclusive under the GPU lock; other device work shared; compiles "
                           "(CPU) in parallel", "phases": phases,
                "left_for_alone": [t for t in alone if t not in finished(out)]}
    protocol["recheck"] = recheck(out)
    protocol["fatal"] = sorted({r["task"] for p in result_files(out) for r in times_lib.iter_results(p)
                                if r.get("fatal")} - finished(out))
    prov = provenance(argv, started, time.time() - t0, protocol, earlier, args.device)
    prov["problems"] = write_store(out, prov, args.store)
    (out / "provenance.json").write_text(json.dumps(prov, indent=1))
    if args.archive:
        pack(out, Path(args.archive))
    return 0


def provenance(argv, started: str, seconds: float, protocol: dict, earlier: list, device: str) -> dict:
    from kernels_harness.datasets.measure import provenance as base
    cp = None
    if device == "cuda":
        try:
            import cupy as cp
        except ImportError:
            cp = None
    prov = base(cp, list(argv), started, {"what": "KernelBench levels 1-3: PyTorch eager and torch.compile "
                                          "of each problem's module, harness timing protocol",
                                          "seconds": round(seconds, 1)})
    prov["command"] = "python -m kernels_harness.datasets.kernelbench_times " + " ".join(argv)
    prov["protocol"] = protocol
    prov["earlier_runs"] = earlier
    try:
        import torch
        prov["torch"] = torch.__version__
    except ImportError:
        pass
    return prov


def write_store(out: Path, prov: dict, store: str = "") -> int:
    """Merges the results into the store (default out/times; needs tensorstore), writes summary.md and
    compile_speedup.png beside the results, prints a summary; returns the number of problems recorded."""
    store = Path(store) if store else out / "times"
    recs = {}
    for p in result_files(out):
        for r in times_lib.iter_results(p):
            if "time_ms" in r:
                recs[r["task"]] = r
    records = sorted(recs.values(), key=lambda r: r["task"])
    prov = dict(prov, problems=len(records))
    timed = sum(any(row[0] is not None for row in r["time_ms"]) for r in records)
    comp = sum(any(row[1] is not None for row in r["time_ms"]) for r in records)
    where = "no store written (no records)"
    if records:
        try:
            times_lib.write_store(records, store, prov)
            where = f"store {store}"
        except ImportError:
            where = (f"tensorstore is not installed here: write the store elsewhere with "
                     f"`python -m kernels_harness.datasets.kernelbench_times --write_only --out {out}`")
    print(f"kernelbench times: {len(records)} problems recorded, {timed} with eager times, {comp} with "
          f"torch.compile times; {where}", flush=True)
    if records:
        (out / "summary.md").write_text(summary_table(records, prov))
        try:
            plot_compile_speedups(records, out / "compile_speedup.png")
        except ImportError:
            pass
    return len(records)


def pack(out: Path, archive: Path) -> None:
    """results*.jsonl, alone.jsonl, provenance.json and times/ of out as one .tgz (for an 8-file $OUT)."""
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "w:gz") as tar:
        for p in [*result_files(out), out / "alone.jsonl", out / "recheck.jsonl", out / "summary.md",
                  out / "compile_speedup.png", out / "provenance.json", out / "times"]:
            if p.exists():
                tar.add(p, arcname=p.name)
    print(f"archive {archive} ({archive.stat().st_size / 2**20:.1f} MiB)", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
