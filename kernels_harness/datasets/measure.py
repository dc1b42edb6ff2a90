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
import re
import subprocess
import sys
import tempfile
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from kernels_harness.tasks.schema import Task, config_env

BATCH_IMPLS = 24
_INCLUDE = re.compile(r"^\s*#\s*include\s*<[^>]+>\s*$", re.MULTILINE)
HEADERS = ("cuda_runtime.h", "math.h", "stdint.h", "float.h", "limits.h")
_C_SCALAR = {"int32": ctypes.c_int, "int64": ctypes.c_longlong, "float32": ctypes.c_float,
             "float64": ctypes.c_double, "uint32": ctypes.c_uint, "int16": ctypes.c_short,
             "int8": ctypes.c_byte, "uint8": ctypes.c_ubyte, "uint64": ctypes.c_ulonglong, "bool": ctypes.c_bool}


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


# ---- building several implementations into one library -------------------------------------------
def symbol(ti: int, ii: int) -> str:
    return f"cp_t{ti}_i{ii}"


def combined_source(items: list[tuple[int, int, Task, object]]) -> str:
    """One translation unit: every (task index, impl index, task, impl) in its own namespace, entry renamed."""
    parts = ["".join(f"#include <{h}>\n" for h in HEADERS)]
    for ti, ii, task, impl in items:
        body = _INCLUDE.sub("", impl.source)
        body = re.sub(rf'extern\s+"C"\s+int\s+{re.escape(task.entry)}\s*\(', f'extern "C" int {symbol(ti, ii)}(', body)
        undefs = "".join(f"#undef {m}\n" for m in re.findall(r"^\s*#\s*define\s+(\w+)", body, re.MULTILINE))
        parts.append(f"namespace ns_t{ti}_i{ii} {{\n{body}\n}}  // namespace\n{undefs}")
    return "\n".join(parts)


def compile_batch(items, workdir: Path, tag: str, arch: str) -> dict:
    """{(ti, ii): (library path or None, symbol, log)}; a failed batch is retried one implementation at a time."""
    from kernels_harness.build import nvcc
    res = nvcc.build_shared(combined_source(items), workdir / f"{tag}.so", arch=arch, timeout_s=300)
    if res.ok:
        return {(ti, ii): (str(res.path), symbol(ti, ii), "") for ti, ii, _, _ in items}
    if len(items) == 1:
        ti, ii = items[0][:2]
        return {(ti, ii): (None, symbol(ti, ii), res.log[-2000:])}
    out: dict = {}
    for k, it in enumerate(items):
        out.update(compile_batch([it], workdir, f"{tag}_{k}", arch))
    return out


# ---- inputs, calls, comparison ---------------------------------------------------------------------
def _np_dtype(name: str):
    return np.dtype({"bfloat16": "float32"}.get(name, name))


def make_inputs(cp, task: Task, config: dict, rng: np.random.Generator) -> dict:
    from kernels_harness.tasks import inits
    env = config_env(config)
    arrays = {}
    for a in task.arrays:
        shape = task.shape(a, env)
        dt = _np_dtype(a.dtype)
        if a.role == "out":
            arrays[a.name] = cp.empty(shape, dtype=dt)
            continue
        init = a.init or ("randint(0, 100)" if dt.kind in "iub" else "uniform(-1, 1)")
        name, args = inits.parse(init)
        vals = [float(inits.expr_lib.evaluate(x, env)) for x in args]
        n = int(np.prod(shape))
        if name == "uniform" and dt.kind == "f":
            lo, hi = (vals + [-1.0, 1.0])[:2] if vals else (-1.0, 1.0)
            arr = cp.random.uniform(lo, hi, size=shape).astype(dt)
        elif name == "normal":
            mu, sd = (vals + [0.0, 1.0])[:2] if vals else (0.0, 1.0)
            arr = cp.random.normal(mu, sd, size=shape).astype(dt)
        elif name in ("randint", "uniform") and dt.kind in "iu":
            lo, hi = (int(vals[0]), int(vals[1])) if len(vals) == 2 else (0, 100)
            arr = cp.random.randint(lo, hi, size=shape).astype(dt)
        elif name == "permutation":
            arr = cp.random.permutation(n).astype(dt).reshape(shape)
        elif name == "bernoulli":
            arr = (cp.random.random(shape) < (vals[0] if vals else 0.5)).astype(dt)
        else:  # csr_rowptr, sorted_uniform, spd_diag, arange, constants: numpy, then copied
            arr = cp.asarray(inits.generate(init, rng, shape, dt, env))
        arrays[a.name] = cp.ascontiguousarray(arr)
    return arrays


def call_args(task: Task, config: dict, arrays: dict, stream_ptr: int) -> list:
    env = config_env(config)
    args = []
    for a in task.signature:
        if a.is_array:
            args.append(ctypes.c_void_p(arrays[a.name].data.ptr))
        else:
            args.append(_C_SCALAR[a.dtype](task.scalar(a, env)))
    args.append(ctypes.c_void_p(stream_ptr))
    return args


def poison(cp, arr) -> None:
    if arr.dtype.kind == "f":
        arr.fill(np.nan)
    else:
        arr.fill(np.iinfo(arr.dtype).max // 3)


def compare(cp, task: Task, got: dict, ref: dict) -> tuple[bool, float]:
    worst, ok = 0.0, True
    for a in task.outputs:
        g, r = got[a.name], ref[a.name]
        atol, rtol = task.tolerance_for(a.dtype)
        if g.dtype.kind == "f":
            bad_nan = cp.isnan(g) & ~cp.isnan(r)
            diff = cp.abs(g.astype(cp.float64) - r.astype(cp.float64))
            lim = atol + rtol * cp.abs(r.astype(cp.float64))
            fails = bool(cp.any(bad_nan | (diff > lim)))
            err = float(cp.nanmax(diff)) if diff.size else 0.0
        else:
            diff = cp.abs(g.astype(cp.int64) - r.astype(cp.int64))
            fails = bool(cp.any(diff > atol))
            err = float(cp.max(diff)) if diff.size else 0.0
        ok = ok and not fails
        worst = max(worst, err if np.isfinite(err) else float("inf"))
    return ok, worst


class Timer:
    def __init__(self, cp, flush_bytes: int = 256 << 20, target_ms: float = 40.0, max_reps: int = 30):
        self.cp, self.target_ms, self.max_reps = cp, target_ms, max_reps
        self.flush = cp.empty(flush_bytes // 4, dtype=cp.float32)
        self.stream = cp.cuda.Stream()  # blocking: ordered after work on the legacy default stream

    def time(self, fn, args) -> tuple[float, float, int, int]:
        """(median ms, IQR ms, repetitions, return code of the first call)."""
        cp = self.cp
        with self.stream:
            rc = fn(*args)
            self.stream.synchronize()
            cp.cuda.runtime.deviceSynchronize()
            times = []
            start, end = cp.cuda.Event(), cp.cuda.Event()
            while len(times) < self.max_reps:
                self.flush.fill(0)
                start.record(self.stream)
                fn(*args)
                cp.cuda.runtime.deviceSynchronize()
                end.record(self.stream)
                end.synchronize()
                times.append(cp.cuda.get_elapsed_time(start, end))
                if len(times) >= 3 and sum(times) >= self.target_ms:
                    break
        q1, med, q3 = np.percentile(times, [25, 50, 75])
        return float(med), float(q3 - q1), len(times), int(rc)


def torch_eager_ms(cp, timer: Timer, task: Task, config: dict) -> float | None:
    """PyTorch eager time of a torch2cuda module on this config (the track's baseline), or None."""
    try:
        import torch
    except ImportError:
        return None
    ns: dict = {"__name__": "measure_module"}
    exec(compile(task.source, f"<{task.id}>", "exec"), ns)  # noqa: S102 - the task's own module
    for k in task.extra.get("constants", []):
        if k in config:
            ns[k] = config[k]
    torch.manual_seed(0)
    model = ns["Model"](*ns["get_init_inputs"]()).cuda().eval()
    inputs = [x.cuda() if hasattr(x, "cuda") else x for x in ns["get_inputs"]()]
    times = []
    with torch.no_grad():
        model(*inputs)
        torch.cuda.synchronize()
        while len(times) < timer.max_reps:
            timer.flush.fill(0)
            cp.cuda.runtime.deviceSynchronize()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            model(*inputs)
            torch.cuda.synchronize()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
            if len(times) >= 3 and sum(times) >= timer.target_ms:
                break
    del model, inputs
    torch.cuda.empty_cache()
    return float(np.median(times))


# ---- one task ------------------------------------------------------------------------------------
def measure_task(cp, timer: Timer, ti: int, task: Task, fns: dict, seed: int, deadline: float) -> dict:
    rec = {"task": task.id, "family": task.family, "track": task.track, "split": task.split,
           "impls": [i.name for i in task.implementations], "strategies": [list(i.strategies) for i in task.implementations],
           "expected": [i.expected for i in task.implementations],
           "baseline": next((k for k, i in enumerate(task.implementations) if i.baseline), 0),
           "configs": [c.get("name", str(k)) for k, c in enumerate(task.configs)],
           "time_ms": [], "iqr_ms": [], "agrees": [], "max_err": [], "errors": []}
    if task.track == "torch2cuda":
        rec["torch_eager_ms"] = [None] * len(task.configs)
    rng = np.random.default_rng(seed)
    n_i = len(task.implementations)
    for ci, config in enumerate(task.configs):
        row_t, row_q, row_a, row_e = [None] * n_i, [None] * n_i, [None] * n_i, [None] * n_i
        if time.time() > deadline:
            rec["errors"].append(f"config {ci}: out of time")
            for lst, row in ((rec["time_ms"], row_t), (rec["iqr_ms"], row_q), (rec["agrees"], row_a), (rec["max_err"], row_e)):
                lst.append(row)
            continue
        try:
            arrays = make_inputs(cp, task, config, rng)
            pristine = {a.name: arrays[a.name].copy() for a in task.arrays if a.role == "inout"}
            stream_ptr = timer.stream.ptr
            base = rec["baseline"]
            order = [base] + [k for k in range(n_i) if k != base]
            ref = None
            for ii in order:
                fn, log = fns.get((ti, ii), (None, "not built"))
                if fn is None:
                    rec["errors"].append(f"{task.implementations[ii].name}: build failed: {log[-300:]}")
                    continue
                try:
                    for name, arr in pristine.items():
                        arrays[name][...] = arr
                    for a in task.arrays:
                        if a.role == "out":
                            poison(cp, arrays[a.name])
                    args = call_args(task, config, arrays, stream_ptr)
                    fn.restype = ctypes.c_int
                    cp.cuda.runtime.deviceSynchronize()
                    with timer.stream:
                        rc = fn(*args)
                    cp.cuda.runtime.deviceSynchronize()
                    outs = {a.name: arrays[a.name].copy() for a in task.outputs}
                    if rc != 0:
                        raise RuntimeError(f"returned cudaError {rc}")
                    if ii == base:
                        ref = outs
                        row_a[ii], row_e[ii] = True, 0.0
                    elif ref is not None:
                        row_a[ii], row_e[ii] = compare(cp, task, outs, ref)
                    med, iqr, _, _ = timer.time(fn, args)
                    row_t[ii], row_q[ii] = med, iqr
                except Exception as e:
                    rec["errors"].append(f"{task.implementations[ii].name} config {ci}: {type(e).__name__}: {str(e)[:200]}")
                    if "illegal" in str(e).lower() or "sticky" in str(e).lower():
                        raise
        except Exception as e:  # noqa: BLE001
            rec["errors"].append(f"config {ci}: {type(e).__name__}: {str(e)[:300]}")
            if "illegal" in str(e).lower():
                rec["fatal"] = True
        finally:
            rec["time_ms"].append(row_t)
            rec["iqr_ms"].append(row_q)
            rec["agrees"].append(row_a)
            rec["max_err"].append(row_e)
            arrays = pristine = ref = None
            cp.get_default_memory_pool().free_all_blocks()
        if task.track == "torch2cuda" and not rec.get("fatal") and time.time() < deadline:
            try:
                rec["torch_eager_ms"][ci] = torch_eager_ms(cp, timer, task, config)
            except Exception as e:  # noqa: BLE001
                rec["errors"].append(f"torch eager config {ci}: {type(e).__name__}: {str(e)[:200]}")
    return rec


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


def worker(results_path: str) -> int:
    """Child process: reads one job (JSON) per stdin line, measures its tasks, appends to results_path,
    answers DONE. A sticky CUDA error ends the process (the parent starts a fresh one)."""
    import cupy as cp
    timer = Timer(cp)
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
                try:
                    rec = measure_task(cp, timer, ti, task, fns, job["seed"] + ti, job["deadline"])
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

    def __init__(self, results_path: Path):
        import subprocess as sp
        self.proc = sp.Popen([sys.executable, "-m", "kernels_harness.datasets.measure", "--worker", str(results_path)],
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
        return worker(argv[1])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", default="generate", help="dataset directory, or 'generate' (default: the generator)")
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    ap.add_argument("--max_seconds", type=float, default=240.0, help="wall-clock budget of the whole run")
    ap.add_argument("--max_tasks", type=int, default=100000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch", type=int, default=BATCH_IMPLS, help="implementations per shared library")
    ap.add_argument("--jobs", type=int, default=min(16, os.cpu_count() or 4), help="parallel nvcc processes")
    ap.add_argument("--arch", default="sm_90")
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
    done = set()
    if results_path.is_file():
        for line in results_path.read_text().splitlines():
            try:
                done.add(json.loads(line)["task"])
            except (json.JSONDecodeError, KeyError):
                pass
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
                wk = WorkerProcess(results_path)
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
                                          "implementations_per_library": args.batch, "nvcc_jobs": args.jobs})
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
