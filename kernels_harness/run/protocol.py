"""The correctness (and, on cuda, timing) protocol for one compiled candidate, run inside a worker.

For every planned config, `trials` times: fresh inputs from `trial_seed(seed, config, trial)`;
reference outputs from the C reference (small configs), a verified implementation (large configs, on
the same backend) or the PyTorch module (torch2cuda); the candidate's arrays get guard zones, its
outputs are poisoned (a different pattern each trial); the entry is called on the backend's stream;
then: the return code, device errors, writes outside the arrays (`wrong`, naming the array and the
offset), `in` arrays unchanged, and every output against the reference with the task's tolerance for
its dtype at the reference's scale (arrays.compare, on the device). The first failing config stops the
run; later configs are marked skipped. A C reference's host work (inputs, outputs) is done before the trial
takes its share of the GPU lock. A torch2cuda module and its inputs are built on the GPU on cuda (drawn there
from the trial's seed: no host generation, no upload) and the candidate's arrays are views of its tensors (no
copy); a trial's arrays are dropped before the next trial's are made. When every config is correct, they are
timed on cuda, all in one exclusive turn of the GPU lock (each config's last-trial arrays, and for torch2cuda its
module, are kept until then; a candidate that fails a config is not timed; the baseline's first run, under the
shared lock, and torch.compile (kernels_harness.run.baselines) happen before the turn); after timing the guard
zones are checked again (a kernel that writes
out of bounds only when called repeatedly) and a median time below the task's roofline floor
(features.roofline.below_floor) is a `hack`. The launches recorded are those of every config that ran
(trial 0 of each), each once.

`evaluate_job(ctx, job) -> dict` returns plain data: {"status", "error", "configs": [ConfigResult
dict], "launches", "sticky", "setup_error", "seconds"}.
"""
from __future__ import annotations

import dataclasses
import time

from kernels_harness.result import ConfigResult
from kernels_harness.run import arrays, baselines
from kernels_harness.run.arrays import allocate, np_dtype
from kernels_harness.run.backends import DeviceError, scalar_arg
from kernels_harness.run.inputs import device_inputs, host_inputs, scalars, trial_seed
from kernels_harness.run.references import (
    SetupError,
    c_reference_outputs,
    tensor_to_xp,
    torch_values,
)
from kernels_harness.run.timing import HARNESS_STAGE, gpu_lock
from kernels_harness.tasks.schema import Task, config_env, describe_config

CUDA_ERRORS = {1: "cudaErrorInvalidValue", 2: "cudaErrorMemoryAllocation", 9: "cudaErrorInvalidConfiguration",
               98: "cudaErrorInvalidDeviceFunction", 209: "cudaErrorNoKernelImageForDevice",
               400: "cudaErrorInvalidResourceHandle", 700: "cudaErrorIllegalAddress",
               701: "cudaErrorLaunchOutOfResources", 719: "cudaErrorLaunchFailure"}


class Failure(Exception):
    """A verdict reached inside a trial: kind is 'wrong' or 'runtime_error'."""

    def __init__(self, kind: str, message: str, sticky: bool = False):
        super().__init__(message)
        self.kind, self.message, self.sticky = kind, message, sticky


@dataclasses.dataclass
class Context:
    """Per-worker state: the backend, loaded libraries, verified oracles, a progress callback."""
    backend: object
    progress: object = lambda stage: None
    compare_fn: object = None          # device comparison (numba) or None for arrays.compare
    timer: object = None               # kernels_harness.run.timing.Timer on cuda
    libs: dict = dataclasses.field(default_factory=dict)
    verified: dict = dataclasses.field(default_factory=dict)
    peaks: dict | None = None          # device peaks for the roofline floor (loaded on first use)

    def entry(self, path: str, task: Task, symbol: str | None = None):
        """(library, entry function); `symbol`: the entry's name in a library of several candidates
        (kernels_harness.build.batch), else the task's entry."""
        if path not in self.libs:
            self.libs[path] = self.backend.load(path)
        lib = self.libs[path]
        try:
            return lib, self.backend.entry(lib, symbol or task.entry, task)
        except LookupError as e:  # the message names the task's entry, never a batch library's renamed symbol
            if symbol and symbol != task.entry:
                raise LookupError(str(e).replace(symbol, task.entry)) from None
            raise

    def compare(self, out, ref, atol, rtol) -> dict:
        if self.compare_fn is not None:
            try:
                return self.compare_fn(out, ref, atol, rtol)
            except Exception:  # noqa: BLE001 - a failing fast comparison falls back to the array one
                self.compare_fn = None
        return arrays.compare(self.backend.xp, out, ref, atol, rtol)


def _launch(ctx: Context, lib, fn, task: Task, env: dict, inputs: dict, scal: dict, variant: int,
            stage: str):
    """Allocates guarded arrays, fills inputs, poisons outputs, calls `fn`; returns (bufs, args)."""
    be, xp = ctx.backend, ctx.backend.xp
    bufs = {}
    for a in task.arrays:
        g = allocate(xp, arrays.storage_dtype(xp, np_dtype(a.dtype)), task.shape(a, env), be.guard_bytes)
        if a.role in ("in", "inout"):
            g.view[...] = inputs[a.name]
        else:
            g.poison(variant)
        bufs[a.name] = g
    args = [bufs[a.name].ptr if a.is_array else scalar_arg(a.dtype, scal[a.name]) for a in task.signature]
    be.reset(lib)
    # Inputs and poison were written on the harness's stream: finish them before the call, so a
    # solution that (against the ABI) launches on a stream of its own still reads its real inputs.
    try:
        be.synchronize()
    except DeviceError as e:
        raise Failure("runtime_error", f"{stage}: {e}", sticky=e.sticky) from None
    ctx.progress(stage)
    mark = be.thread_mark(lib)
    rc = be.call(fn, args)
    left = be.threads_left(lib, mark)
    if left:
        raise Failure("runtime_error", f"{stage}: the solution left {left} thread(s) running after it returned; "
                                       "solutions may not start threads", sticky=True)
    try:
        be.synchronize()
    except DeviceError as e:
        raise Failure("runtime_error", f"{stage}: {e}", sticky=e.sticky) from None
    ctx.progress(harness_stage(f"checking {stage}"))
    err = be.check_library(lib)
    if err:
        raise Failure("runtime_error", f"{stage}: {err}")
    if rc != 0:
        raise Failure("runtime_error", f"{stage}: the entry returned {rc} ({CUDA_ERRORS.get(rc, 'a CUDA error')})")
    check_guards(task, bufs, stage)
    return bufs, args


def check_guards(task: Task, bufs: dict, stage: str) -> None:
    """Raises Failure('wrong') naming the first array whose guard zone was written, and the offset."""
    for a in task.arrays:
        off = bufs[a.name].first_out_of_bounds()
        if off is not None:
            raise Failure("wrong", f"{stage}: " + arrays.describe_out_of_bounds(a.name, off, bufs[a.name].n))


def harness_stage(stage: str) -> str:
    """The progress label of work the harness does itself (inputs, references, checks, waiting for the GPU):
    the pool gives such a stage the whole job's time, not the call limit meant for the solution's own code,
    and a job lost there is `unchecked`, not the candidate's timeout (kernels_harness.run.workers)."""
    return stage if stage.startswith(HARNESS_STAGE) else HARNESS_STAGE + stage


def _host_reference(ctx: Context, task: Task, job: dict, index: int, seed: int):
    """(host inputs, C reference outputs, scalars) of one trial: host work only, done before the trial
    takes its share of the GPU lock (a timer waiting for the lock does not wait for the C reference)."""
    config = task.configs[index]
    scal = scalars(task, config)
    host = host_inputs(task, config, seed)
    ctx.progress(harness_stage(f"C reference, config {index}"))
    return host, c_reference_outputs(job["c_reference"], task, config, host, scal), scal


def _reference(ctx: Context, task: Task, job: dict, index: int, kind: str, seed: int, pre=None):
    """(inputs, expected outputs, scalars, module) as backend arrays for one trial; `pre`: its _host_reference.
    module: for torch2cuda, (the PyTorch model, its input tensors) that made the expected outputs (what the
    eager baseline times), else None. On cuda a torch2cuda module and its inputs are drawn on the GPU and the
    arrays share the tensors' memory."""
    be, xp = ctx.backend, ctx.backend.xp
    config = task.configs[index]
    env = config_env(config)
    if task.track == "torch2cuda":
        gpu = be.name == "cuda"
        vals = torch_values(task, config, seed, device="cuda" if gpu else "cpu", build_on_device=gpu)
        scal = {a.name: (vals[a.name].item() if hasattr(vals[a.name], "item") else vals[a.name])
                for a in task.signature if not a.is_array}
        conv = {a.name: tensor_to_xp(vals[a.name], xp, a.dtype, task.shape(a, env), share=gpu) for a in task.arrays}
        return ({a.name: conv[a.name] for a in task.arrays if a.role in ("in", "inout")},
                {a.name: conv[a.name] for a in task.outputs}, scal, (vals["__model__"], vals["__inputs__"]))
    if kind == "c":
        host, ref, scal = pre if pre is not None else _host_reference(ctx, task, job, index, seed)
        return ({k: be.to_device(v) for k, v in host.items()}, {k: be.to_device(v) for k, v in ref.items()}, scal,
                None)
    scal = scalars(task, config)
    inputs = device_inputs(task, config, seed, xp) if be.name == "cuda" else host_inputs(task, config, seed)
    lib, fn = ctx.entry(job["oracle"], task, (job.get("symbols") or {}).get("oracle"))
    try:
        bufs, _ = _launch(ctx, lib, fn, task, env, inputs, scal, 0,
                          harness_stage(f"reference implementation, config {index}"))
    except Failure as f:
        raise SetupError(f"the task's reference implementation failed: {f.message}") from None
    return inputs, {o.name: bufs[o.name].view for o in task.outputs}, scal, None


def _verify_oracle(ctx: Context, task: Task, job: dict, seed: int) -> None:
    """Checks the oracle against the C reference once per worker on the smallest config."""
    key = (job.get("oracle"), (job.get("symbols") or {}).get("oracle"), job.get("c_reference"))
    if key in ctx.verified or not job.get("c_reference"):
        return
    small = min(range(len(task.configs)), key=lambda i: task.config_bytes(config_env(task.configs[i])))
    inputs, ref, scal, _ = _reference(ctx, task, job, small, "c", seed)
    lib, fn = ctx.entry(job["oracle"], task, (job.get("symbols") or {}).get("oracle"))
    bufs, _ = _launch(ctx, lib, fn, task, config_env(task.configs[small]), inputs, scal, 0,
                      harness_stage("oracle check"))
    for o in task.outputs:
        atol, rtol = task.tolerance_for(o.dtype, task.configs[small])
        xp = ctx.backend.xp
        if not ctx.compare(arrays.as_values(xp, bufs[o.name].view, o.dtype), arrays.as_values(xp, ref[o.name], o.dtype),
                           atol, rtol)["ok"]:
            raise SetupError(f"the task's implementation {job['oracle_name']!r} disagrees with its C reference "
                             "on the smallest config; fix the task before evaluating large configs")
    ctx.verified[key] = True


def _check_outputs(ctx, task, index, trial, inputs, bufs, ref, cr: ConfigResult, stage: str) -> None:
    xp = ctx.backend.xp
    for a in task.arrays:
        if a.role == "in" and not arrays.bitwise_equal(xp, bufs[a.name].view, inputs[a.name]):
            raise Failure("wrong", f"{stage}: modified its input array {a.name!r}, which is read-only")
    for o in task.outputs:
        atol, rtol = task.tolerance_for(o.dtype, task.configs[index])
        got_all = arrays.as_values(xp, bufs[o.name].view, o.dtype)
        want_all = arrays.as_values(xp, ref[o.name], o.dtype)
        res = ctx.compare(got_all, want_all, atol, rtol)
        for key in ("max_abs_err", "max_rel_err"):
            v, old = res[key], getattr(cr, key)
            if v is not None:
                setattr(cr, key, v if old is None else max(v, old))
        if not res["ok"]:
            n = int(bufs[o.name].view.size)
            i = res["first_bad"]
            got = float(got_all.reshape(-1)[i])
            want = float(want_all.reshape(-1)[i])
            what = (f"has NaN/Inf at {res['nonfinite']} of {n} elements where the reference is finite"
                    if res["nonfinite"] else f"differs at {res['bad']} of {n} elements")
            err = "" if res["max_abs_err"] is None else f"; max abs err {res['max_abs_err']:.3g}"
            tol = f"atol {atol:g}, rtol {rtol:g}"
            if res.get("atol", atol) < atol:
                tol = (f"atol {res['atol']:.3g} (the task's {atol:g}, scaled to the reference's largest "
                       f"magnitude {res['scale']:.3g}), rtol {rtol:g}")
            empty = arrays.no_information(xp, got_all, {k: arrays.as_values(xp, v, _dtype_of(task, k))
                                                       for k, v in inputs.items()})
            empty = f"; the output {empty}, the reference is not" if empty else ""
            raise Failure("wrong", f"{stage}: output {o.name!r} {what} (first at index {i}: got {got:.6g}, "
                                   f"expected {want:.6g}{err}; {tol}{empty})")


def _dtype_of(task: Task, name: str) -> str:
    return next(a.dtype for a in task.arrays if a.name == name)


def _merge_launches(seen: list, new: list, index: int, limit: int = 32) -> None:
    """Adds the launches of config `index` not yet in `seen` (same kernel, grid, block, smem), tagged
    with the config; a kernel launched on some configs only (a tail kernel) is kept."""
    keys = {(r.get("kernel"), str(r.get("grid")), str(r.get("block")), r.get("smem")) for r in seen}
    for r in new:
        k = (r.get("kernel"), str(r.get("grid")), str(r.get("block")), r.get("smem"))
        if k not in keys and len(seen) < limit:
            keys.add(k)
            seen.append({**r, "config": index})


def evaluate_job(ctx: Context, job: dict) -> dict:
    task = Task.from_dict(job["task"])
    be = ctx.backend
    out = {"status": "ok", "error": "", "configs": [], "launches": [], "sticky": False, "setup_error": "",
           "seconds": {"run": 0.0, "time": 0.0}}
    t_start = time.perf_counter()
    failed = None
    lock = (job.get("timing") or {}).get("lock")
    try:
        lib, fn = ctx.entry(job["solution"], task, (job.get("symbols") or {}).get("solution"))
    except (LookupError, OSError, RuntimeError) as e:
        out.update(status="runtime_error", error=(str(e).splitlines() or ["cannot load the solution"])[0][:300])
        return out
    to_time = []  # (ConfigResult, args, inputs, scalars, env, bufs, module) of the correct configs, timed at the end
    for p in job["plan"]:
        index = p["index"]
        config = task.configs[index]
        cr = ConfigResult(index=index, config=dict(config))
        out["configs"].append(cr)
        if not p["run"] or failed:
            cr.skipped, cr.skip_reason = True, p.get("skip_reason") or "not run: an earlier config failed"
            continue
        env = config_env(config)
        try:
            pre = [None] * job["trials"]
            if p["reference"] == "c" and task.track != "torch2cuda" and lock:  # host work outside the lock
                pre = [_host_reference(ctx, task, job, index, trial_seed(job["seed"], index, trial))
                       for trial in range(job["trials"])]
            with gpu_lock(lock, shared=True, progress=ctx.progress):  # never while another worker times
                if p["reference"] == "oracle":
                    _verify_oracle(ctx, task, job, trial_seed(job["seed"], index, 99))
                for trial in range(job["trials"]):
                    seed = trial_seed(job["seed"], index, trial)
                    inputs = ref = bufs = args = module = None  # the last trial's arrays go before the next's come
                    ctx.progress(harness_stage(f"inputs and reference, config {index}, trial {trial}"))
                    inputs, ref, scal, module = _reference(ctx, task, job, index, p["reference"], seed, pre[trial])
                    stage = f"config {index} ({describe_config(config)}), trial {trial}"
                    bufs, args = _launch(ctx, lib, fn, task, env, inputs, scal, trial, stage)
                    if trial == 0:  # the launches of every config that ran, each distinct one once
                        _merge_launches(out["launches"], be.launches(lib), index)
                    _check_outputs(ctx, task, index, trial, inputs, bufs, ref, cr, stage)
            cr.correct = True
        except Failure as f:
            cr.correct, cr.error, failed = False, f.message, f
            out["sticky"] = out["sticky"] or f.sticky
            continue
        except SetupError as e:
            cr.correct, cr.error, failed = False, str(e), e
            out["setup_error"] = str(e)
            continue
        if be.can_time and job.get("timing") and not job["timing"].get("check_only") and ctx.timer is not None:
            to_time.append((cr, args, inputs, scal, env, bufs, module))  # its arrays stay alive until timed
        ref = inputs = bufs = args = module = None  # the expected outputs are not needed for timing
    if to_time and failed is None:  # every config is correct: time them all in one turn of the GPU lock
        t0 = time.perf_counter()
        # the launchers first, beside other workers' checks (a baseline's first call, under the shared lock, and
        # torch.compile, host work outside it, must not hold the exclusive turn)
        prepared: list = []
        for cr, args, inputs, scal, env, bufs, module in to_time:
            ctx.progress(harness_stage(f"timing config {cr.index}: preparing the baseline"))
            try:
                prepared.append(_timing_calls(ctx, task, job, fn, args, inputs, scal, env, cr.index, module))
            except Exception as e:  # noqa: BLE001 - reported below, where the config's measurement would be
                prepared.append(e)
        t_wait = time.perf_counter()
        with gpu_lock(lock, progress=ctx.progress):
            t_locked = time.perf_counter()  # diagnostics: the wait for the GPU lock, the time holding it
            for (cr, args, inputs, scal, env, bufs, module), prep in zip(to_time, prepared):
                try:
                    if isinstance(prep, Exception):
                        raise prep
                    _time_config(ctx, task, job, cr, prep)  # its keep_alive, kept alive in `prepared`
                    check_guards(task, bufs, f"config {cr.index} ({describe_config(cr.config)}), timing")
                    _check_floor(ctx, task, cr, env)
                except Failure as f:  # a failure that shows only under repetition
                    cr.correct, cr.error, failed = False, f.message, f
                    out["sticky"] = out["sticky"] or f.sticky
                    break
                except Exception as e:  # noqa: BLE001 - the measurement itself failed: keep the verdict, drop the time
                    cr.error = f"timing failed: {type(e).__name__}: {e}"[:300]
                    out["sticky"] = True
        t1 = time.perf_counter()
        if any(isinstance(p, baselines.Prepared) and p.compile_from == "measured" for p in prepared):
            baselines.forget_compiled()
        del prepared
        out["seconds"]["time"] += t1 - t0
        out["seconds"].update(timing_setup=t_wait - t0, lock_wait=t_locked - t_wait, lock_held=t1 - t_locked)
    del to_time
    out["seconds"]["run"] = time.perf_counter() - t_start - out["seconds"]["time"]
    out["seconds"].update(job.pop("_timing_seconds", {}))
    if out["setup_error"]:
        out.update(status="runtime_error", error="harness setup: " + out["setup_error"])
    elif isinstance(failed, Failure):
        out.update(status=failed.kind, error=failed.message)
    out["configs"] = [dataclasses.asdict(c) for c in out["configs"]]
    return out


def _timing_calls(ctx, task, job, fn, args, inputs, scal, env, index: int, module) -> baselines.Prepared:
    """The launchers to time on one config (kernels_harness.run.baselines.Prepared): the candidate's, then the
    dataset baseline's (its first run here, under the shared GPU lock) or PyTorch eager of the trial's `module`
    and torch.compile of it when asked and not already measured by the pool."""
    be = ctx.backend

    def candidate():
        return be.call(fn, args)
    if job.get("baseline"):
        lock = job["timing"].get("lock")
        with gpu_lock(lock, shared=True, progress=ctx.progress):
            blib, bfn = ctx.entry(job["baseline"], task, (job.get("symbols") or {}).get("baseline"))
            keep_alive, bargs = _launch(ctx, blib, bfn, task, env, inputs, scal, 0, "baseline")
        return baselines.Prepared(calls=[candidate, lambda: be.call(bfn, bargs)], keep_alive=keep_alive)
    if task.track == "torch2cuda" and module is not None:
        prep = baselines.torch_baselines(module, be.stream_ptr, job["timing"].get("lock"), index, job["timing"])
        prep.calls.insert(0, candidate)
        return prep
    return baselines.Prepared(calls=[candidate])


def _time_config(ctx, task, job, cr, prep: baselines.Prepared) -> None:
    """Times `prep.calls` (from _timing_calls) interleaved on the config's last trial inputs; the caller holds
    the exclusive turn of the GPU lock and keeps the baseline's arrays alive. Each repetition gets the call limit
    (the heartbeat), not the whole measurement."""
    be = ctx.backend
    stage = f"timing config {cr.index}"
    ctx.progress(stage)
    stats = ctx.timer.measure(prep.calls, progress=ctx.progress, heartbeat=lambda: ctx.progress(stage),
                              **job["timing"].get("params", {}))
    cr.time_ms, cr.time_iqr_ms, cr.reps = stats[0]["median_ms"], stats[0]["iqr_ms"], stats[0]["reps"]
    secs = job.setdefault("_timing_seconds", {})  # diagnostics: how each config's time was taken
    secs["timed_joined"] = secs.get("timed_joined", 0.0) + float(stats[0].get("join") == "stream")
    secs["sync_gap_ms"] = max(secs.get("sync_gap_ms", 0.0), float(stats[0].get("sync_gap_ms") or 0.0))
    if len(stats) > 1:
        cr.baseline_ms = stats[1]["median_ms"]
    cr.compile_baseline_from = prep.compile_from
    if prep.compile_error:  # the candidate's verdict and eager speedup stand; only this comparison is missing
        cr.error = f"torch.compile failed: {prep.compile_error}"[:300]
    if len(stats) > 2:
        cr.compile_baseline_ms = stats[2]["median_ms"]
    elif prep.compile_ms is not None:
        cr.compile_baseline_ms = prep.compile_ms
    try:
        be.synchronize()
    except DeviceError as e:
        raise Failure("runtime_error", f"timing config {cr.index}: {e}", sticky=True) from None


def _l2_bytes(be) -> int:
    try:
        return int(be.cp.cuda.Device().attributes.get("L2CacheSize", 60 << 20))
    except Exception:  # noqa: BLE001 - no L2 size reported: assume 60 MiB
        return 60 << 20


def _check_floor(ctx: Context, task: Task, cr: ConfigResult, env: dict) -> None:
    """Failure('hack') when the measured median is below the task's roofline floor on this device."""
    from kernels_harness.features import roofline
    if ctx.peaks is None:
        ctx.peaks = roofline.load_peaks()
    why = roofline.below_floor(task, env, cr.time_ms, ctx.peaks, _l2_bytes(ctx.backend),
                               flushed=getattr(ctx.timer, "flushes_l2", True))
    if why:
        raise Failure("hack", f"config {cr.index} ({describe_config(cr.config)}): {why}")


def run_reference_arrays(ctx: Context, task: Task, job: dict, index: int, seed: int):
    """(inputs, expected, scalars) of one trial; used by tests to inspect what the protocol compares against."""
    return _reference(ctx, task, job, index, job["plan"][index]["reference"], seed)[:3]
