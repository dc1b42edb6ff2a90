"""HarnessPool: static checks, parallel compilation, isolated execution, EvalResults.

    with HarnessPool("cpu") as pool:
        results = pool.evaluate([(task, source), ...])   # list[EvalResult], same order

    with HarnessPool("cuda", config=PoolConfig(batch_size=16)) as pool: ...   # the knobs of throughput

Stages per candidate: static reward-hack checks (kernels_harness.hacks, in this process: text only);
compilation in a process pool (kernels_harness.build.scheduler: several candidates per compiler call
and one shared library per batch, a failed member rebuilt alone; every distinct build once, and kept
in an on-disk cache shared by processes; the task's C reference and baseline/oracle too), pipelined
with execution: a candidate runs as soon as its batch is built, while later batches compile.
Execution in worker processes (one per core on cpu, `workers_per_gpu` per GPU on cuda, their
correctness checks side by side, timing alone under the per-GPU lock of kernels_harness.run.timing)
that apply the protocol of kernels_harness.run.protocol. A worker that hangs, crashes or hits a sticky
device error is killed and replaced, and the candidate gets `timeout` or `runtime_error`; the pool
keeps serving. A candidate whose check ran out of memory while other checks shared the GPU is checked
again alone; one whose worker died loading a shared library is rebuilt alone and run again.
An exact repeat of a (task, source) pair in one `evaluate` call is checked on its own inputs but timed
once (PoolConfig.time_duplicates_once); with torch_compile, a torch2cuda task's torch.compile baseline is
measured once per (task, config) for the pool's life and reused by later candidates
(PoolConfig.reuse_compile_baseline; ConfigResult.compile_baseline_from says which);
compile workers run at a lower priority (PoolConfig.compile_nice), so checks and timing never wait for a core.
`PoolConfig.legacy()` is the pool before batching: one build per candidate, no disk cache, 2 workers
per GPU.
"""
from __future__ import annotations

import contextlib
import functools
import importlib.util
import json
import os
import queue
import shutil
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from typing import Self

from kernels_harness import hacks
from kernels_harness.build.cache import BuildCache
from kernels_harness.build.scheduler import BuildScheduler
from kernels_harness.feedback import make_feedback
from kernels_harness.result import EvalResult
from kernels_harness.run.assemble import (
    assemble,
    failed_before_run,
    infra_failure,
    job_device_bytes,
    lost_configs,
    not_judged,
    plan_configs,
)
from kernels_harness.run.baselines import CompileMedians
from kernels_harness.run.devices import (  # the pool's public names, as before
    OWNER_FILE,
    ROOT_PREFIX,
    HarnessSetupError,
    _asan_available,
    gpu_count,
    resolve_backend,
    sweep_stale_roots,
)
from kernels_harness.run.inputs import master_seed
from kernels_harness.run.limits import Limits
from kernels_harness.run.pool_config import DeviceBudget, PoolConfig, SharedGate
from kernels_harness.run.timing import HARNESS_STAGE, gpu_lock_path
from kernels_harness.run.workers import CompilePool, ExecWorker, WorkerLost
from kernels_harness.tasks.schema import Task

_OOM = ("out of memory", "memoryallocation", "memoryerror", "outofmemory", "cannot allocate", "bad_alloc")


class HarnessPool:
    """Evaluates (task, CUDA source) pairs in isolated worker processes; see the module docstring.

    backend: "cpu" | "cuda" | "auto". workers: execution workers (cpu: cores; cuda: GPUs x
    workers_per_gpu). trials: trials per config (>= 2). call_timeout_s: the longest one call (or
    reference run) may take before the worker is killed (verdict `timeout`). cpu_budget_bytes: on cpu,
    configs whose arrays exceed this are skipped (the smallest always runs). cref_max_bytes /
    cref_max_flops: above these the C reference is replaced by the task's verified implementation.
    rules: hack allow-list (kernels_harness.hacks.Rules); checks=False disables static checks.
    config: PoolConfig (batching, build cache, workers per GPU); PoolConfig.legacy() for the old pool.
    """

    def __init__(self, backend: str = "auto", workers: int | None = None, compile_workers: int | None = None,
                 trials: int = 2, call_timeout_s: float = 20.0, job_timeout_s: float = 600.0,
                 compile_timeout_s: float = 120.0, cpu_budget_bytes: int = 8 << 20,
                 cref_max_bytes: int = 64 << 20, cref_max_flops: float = 2e8, timing: bool = True,
                 timing_params: dict | None = None, rules: hacks.Rules = hacks.DEFAULT_RULES,
                 checks: bool = True, workers_per_gpu: int | None = None, memory_limit_bytes: int | None = 8 << 30,
                 max_jobs_per_worker: int = 100, arch: str = "sm_90", features: bool = True,
                 use_numba: bool = True, progress: bool = False, seed: int | None = None,
                 emulation_checks: bool = True, ptxas_resources: bool = True, cpu_budget_flops: float = 1e9,
                 torch_compile: bool = False, config: PoolConfig | None = None):
        self.config = config = config or PoolConfig()
        if not isinstance(config, PoolConfig):
            raise HarnessSetupError("config must be a kernels_harness.run.pool_config.PoolConfig")
        workers_per_gpu = workers_per_gpu or config.workers_per_gpu
        if trials < 2:
            raise HarnessSetupError("trials must be at least 2 (fresh inputs catch cached results)")
        self.backend = resolve_backend(backend)
        self.trials, self.call_timeout_s, self.job_timeout_s = trials, call_timeout_s, job_timeout_s
        self.compile_timeout_s, self.cpu_budget_bytes = compile_timeout_s, cpu_budget_bytes
        self.cpu_budget_flops = cpu_budget_flops
        self.cref_max_bytes, self.cref_max_flops = cref_max_bytes, cref_max_flops
        self.timing = timing and self.backend == "cuda"
        self.timing_params = timing_params or {}
        self.torch_compile = torch_compile  # torch2cuda on cuda: also time torch.compile of the module
        self.compile_medians = CompileMedians()  # ... once per (task, config): later jobs reuse the median
        self.rules, self.checks, self.arch = rules, checks, arch
        # the timer's stream join counts the candidate's stream and the legacy one; it is only as good as the
        # static check that no other stream can be made: without it, every stream is drained in the timed region
        self._streams_checked = checks and "stream" not in rules.disabled and not rules.allow
        self.max_jobs_per_worker, self.features, self.progress = max_jobs_per_worker, features, progress
        self.fixed_seed = seed
        self.ptxas_resources = ptxas_resources and features  # cpu: registers/smem for the features
        sweep_stale_roots(tempfile.gettempdir())
        self.root = tempfile.mkdtemp(prefix=ROOT_PREFIX)
        with open(os.path.join(self.root, OWNER_FILE), "w") as f:
            f.write(str(os.getpid()))
        self.cache_dir = os.path.join(self.root, "build")
        os.makedirs(self.cache_dir)
        cores = os.cpu_count() or 2
        if self.backend == "cuda":
            gpus = max(gpu_count(), 1)
            slots = [(g, k) for k in range(workers_per_gpu) for g in range(gpus)]
            slots = slots[:workers] if workers else slots
            limits = Limits(address_space_bytes=None)
        else:
            slots = [(0, k) for k in range(workers or max(1, cores))]
            # AddressSanitizer reserves terabytes of address space: cap memory through ASan instead
            limits = Limits(address_space_bytes=None if emulation_checks else memory_limit_bytes)
        self.limits, self.use_numba = limits, use_numba
        self.emulation_checks = emulation_checks and self.backend == "cpu" and _asan_available()
        self.asan_memory_mb = (memory_limit_bytes or (8 << 30)) >> 20 if self.emulation_checks else None
        n_compile = compile_workers or cores
        self.compile_pool = CompilePool(n_compile, self.root, self.backend, compile_timeout_s,
                                        Limits(cpu_seconds=None, file_size_bytes=1 << 30,
                                               address_space_bytes=config.compile_memory_bytes),
                                        nice=config.compile_nice)
        cache = None
        if config.cache:
            try:
                cache = BuildCache(config.cache_dir, config.cache_max_bytes)
            except OSError:  # an unwritable cache directory costs speed, not verdicts
                cache = None
        self.builds = BuildScheduler(self.compile_pool, self.cache_dir, self.backend, arch=arch,
                                     checks=self.emulation_checks, resources=self.ptxas_resources,
                                     timeout_s=compile_timeout_s, batch_size=config.batch_size, cache=cache,
                                     workers=n_compile)
        # what a sandboxed worker may read besides libraries: the builds (here, and in the shared cache)
        self._readable = (self.cache_dir,) + ((str(cache.root),) if cache is not None else ())
        self._gate = SharedGate()
        self._lock = threading.Lock()
        self._free: queue.Queue = queue.Queue()
        self._slots = slots
        self.worker_info: list = []
        self._closed = False
        starters = ThreadPoolExecutor(len(slots))
        started = list(starters.map(lambda s: self._new_worker(s[0]), slots))
        starters.shutdown()
        for w in started:
            self._free.put(w)
            self.worker_info.append(dict(w.info))
        free = [w["free_memory"] for w in self.worker_info if w.get("free_memory")]
        # on cuda: the jobs' device memory, under a share of what the device had free once the workers were up
        self.device_budget = (DeviceBudget(int(config.device_budget * min(free)))
                              if self.backend == "cuda" and config.device_budget > 0 and free else None)

    # ---- lifecycle ------------------------------------------------------------------------------------
    def _new_worker(self, device: int) -> ExecWorker:
        try:
            return ExecWorker(self.backend, device, self.root, self.limits, use_numba=self.use_numba,
                              asan_memory_mb=self.asan_memory_mb, sandbox=self.config.sandbox,
                              readable=self._readable, allow_processes=self.torch_compile).start()
        except RuntimeError as e:
            raise HarnessSetupError(str(e)) from None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        while not self._free.empty():
            w = self._free.get()
            if isinstance(w, ExecWorker):
                w.close(graceful=True)
        self.compile_pool.close()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001, S110 - __del__ must never raise
            pass

    # ---- compilation ----------------------------------------------------------------------------------
    def _build(self, kind: str, source: str, entry: str) -> Future:
        return self.builds.request(kind, source, entry)

    @staticmethod
    def _built(fut: Future) -> dict:
        try:
            return fut.result()
        except Exception as e:  # noqa: BLE001 - the compile worker itself died (out of memory, killed)
            return {"ok": False, "log": f"the compiler process failed: {type(e).__name__}: {e}", "path": None,
                    "resources": {}, "seconds": 0.0}

    def _support(self, task: Task) -> dict:
        """Futures of the task's C reference, oracle and baseline builds."""
        sup = {"c_reference": None, "oracle": None, "baseline": None, "oracle_name": ""}
        if task.track == "c2cuda" and task.source.strip():
            sup["c_reference"] = self._build("c_reference", task.source, task.entry)
        good = [i for i in task.implementations if i.expected == "correct"]
        oracle = task.baseline if task.baseline and task.baseline.expected == "correct" else (good[0] if good else None)
        if oracle is not None:
            sup["oracle_name"] = oracle.name
            fut = self._build("solution", oracle.source, task.entry)
            sup["oracle"] = fut
            if self.timing and task.baseline is not None:
                sup["baseline"] = fut if task.baseline is oracle else self._build("solution", task.baseline.source,
                                                                               task.entry)
        return sup

    # ---- evaluation -----------------------------------------------------------------------------------
    def evaluate(self, items) -> list[EvalResult]:
        """items: [(Task, source str)] -> [EvalResult] in the same order. Never raises for a candidate."""
        if self._closed:
            raise HarnessSetupError("this HarnessPool is closed; create a new one")
        items = [(t if isinstance(t, Task) else Task.from_dict(t), s) for t, s in items]
        if any(t.track == "torch2cuda" for t, _ in items) and not importlib.util.find_spec("torch"):
            raise HarnessSetupError("torch2cuda tasks need PyTorch; run `pip install 'cudaperf-jax[torch]'`")
        results: list = [None] * len(items)
        pending: dict[Future, list] = {}  # one build may serve several items (the same source twice)
        support: dict[int, dict] = {}
        t_static = {}
        twins = _duplicates(items) if self.config.time_duplicates_once and self.timing else {}
        judged = {i: threading.Event() for i in set(twins.values())}  # set when a first copy's result is in
        for i, (task, source) in enumerate(items):  # the support builds first: every candidate needs them
            t0 = time.perf_counter()
            violations = hacks.check_source(source, self.rules) if self.checks else []
            t_static[i] = time.perf_counter() - t0
            if violations:
                results[i] = failed_before_run(task, self.backend, "hack", violations=violations,
                                               seconds={"static": t_static[i]})
                continue
            support[i] = self._support(task)
        for i in support:
            task, source = items[i]
            pending.setdefault(self._build("solution", source, task.entry), []).append(i)
        self.builds.flush()
        bar = None
        if self.progress:
            from tqdm import tqdm
            bar = tqdm(total=len(items), desc=f"harness[{self.backend}]", unit="cand", leave=False)
            bar.update(sum(r is not None for r in results))
        runner = ThreadPoolExecutor(max(1, len(self._slots)))
        running = []
        for fut in as_completed(list(pending)):
            for i in pending[fut]:
                # a repeat is submitted after its first copy (same build, lower index): waiting cannot deadlock
                twin = functools.partial(_result_when_set, judged[twins[i]], results, twins[i]) if i in twins else None
                running.append(runner.submit(self._finish, i, items[i], fut, support[i], t_static[i], results, bar,
                                             twin, judged.get(i)))
        for r in running:
            r.result()
        runner.shutdown()
        if bar:
            bar.close()
        return results

    def _finish(self, i, item, fut, sup, t_static, results, bar, twin=None, judged=None) -> None:
        try:
            self._finish_one(i, item, fut, sup, t_static, results, bar, twin)
        finally:
            if judged is not None:  # its copies may now take its times
                judged.set()

    def _finish_one(self, i, item, fut, sup, t_static, results, bar, twin) -> None:
        task, source = item
        build = self._built(fut)
        seconds = {"static": t_static, "compile": build.get("seconds", 0.0)}
        if build.get("batch_size", 1) > 1:
            seconds["compile_batch"] = float(build["batch_size"])
        try:
            if not build["ok"]:
                results[i] = failed_before_run(task, self.backend, "compile_error", compile_log=build["log"],
                                               seconds=seconds)
            else:
                results[i] = self._judge(task, source, build, sup, seconds, twin)
        except Exception as e:  # noqa: BLE001 - a harness bug must not cost the caller the other results
            results[i] = EvalResult(task_id=task.id, backend=self.backend, status="unchecked",
                                    compiled=bool(build["ok"]), compile_log=build.get("log", ""),
                                    error=not_judged(f"harness error: {type(e).__name__}: {e}"), seconds=seconds,
                                    feedback="The harness failed on this candidate; it was not judged.")
        if bar:
            bar.update(1)

    def _judge(self, task: Task, source: str, build: dict, sup: dict, seconds: dict, twin=None) -> EvalResult:
        """Runs the candidate; retries it alone where a shared library or a shared device may be to blame.
        `twin`: () -> the EvalResult of the first copy of the same (task, source), whose times it takes."""
        res = lost = None
        if twin is not None:  # checked on its own inputs, untimed; then (outside the gate) the first's times
            raw: dict = {}
            with self._gate.shared():
                res, lost = self._execute(task, source, build, sup, dict(seconds), raw=raw)
            if lost is None and res.status == "ok":
                first = twin()
                res = None
                if _take_times(raw["out"], first):
                    raw["seconds"]["timed_once"] = 1.0
                    return assemble(task, source, self.backend, build, raw["out"], raw["seed"], raw["seconds"],
                                    self.features)
        if res is None:  # (a repeat whose first copy had no times to give is timed itself)
            with self._gate.shared():
                res, lost = self._execute(task, source, build, sup, seconds)
        if (lost is not None and lost.stage == "loading the solution" and build.get("batch_size", 1) > 1
                and self.config.reload_retry):
            alone = self._built(self.builds.rebuild_alone("solution", source, task.entry))
            if not alone["ok"]:  # it built with others and not alone: its own log is the verdict
                return failed_before_run(task, self.backend, "compile_error", compile_log=alone["log"],
                                         seconds=seconds)
            seconds["compile"] = seconds.get("compile", 0.0) + alone.get("seconds", 0.0)
            with self._gate.shared():
                res, lost = self._execute(task, source, alone, sup, seconds)
        if (self.config.oom_recheck and len(self._slots) > 1 and res.status == "runtime_error"
                and any(w in res.error.lower().replace(" ", "") or w in res.error.lower() for w in _OOM)):
            with self._gate.exclusive():  # nothing else on the device: its own memory, its own verdict
                res, _ = self._execute(task, source, build, sup, seconds)
            res.seconds["rechecked_alone"] = 1.0
        for pause in self.config.infra_retry_pauses_s:
            if not infra_failure(res):
                break
            time.sleep(pause)  # e.g. another process holding the device's memory may release it
            with self._gate.exclusive():
                res, _ = self._execute(task, source, build, sup, seconds)
            res.seconds["infra_retries"] = res.seconds.get("infra_retries", 0.0) + 1.0
        if infra_failure(res):  # not the candidate's failure: no verdict, no reward (and no penalty)
            res.status, res.correct, res.speedup = "unchecked", False, None
            res.error = not_judged(res.error)
            res.feedback = make_feedback(task, res)
        return res

    def _execute(self, task: Task, source: str, build: dict, sup: dict, seconds: dict, raw: dict | None = None):
        """(EvalResult, WorkerLost or None). With `raw` (a dict): checked but not timed, and `raw` gets the
        protocol's output, the seed and the seconds (for _judge to add a first copy's times)."""
        paths, symbols = {}, {"solution": build.get("symbol")}
        for k in ("c_reference", "oracle", "baseline"):
            b = self._built(sup[k]) if sup.get(k) is not None else None
            paths[k] = b["path"] if b and b["ok"] else None
            symbols[k] = b.get("symbol") if b and b["ok"] else None
        seed = self.fixed_seed if self.fixed_seed is not None else master_seed()
        plan = plan_configs(task, self.backend, self.cpu_budget_bytes, self.cref_max_bytes, self.cref_max_flops,
                            have_c=paths["c_reference"] is not None, have_oracle=paths["oracle"] is not None,
                            cpu_budget_flops=self.cpu_budget_flops)
        job = {"task": task.to_dict(), "solution": build["path"], "seed": seed, "trials": self.trials,
               "plan": plan, "oracle_name": sup.get("oracle_name", ""), **paths, "timing": None,
               "symbols": {k: v for k, v in symbols.items() if v}}
        t_budget = time.perf_counter()
        with (self.device_budget.hold(job_device_bytes(task, plan)) if self.device_budget is not None
              else contextlib.nullcontext()):
            if self.device_budget is not None:
                seconds["budget_wait"] = time.perf_counter() - t_budget
            return self._run_job(task, source, build, job, plan, seed, seconds, raw)

    def _run_job(self, task, source, build, job, plan, seed, seconds, raw):
        """_execute's job on a free worker (replaced afterwards if it is spent): (EvalResult, WorkerLost or None)."""
        lost = None
        worker = self._free.get()
        if isinstance(worker, int):  # a slot whose worker could not be restarted earlier: try again
            device, worker = worker, self._replace(worker)
            if worker is None:
                self._free.put(device)
                out = {"status": "runtime_error", "error": "no execution worker could be started",
                       "configs": [], "launches": []}
                return assemble(task, source, self.backend, build, out, seed, seconds, False), None
        if self.timing:  # a repeat (`raw`) is checked under the GPU lock like any job, but not timed
            params = dict(self.timing_params) if self._streams_checked else {**self.timing_params, "join": "device"}
            reuse = self.torch_compile and self.config.reuse_compile_baseline and task.track == "torch2cuda"
            job["timing"] = {"lock": gpu_lock_path(self.root, worker.device),
                             "params": params, "torch_compile": self.torch_compile,
                             "compile_ms": self.compile_medians.for_job(task) if reuse else {},
                             "check_only": raw is not None}
        t0 = time.perf_counter()
        out = {"status": "runtime_error", "error": "harness error: the job was not run", "configs": [],
               "launches": [], "sticky": True}
        try:
            out = worker.run(job, self.call_timeout_s, self.job_timeout_s)
            if self.torch_compile and self.config.reuse_compile_baseline:
                self.compile_medians.record(task, out.get("configs") or [])
        except WorkerLost as e:
            lost = e
            out = {"status": e.kind, "error": e.message, "configs": lost_configs(task, plan, e),
                   "launches": [], "sticky": True, "seconds": {}}
            if e.kind == "timeout" and e.stage.startswith(HARNESS_STAGE):  # the harness's own work, not the solution
                out.update(status="unchecked", error=not_judged(e.message))
        finally:  # the slot always goes back to the queue, with a fresh worker if this one is spent
            seconds["execute"] = time.perf_counter() - t0
            if not worker.alive or out.get("sticky") or worker.jobs >= self.max_jobs_per_worker:
                seconds["worker_replaced"] = 1.0  # diagnostics: a new worker costs its start (imports, CUDA)
                worker.close(graceful=worker.alive)
                device = worker.device
                worker = self._replace(device)
                worker = device if worker is None else worker
            self._free.put(worker)
        if raw is not None:
            raw.update(out=out, seed=seed, seconds=dict(seconds))
        return assemble(task, source, self.backend, build, out, seed, dict(seconds), self.features), lost

    def _replace(self, device: int) -> ExecWorker | None:
        for _ in range(3):
            try:
                return self._new_worker(device)
            except HarnessSetupError:
                time.sleep(1.0)
        return None


def _result_when_set(event: threading.Event, results: list, i: int) -> EvalResult | None:
    event.wait()
    return results[i]


def _take_times(out: dict, first: EvalResult | None) -> bool:
    """Copies the first copy's times into a repeat's (untimed) protocol result; False if it has none to give
    (it was not `ok`, or not timed on the same configs)."""
    if first is None or first.status != "ok":
        return False
    times = {c.index: c for c in first.configs if c.time_ms is not None}
    ran = [c for c in out["configs"] if c.get("correct")]
    if not ran or any(c["index"] not in times for c in ran):
        return False
    for c in ran:
        t = times[c["index"]]
        c.update(time_ms=t.time_ms, time_iqr_ms=t.time_iqr_ms, baseline_ms=t.baseline_ms,
                 compile_baseline_ms=t.compile_baseline_ms, compile_baseline_from=t.compile_baseline_from,
                 reps=t.reps)
    out.setdefault("seconds", {})["time"] = 0.0
    return True


def _duplicates(items: list) -> dict[int, int]:
    """{i: the first index j < i with the same task and source} for the exact repeats in `items`."""
    first: dict[tuple, int] = {}
    out = {}
    for i, (task, source) in enumerate(items):
        key = (json.dumps(task.to_dict(), sort_keys=True, default=str), source)
        if key in first:
            out[i] = first[key]
        else:
            first[key] = i
    return out
