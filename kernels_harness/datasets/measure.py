"""Measures every implementation of a stratified sample of tasks on every config, on an NVIDIA GPU.

    python -m kernels_harness.datasets.measure --out $OUT --max_seconds 240          # tasks from the generator
    python -m kernels_harness.datasets.measure --tasks data/tasks --out $OUT          # tasks of a built dataset

Time-bounded and resumable: tasks are taken round-robin over families (a stratified sample first),
many implementations are built into ONE shared library per nvcc call (entries renamed, kernels put in
a namespace per implementation), libraries are compiled in parallel while earlier ones are timed, and
every measured task is appended to $OUT/results.jsonl at once (a re-run with the same $OUT skips them).
Timing: CUDA events around each call, L2 flushed before each repetition, median and IQR over an
adaptive number of repetitions. Each implementation's outputs are compared with the baseline's on the
same inputs (agreement). At the end: a tensorstore zarr store ($OUT/times), provenance.json, a speedup
plot, and a short table (printed last). Needs CuPy and nvcc; one failure never stops the rest.
"""
from __future__ import annotations

import argparse
import ctypes
import datetime as _dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from kernels_harness.datasets.gpu_timing import (
    FLUSH_MB,
    MAX_REPS,
    MIN_REPS,
    TARGET_MS,
    Timer,
    measure_task,
)
from kernels_harness.datasets.times import iter_results
from kernels_harness.tasks.schema import Task

BATCH_IMPLS = 24


# ---- task selection --------------------------------------------------------------------------------
def stratified(tasks_by_family: dict[str, list[Task]], seed: int = 0) -> list[Task]:
    """Round-robin over families of a seeded shuffle of each: the first k*F tasks hold k per family."""
    rng = np.random.default_rng(seed)
    queues = {f: [ts[i] for i in rng.permutation(len(ts))] for f, ts in sorted(tasks_by_family.items())}
    out, k = [], 0
    while any(k < len(q) for q in queues.values()):
        for q in queues.values():
            if k < len(q):
                out.append(q[k])
        k += 1
    return out


def load_tasks(source: str, seed: int) -> dict[str, list[Task]]:
    by_fam: dict[str, list[Task]] = {}
    if source == "generate":
        from kernels_harness.datasets import registry
        for fam in registry.FAMILIES:
            by_fam[fam.name] = [registry.build(fam.name, p) for p in registry.variants(fam.name, seed)]
    else:
        from kernels_harness.datasets import shards
        for t in shards.load(source):
            by_fam.setdefault(t.family or "unknown", []).append(t)
    return by_fam


def measured_tasks(results_path: Path) -> set[str]:
    """Task ids with a finished record in results.jsonl; a task whose last record is `incomplete` (cut by
    the deadline) is measured again by a resumed run."""
    done: set[str] = set()
    for r in iter_results(results_path):
        (done.discard if r.get("incomplete") else done.add)(r["task"])
    return done


# ---- building several implementations into one library (kernels_harness.build.batch) --------------
def symbol(ti: int, ii: int) -> str:
    return f"cp_t{ti}_i{ii}"


def _members(items) -> list:
    from kernels_harness.build.batch import Member
    return [Member(impl.source, task.entry, symbol(ti, ii), f"ns_t{ti}_i{ii}") for ti, ii, task, impl in items]


def combined_source(items: list[tuple[int, int, Task, object]]) -> str:
    """One translation unit: every (task index, impl index, task, impl) in its own namespace, entry renamed."""
    from kernels_harness.build.batch import combine
    return combine(_members(items))


def compile_batch(items, workdir: Path, tag: str, arch: str) -> dict:
    """{(ti, ii): (library path or None, symbol, log)}; members a batch could not take are built alone
    (kernels_harness.build.batch.build: a broken implementation never sinks its batch)."""
    from kernels_harness.build import batch, nvcc
    ms = _members(items)
    ok = [k for k, m in enumerate(ms) if not batch.unbatchable(m.source, m.entry)]

    def compile_text(text, path):
        r = nvcc.build_shared(text, path, arch=arch, timeout_s=300, trim=False)
        return batch.Compiled(r.ok, r.log, timed_out=not r.ok and "nvcc timed out" in r.log)
    built, alone = batch.build([ms[k] for k in ok], workdir / f"{tag}.so", compile_text)
    out = {(items[ok[j]][0], items[ok[j]][1]): (rec["path"], rec["symbol"], "") for j, rec in built.items()}
    for k in sorted({ok[j] for j in alone} | (set(range(len(ms))) - set(ok))):
        ti, ii, task, impl = items[k]
        res = nvcc.build_shared(impl.source, workdir / f"{tag}_{k}.so", arch=arch, timeout_s=300)
        out[(ti, ii)] = (str(res.path), task.entry, "") if res.ok else (None, symbol(ti, ii), res.log[-2000:])
    return out


# ---- outputs -------------------------------------------------------------------------------------
def provenance(cp, argv: list[str], started: str, extra: dict) -> dict:
    info = {"command": " ".join(["python -m kernels_harness.datasets.measure"] + argv), "started_utc": started,
            "finished_utc": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            "host": platform.node(), "python": platform.python_version()}
    try:
        props = cp.cuda.runtime.getDeviceProperties(0)
        info["gpu"] = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
        info["sm"] = f"{props['major']}{props['minor']}"
        info["driver_version"] = cp.cuda.runtime.driverGetVersion()
        info["cuda_runtime_version"] = cp.cuda.runtime.runtimeGetVersion()
        info["cupy"] = cp.__version__
    except Exception as e:  # noqa: BLE001
        info["gpu_error"] = str(e)
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm,memory.total",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=20, check=False)
        info["nvidia_smi"] = smi.stdout.strip()
    except Exception:  # noqa: BLE001, S110
        pass
    try:
        from kernels_harness.build import nvcc
        v = subprocess.run([str(nvcc.find_nvcc()), "--version"], capture_output=True, text=True, timeout=30, check=False)
        info["nvcc"] = v.stdout.strip().splitlines()[-1]
    except Exception:  # noqa: BLE001, S110
        pass
    info.update(extra)
    return info


def worker(results_path: str, target_ms: float = TARGET_MS, max_reps: int = MAX_REPS) -> int:
    """Child process: reads one job (JSON) per stdin line, measures its tasks, appends to results_path,
    answers DONE. A sticky CUDA error ends the process (the parent starts a fresh one)."""
    import cupy as cp
    timer = Timer(cp, target_ms=target_ms, max_reps=max_reps)
    libs: dict = {}
    for line in sys.stdin:
        job = json.loads(line)
        with open(results_path, "a") as fout:
            for item in job["tasks"]:
                task = Task.from_dict(item["task"])
                ti = item["ti"]
                fns = {}
                for ii, (path, sym, log) in item["fns"].items():
                    if path is None:
                        fns[(ti, int(ii))] = (None, log)
                        continue
                    if path not in libs:
                        libs[path] = ctypes.CDLL(path)
                    fns[(ti, int(ii))] = (getattr(libs[path], sym), "")
                t_task = time.time()
                try:
                    rec = measure_task(cp, timer, ti, task, fns, job["seed"] + ti, job["deadline"])
                    rec["wall_s"] = round(time.time() - t_task, 3)
                except Exception as e:  # noqa: BLE001
                    rec = {"task": task.id, "family": task.family, "fatal": True,
                           "errors": [f"{type(e).__name__}: {e}", traceback.format_exc()[-500:]]}
                fout.write(json.dumps(rec) + "\n")
                fout.flush()
                print(f"TASK {task.id}", flush=True)
                if rec.get("fatal"):
                    return 3
        print("DONE", flush=True)
    return 0


class WorkerProcess:
    """A measuring child process (`--worker`): jobs go in on stdin, TASK/DONE lines come back."""

    def __init__(self, results_path: Path, target_ms: float = TARGET_MS, max_reps: int = MAX_REPS):
        import subprocess as sp
        self.proc = sp.Popen([sys.executable, "-m", "kernels_harness.datasets.measure", "--worker", str(results_path),
                              str(target_ms), str(max_reps)],
                             stdin=sp.PIPE, stdout=sp.PIPE)
        self._buf = b""

    def run(self, job: dict, timeout: float) -> tuple[bool, list[str]]:
        """Sends a job; (finished, task ids reported). False when the worker died or timed out (then killed)."""
        import selectors
        seen: list[str] = []
        try:
            self.proc.stdin.write((json.dumps(job) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return False, seen
        fd = self.proc.stdout.fileno()
        sel = selectors.DefaultSelector()
        sel.register(fd, selectors.EVENT_READ)
        end = time.time() + timeout
        try:
            while time.time() < end:
                if not sel.select(timeout=max(0.1, min(5.0, end - time.time()))):
                    continue
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    return False, seen
                self._buf += chunk
                while b"\n" in self._buf:
                    line, self._buf = self._buf.split(b"\n", 1)
                    text = line.decode(errors="replace").strip()
                    if text.startswith("TASK "):
                        seen.append(text[5:])
                    elif text == "DONE":
                        return True, seen
        finally:
            sel.close()
        self.kill()
        return False, seen

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.alive():
            self.proc.kill()
            self.proc.wait()

    def close(self) -> None:
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=20)
        except Exception:  # noqa: BLE001
            self.kill()


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--worker"]:
        return worker(argv[1], float(argv[2]), int(argv[3]))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", default="generate", help="dataset directory, or 'generate' (default: the generator)")
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    ap.add_argument("--max_seconds", type=float, default=240.0, help="wall-clock budget of the whole run")
    ap.add_argument("--max_tasks", type=int, default=100000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch", type=int, default=BATCH_IMPLS, help="implementations per shared library")
    ap.add_argument("--jobs", type=int, default=min(16, os.cpu_count() or 4), help="parallel nvcc processes")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--target_ms", type=float, default=TARGET_MS,
                    help="time repetitions of one (implementation, config) until they sum to this (at least 3)")
    ap.add_argument("--max_reps", type=int, default=MAX_REPS, help="at most this many timed repetitions")
    ap.add_argument("--families", default="", help="comma-separated families (default all)")
    ap.add_argument("--plan_only", action="store_true",
                    help="print the task order and library batches as JSON, build the first batch, measure nothing "
                         "(runs without a GPU)")
    args = ap.parse_args(argv)
    t_start = time.time()
    deadline = t_start + args.max_seconds
    started = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if not args.plan_only:
        try:
            import cupy as cp
        except ImportError:
            print("error: measuring needs CuPy and an NVIDIA GPU (pip install cupy-cuda13x)", file=sys.stderr)
            return 2
    by_fam = load_tasks(args.tasks, args.seed)
    if args.families:
        keep = set(args.families.split(","))
        by_fam = {k: v for k, v in by_fam.items() if k in keep}
    order = stratified(by_fam, args.seed)[:args.max_tasks]
    results_path = out / "results.jsonl"
    done = measured_tasks(results_path)
    order = [t for t in order if t.id not in done]
    print(f"measure: {len(order)} tasks to go ({len(done)} already measured), budget {args.max_seconds:.0f} s",
          flush=True)
    batches, cur = [], []
    for ti, task in enumerate(order):
        cur.append(ti)
        if sum(len(order[k].implementations) for k in cur) >= args.batch:
            batches.append(cur)
            cur = []
    if cur:
        batches.append(cur)
    workdir = Path(tempfile.mkdtemp(prefix="cudaperf_measure_"))
    build_stats = {"libraries": 0, "implementations": 0, "compile_seconds": 0.0, "failed_implementations": 0,
                   "worker_restarts": 0}

    def build(bi: int):
        t0 = time.time()
        items = [(ti, ii, order[ti], impl) for ti in batches[bi] for ii, impl in enumerate(order[ti].implementations)]
        try:
            fns = compile_batch(items, workdir, f"batch{bi}", args.arch)
        except Exception as e:  # noqa: BLE001
            fns = {(ti, ii): (None, "", f"{type(e).__name__}: {e}") for ti, ii, _, _ in items}
        return fns, time.time() - t0, len(items)

    if args.plan_only:
        fns, secs, n = build(0) if batches else ({}, 0.0, 0)
        plan = {"tasks": len(order), "batches": len(batches),
                "implementations": sum(len(t.implementations) for t in order),
                "families_first": [t.family for t in order[:len(by_fam)]],
                "first_batch": {"implementations": n, "built": sum(1 for f in fns.values() if f[0]),
                                "seconds": round(secs, 1)}}
        print(json.dumps(plan, indent=1))
        return 0
    ex = ThreadPoolExecutor(max_workers=max(1, args.jobs))
    futures = [ex.submit(build, bi) for bi in range(len(batches))]
    measured, wk = 0, None
    for bi, fut in enumerate(futures):
        if time.time() > deadline:
            break
        try:
            fns, secs, n = fut.result(timeout=max(1.0, deadline - time.time()))
        except Exception as e:  # noqa: BLE001
            print(f"batch {bi}: build did not finish ({type(e).__name__})", flush=True)
            continue
        build_stats["libraries"] += 1
        build_stats["implementations"] += n
        build_stats["compile_seconds"] += secs
        build_stats["failed_implementations"] += sum(1 for f in fns.values() if f[0] is None)
        remaining = list(batches[bi])
        while remaining and time.time() < deadline:
            job = {"seed": args.seed, "deadline": deadline, "tasks": [
                {"ti": ti, "task": order[ti].to_dict(),
                 "fns": {str(ii): list(fns[(ti, ii)]) for ii in range(len(order[ti].implementations))}}
                for ti in remaining]}
            if wk is None or not wk.alive():
                if wk is not None:
                    build_stats["worker_restarts"] += 1
                wk = WorkerProcess(results_path, args.target_ms, args.max_reps)
            finished, seen = wk.run(job, timeout=max(5.0, deadline - time.time() + 60))
            measured += len(seen)
            remaining = [ti for ti in remaining if order[ti].id not in set(seen)]
            if finished:
                break
            try:
                rc = wk.proc.wait(timeout=5)
            except Exception:  # noqa: BLE001 - still running after a timeout: killed below
                rc = None
            fatal_reported = rc == 3  # the worker recorded the fatal task itself
            wk.kill()
            if remaining and not fatal_reported:  # the task that was running crashed or hung: record, skip it
                culprit = remaining.pop(0)
                with results_path.open("a") as fout:
                    fout.write(json.dumps({"task": order[culprit].id, "family": order[culprit].family, "fatal": True,
                                           "errors": ["the measuring process died or hung on this task"]}) + "\n")
            print(f"batch {bi}: measuring process stopped; restarting it for {len(remaining)} tasks", flush=True)
        print(f"[{time.time() - t_start:6.0f} s] batch {bi + 1}/{len(batches)}: {measured} tasks measured", flush=True)
    if wk is not None:
        wk.close()
    ex.shutdown(wait=False, cancel_futures=True)
    from kernels_harness.datasets import times as times_lib
    records = times_lib.read_results(results_path)
    prov = provenance(cp, argv, started, {"build": build_stats, "tasks_measured_this_run": measured,
                                          "seconds": round(time.time() - t_start, 1),
                                          "implementations_per_library": args.batch, "nvcc_jobs": args.jobs,
                                          "timing": {"target_ms": args.target_ms, "max_reps": args.max_reps,
                                                     "min_reps": MIN_REPS, "l2_flush_mb": FLUSH_MB}})
    (out / "provenance.json").write_text(json.dumps(prov, indent=1))
    try:
        times_lib.write_store(records, out / "times", prov)
    except Exception as e:  # noqa: BLE001
        print(f"could not write the tensorstore zarr ({type(e).__name__}: {e}); results.jsonl holds everything")
    try:
        times_lib.plot_speedups(records, out / "speedups.png")
    except Exception as e:  # noqa: BLE001
        print(f"no plot ({type(e).__name__}: {e})")
    print(times_lib.table(records, prov))
    return 0


if __name__ == "__main__":
    sys.exit(main())
