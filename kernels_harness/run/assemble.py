"""Planning configs before a run and building the EvalResult after it (pool side, plain data)."""
from __future__ import annotations

import math

from kernels_harness.feedback import make_feedback
from kernels_harness.result import ConfigResult, EvalResult
from kernels_harness.tasks.schema import Task, config_env


def plan_configs(task: Task, backend: str, cpu_budget_bytes: int, cref_max_bytes: int, cref_max_flops: float,
                 have_c: bool, have_oracle: bool, cpu_budget_flops: float = 1e9) -> list[dict]:
    """Run order (smallest arrays first) and, per config, whether it runs and what it is checked against.

    Returns [{"index", "run", "skip_reason", "reference": "c" | "oracle" | "torch"}]. On cpu, configs
    whose arrays exceed `cpu_budget_bytes` or whose task FLOPs exceed `cpu_budget_flops` are skipped (the
    smallest too: a config too large for the budget is never judged by running it anyway; when none is
    left the verdict is `unchecked`); the (native) C reference is used whenever there is one.
    On cuda, configs above `cref_max_bytes` / `cref_max_flops` use the verified implementation.
    """
    sizes = {i: task.config_bytes(config_env(c)) for i, c in enumerate(task.configs)}
    plan = []
    for rank, i in enumerate(sorted(sizes, key=lambda k: (sizes[k], k))):
        env = config_env(task.configs[i])
        nbytes, flops = sizes[i], task.flops_at(env)
        p = {"index": i, "run": True, "skip_reason": "", "reference": "c"}
        if task.track == "torch2cuda":
            p["reference"] = "torch"
        elif have_oracle and (not have_c or (backend != "cpu" and (nbytes > cref_max_bytes
                                                                    or (flops and flops > cref_max_flops)))):
            p["reference"] = "oracle"
        elif not have_c:
            p.update(run=False, skip_reason="skipped: the task has no C reference and no implementation to check against")
        if backend == "cpu" and nbytes > cpu_budget_bytes:
            p.update(run=False, skip_reason=f"skipped on the cpu backend: {nbytes / 2**20:.1f} MiB of arrays "
                                            f"exceeds the budget of {cpu_budget_bytes / 2**20:.1f} MiB")
        elif backend == "cpu" and flops > cpu_budget_flops:
            p.update(run=False, skip_reason=f"skipped on the cpu backend: {flops:.3g} FLOPs exceeds the budget "
                                            f"of {cpu_budget_flops:.3g}")
        plan.append(p)
    return plan


DEVICE_SLACK = 256 << 20


def job_device_bytes(task: Task, plan: list[dict]) -> int:
    """An estimate of the most device memory a job of `task` holds at once, over the configs `plan` runs
    (kernels_harness.run.pool_config.DeviceBudget reserves it). Against the largest config's arrays B: torch2cuda,
    the module's tensors (inputs and outputs, shared with the checks) and the candidate's guarded copies (2B), plus
    an eager output while timing; c2cuda, inputs, the reference's outputs, the oracle's and the candidate's arrays
    (3B). Plus the last trial's arrays of the smaller configs, kept for timing (~1.5x their sum, ~0.1 of all)."""
    sizes = {p["index"]: task.config_bytes(config_env(task.configs[p["index"]])) for p in plan if p["run"]}
    if not sizes:
        return DEVICE_SLACK
    big = max(sizes, key=sizes.get)
    if task.track == "torch2cuda":
        env = config_env(task.configs[big])
        out = sum(_count(task.shape(a, env)) * a.itemsize for a in task.outputs)
        peak = 2 * sizes[big] + out
    else:
        peak = 3 * sizes[big]
    return int(peak + 0.1 * sum(sizes.values())) + DEVICE_SLACK


def _count(shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def failed_before_run(task: Task, backend: str, status: str, violations=(), compile_log: str = "",
                      seconds: dict | None = None) -> EvalResult:
    """The result of a candidate stopped by the static checks (`hack`) or the compiler."""
    res = EvalResult(task_id=task.id, backend=backend, status=status, compiled=False,
                     compile_log=compile_log, violations=list(violations), seconds=dict(seconds or {}))
    res.configs = [ConfigResult(index=i, config=dict(c), skipped=True, skip_reason=f"not run: {status}")
                   for i, c in enumerate(task.configs)]
    res.feedback = make_feedback(task, res)
    return res


def geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def assemble(task: Task, source: str, backend: str, build: dict, out: dict, seed: int, seconds: dict,
             features: bool = True) -> EvalResult:
    """EvalResult from the build record and the worker's (or the pool's) run record."""
    res = EvalResult(task_id=task.id, backend=backend, status=out.get("status", "runtime_error"), compiled=True,
                     compile_log=build.get("log", ""), resources=dict(build.get("resources") or {}), seed=seed,
                     launches=list(out.get("launches") or []), error=out.get("error", ""))
    res.configs = sorted((c if isinstance(c, ConfigResult) else ConfigResult(**c) for c in out.get("configs", [])),
                         key=lambda c: c.index)
    ran = [c for c in res.configs if not c.skipped]
    if res.status == "ok" and not ran:
        reasons = sorted({c.skip_reason for c in res.configs if c.skip_reason})
        res.status = "unchecked"
        res.error = ("no config could be checked on the " + backend + " backend: "
                     + ("; ".join(reasons) if reasons else "none was run"))[:300]
    res.correct = res.status == "ok" and all(c.correct for c in ran)
    if backend == "cuda" and res.correct:
        res.speedup = geomean([c.baseline_ms / c.time_ms for c in ran if c.time_ms and c.baseline_ms])
    res.seconds = {**seconds, **{k: v for k, v in (out.get("seconds") or {}).items() if k != "worker"}}
    if features:
        try:
            from kernels_harness import features as features_lib
        except Exception:  # noqa: BLE001 - e.g. tree-sitter missing on a GPU image: results come without features
            features_lib = None
        if features_lib is not None and hasattr(features_lib, "analyse"):
            try:
                f = features_lib.analyse(task, source, res, compile=False)  # resources come from the build
                res.features = f.to_dict() if hasattr(f, "to_dict") else dict(f)
            except Exception as e:  # noqa: BLE001 - a feature failure never breaks a verdict
                res.features = {"error": f"{type(e).__name__}: {e}"[:200]}
    res.feedback = make_feedback(task, res)
    return res


def infra_failure(res: EvalResult) -> bool:
    """A failure of the harness or the machine, not of the candidate: an exception in the harness's own code
    (its allocations of inputs and outputs on a device whose memory other processes hold, say), or no worker."""
    return res.status == "runtime_error" and (res.error.startswith("harness error")
                                              or res.error.startswith("no execution worker could be started"))


def not_judged(why: str) -> str:
    return (f"not judged, the harness failed ({why.splitlines()[0] if why else 'no detail'})"[:260]
            + "; not the candidate's failure, no reward either way")


def lost_configs(task: Task, plan: list, lost) -> list:
    """Config records after a lost worker: the config named in its last stage failed, earlier ones
    are unknown (not reported), later ones were not run."""
    out = []
    hit = None
    for p in plan:
        if f"config {p['index']} " in lost.stage + " " or lost.stage.startswith(f"timing config {p['index']}"):
            hit = p["index"]
    for p in plan:
        cr = ConfigResult(index=p["index"], config=dict(task.configs[p["index"]]))
        if p["index"] == hit:
            cr.correct, cr.error = False, lost.message
        else:
            cr.skipped, cr.skip_reason = True, p.get("skip_reason") or f"not finished: {lost.kind}"
        out.append(cr.__dict__)
    return out
