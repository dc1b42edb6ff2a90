"""What a candidate is timed against on cuda (worker side): PyTorch eager and torch.compile of a torch2cuda module.

Both run the module that made the config's last trial (kernels_harness.run.protocol), on that trial's input
tensors, which are already on the GPU (the candidate is timed on copies of the same inputs): nothing is built or
drawn again for timing. Eager is timed interleaved with the candidate in every job (drift cancels). torch.compile
is timed once per (task, config) per pool: the job carries the medians the pool already has
(`job["timing"]["compile_ms"]`, {config index: ms}) and a config found there is not compiled again; its
ConfigResult says "reused" (else "measured", or "failed" when torch.compile raised: the candidate is then timed
against eager alone). torch.compile's own work (tracing, Inductor, Triton builds) runs outside the GPU lock, so
other workers' checks and timing go on meanwhile; each compiled graph's first run (device work) holds the lock
shared (`locked_inductor`).
"""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class Prepared:
    """The launchers of one config's timing: calls[0] the candidate, calls[1] the baseline (a dataset task's CUDA
    baseline, or PyTorch eager), calls[2] torch.compile when measured here. keep_alive: what the launchers' raw
    pointers need. compile_ms / compile_from: the reused median, or how this job fares with torch.compile."""
    calls: list
    keep_alive: object = None
    compile_ms: float | None = None
    compile_from: str = ""
    compile_error: str = ""


def locked_inductor(lock_path: str | None, sync=None):
    """A torch.compile backend: inductor's default compile_fx, each compiled graph's first run (where
    inductor autotunes on the device) under the shared GPU lock; later runs call straight through."""
    from torch._inductor.compile_fx import compile_fx

    from kernels_harness.run.timing import gpu_lock

    def backend(gm, example_inputs):
        inner = compile_fx(gm, example_inputs)
        first = [True]

        def run(*args):
            if not first[0]:
                return inner(*args)
            with gpu_lock(lock_path, shared=True):
                out = inner(*args)
                if sync is not None:
                    sync()
            first[0] = False
            return out
        run._boxed_call = getattr(inner, "_boxed_call", False)
        return run
    return backend


def torch_call(model, inputs: list, stream_ptr: int):
    """A zero-argument launcher of `model(*inputs)` on the harness's CUDA stream (no autograd); returns 0."""
    import torch
    stream = torch.cuda.ExternalStream(stream_ptr)

    def call():
        with torch.no_grad(), torch.cuda.stream(stream):
            model(*inputs)
        return 0
    return call


def compiled_call(model, inputs: list, stream_ptr: int, lock_path: str | None):
    """torch.compile(model) as a launcher, compiled and run once here (outside the timed region); the compile runs
    outside the GPU lock, the first run of each compiled graph under its shared hold (if that backend fails,
    torch.compile's own, all under the shared hold). Raises what torch.compile raises."""
    import torch
    import torch._inductor.config as inductor_config

    from kernels_harness.run.timing import gpu_lock
    # compile in this process: with more threads Inductor starts a pool of compile processes that outlive the call,
    # and the worker kills a job's leftover children and blames the candidate ("solutions may not fork")
    inductor_config.compile_threads = 1
    try:
        call = torch_call(torch.compile(model, backend=locked_inductor(lock_path, torch.cuda.synchronize)), inputs,
                          stream_ptr)
        call()  # compiles here
    except Exception as e:
        if type(e).__name__ == "OutOfMemoryError":
            raise
        torch._dynamo.reset()
        with gpu_lock(lock_path, shared=True):
            call = torch_call(torch.compile(model), inputs, stream_ptr)
            call()
    torch.cuda.synchronize()
    return call


def torch_baselines(module, stream_ptr: int, lock_path: str | None, index: int, timing: dict) -> Prepared:
    """The eager launcher of `module` = (model, input tensors), and the torch.compile one unless the pool already
    has this config's compile median (timing["compile_ms"]) or it was not asked for (timing["torch_compile"]).
    The candidate's launcher is put first by the caller."""
    model, inputs = module
    prep = Prepared(calls=[torch_call(model, inputs, stream_ptr)])
    if not timing.get("torch_compile"):
        return prep
    known = (timing.get("compile_ms") or {}).get(index)
    if known is not None:
        prep.compile_ms, prep.compile_from = float(known), "reused"
        return prep
    try:
        prep.calls.append(compiled_call(model, inputs, stream_ptr, lock_path))
        prep.compile_from = "measured"
    except Exception as e:  # noqa: BLE001 - inductor fails on some modules (or runs out of memory): eager still counts
        prep.compile_from, prep.compile_error = "failed", f"{type(e).__name__}: {e}"[:200]
    return prep


def forget_compiled() -> None:
    """Drops torch.compile's caches (compiled graphs of modules no longer used) at the end of a job."""
    import sys
    if "torch" in sys.modules:
        try:
            sys.modules["torch"]._dynamo.reset()
        except Exception:  # noqa: BLE001, S110 - best-effort cache cleanup
            pass


class CompileMedians:
    """The pool's side: torch.compile medians by (task, config), from the jobs that measured them (thread-safe).

    `for_job(task)` -> {config index: ms} to put in a job's timing; `record(task, configs)` keeps the medians a
    finished job measured (the first one of each (task, config) stays: workers racing on a task's first candidates
    may each measure it, and later jobs all reuse the same value). A task is keyed by its id, module source and
    configs, so an edited task is measured again."""

    def __init__(self):
        import threading
        self._ms: dict[tuple, float] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _key(task) -> str:
        import hashlib
        import json
        text = json.dumps([task.id, task.source, task.configs], sort_keys=True, default=str)
        return hashlib.sha1(text.encode()).hexdigest()

    def for_job(self, task) -> dict[int, float]:
        key = self._key(task)
        with self._lock:
            return {i: ms for (k, i), ms in self._ms.items() if k == key}

    def record(self, task, configs: list) -> int:
        """Keeps the compile medians measured in a job (`configs`: ConfigResult dicts or objects); returns how many
        were new."""
        key, new = self._key(task), 0
        with self._lock:
            for c in configs:
                c = c if isinstance(c, dict) else c.__dict__
                if (c.get("compile_baseline_from") == "measured" and c.get("compile_baseline_ms")
                        and (key, c["index"]) not in self._ms):
                    self._ms[(key, c["index"])] = float(c["compile_baseline_ms"])
                    new += 1
        return new

    def __len__(self) -> int:
        return len(self._ms)
