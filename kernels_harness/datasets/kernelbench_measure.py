"""One KernelBench problem's eager and torch.compile times (worker side of kernelbench_times).

Per config: the module and its inputs are built on the device (torch_values(build_on_device=True): GiB
inputs drawn on the GPU, not the CPU), run once eagerly (warm-up; its outputs are the reference for
`agrees`), compiled where asked, and both calls are timed together by the harness Timer (interleaved,
L2 flushed, device-wide sync, median and IQR) under the exclusive GPU lock, at a raised CPU priority
where the process may raise it.

Sharing one GPU between worker processes: torch.compile's CPU work (tracing, lowering, Triton builds)
runs outside every lock, so workers compile in parallel; everything that runs on the GPU outside the
timed region (building inputs, the eager warm-up, each compiled graph's first run with its autotuning,
the agreement check) holds the lock shared, so it never overlaps another worker's timed region. The
device bytes of a config (a multiple of the task's array bytes) are reserved in a MemoryLedger first.
"""
from __future__ import annotations

import contextlib
import os
import time

from kernels_harness.run.baselines import locked_inductor

IMPLS = ("torch_eager", "torch_compile")
MEM_FACTOR = 4        # eager outputs, compiled outputs and intermediates, against the task's array bytes
MEM_SLACK = 1 << 30


class OutOfTime(Exception):
    """The run's deadline passed before the task was finished (no record is written)."""


class NeedsGpuAlone(Exception):
    """Out of device memory while sharing the GPU: measure the task again with no other worker."""


class WallTimer:
    """The Timer protocol on the CPU (perf_counter per call): `--device cpu` dry runs and tests."""
    flushes_l2 = False
    join, gap_limit_ms = "device", None   # Timer.measure's device-wide protocol: one time per repetition

    def once(self, call) -> float:
        t0 = time.perf_counter()
        call()
        return (time.perf_counter() - t0) * 1e3

    def pair(self, call) -> tuple[float, float]:
        ms = self.once(call)
        return ms, ms

    def _pick(self, joined, synced, mode):
        from kernels_harness.run.timing import Timer
        return Timer._pick(self, joined, synced, mode)

    def measure(self, calls, lock_path=None, **params):
        from kernels_harness.run.timing import Timer
        return Timer.measure(self, calls, lock_path=lock_path, **params)


@contextlib.contextmanager
def timing_priority(nice: int = -10):
    """The calling thread at a higher CPU priority (where allowed, e.g. as root) while it times, so the other
    workers' compiles do not delay its kernel launches inside the timed region; unchanged where not allowed."""
    try:
        before = os.getpriority(os.PRIO_PROCESS, 0)
        os.setpriority(os.PRIO_PROCESS, 0, nice)
    except OSError:
        yield
        return
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, 0, before)


def _flat(out) -> list:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def outputs_agree(got, want, atol: float, rtol: float, chunk: int = 1 << 26) -> bool:
    """allclose of every output pair, in chunks of `chunk` elements (no full-size temporaries)."""
    import torch
    got, want = _flat(got), _flat(want)
    if len(got) != len(want):
        return False
    for g, w in zip(got, want):
        if not isinstance(w, torch.Tensor):
            if g != w:
                return False
            continue
        if not isinstance(g, torch.Tensor) or g.shape != w.shape:
            return False
        g, w = g.reshape(-1), w.reshape(-1)
        for i in range(0, w.numel(), chunk):
            if not torch.allclose(g[i:i + chunk].float(), w[i:i + chunk].float(), atol=atol, rtol=rtol,
                                  equal_nan=True):
                return False
    return True


class Measurer:
    """Times tasks in one worker process. device: "cuda" (Timer on the harness's CUDA stream) or "cpu"."""

    def __init__(self, device: str, lock_path: str | None, ledger=None, timing: dict | None = None,
                 compile_which: str = "largest", max_config_bytes: float = float("inf"),
                 deadline: float = float("inf"), alone: bool = False):
        from kernels_harness.run.references import _import_torch
        self.torch = _import_torch()
        self.device, self.lock, self.ledger = device, lock_path, ledger
        self.timing = {"min_iqr_ms": 0.0, **(timing or {})}  # the dataset's protocol: no IQR floor
        self.compile_which, self.max_config_bytes = compile_which, max_config_bytes
        self.deadline, self.alone = deadline, alone
        if device == "cuda":
            from kernels_harness.run.backends import CudaBackend
            from kernels_harness.run.device_kernels import make_flush
            from kernels_harness.run.timing import Timer
            self.be = CudaBackend(0)
            self.timer = Timer(self.be, make_flush(self.be)[0], join="device")  # every stream drained, as before
            self.stream = self.torch.cuda.ExternalStream(self.be.stream_ptr)
        else:
            self.be, self.timer, self.stream = None, WallTimer(), None

    # ---- helpers ---------------------------------------------------------------------------------
    def _sync(self):
        if self.device == "cuda":
            self.torch.cuda.synchronize()

    def _ctx(self):
        torch = self.torch
        stack = contextlib.ExitStack()
        stack.enter_context(torch.no_grad())
        if self.stream is not None:
            stack.enter_context(torch.cuda.stream(self.stream))
        return stack

    def _call(self, model, inputs):
        def call():
            with self._ctx():
                model(*inputs)
            return 0
        return call

    def _free(self):
        import gc
        gc.collect()
        if self.device == "cuda":
            self.torch.cuda.empty_cache()

    def _is_oom(self, e: BaseException) -> bool:
        oom = getattr(self.torch, "OutOfMemoryError", None) or getattr(self.torch.cuda, "OutOfMemoryError", ())
        return isinstance(e, oom) or "out of memory" in str(e).lower()

    # ---- one task --------------------------------------------------------------------------------
    def measured_configs(self, task) -> list[int]:
        return [ci for ci, c in enumerate(task.configs) if task.config_bytes(c) <= self.max_config_bytes]

    def measure_task(self, task) -> dict:
        """One results.jsonl record: time_ms/iqr_ms/agrees [config][impl] (None where not measured)."""
        rec = {"task": task.id, "family": task.family, "track": task.track, "split": task.split or "kernelbench",
               "impls": list(IMPLS), "strategies": [["pytorch_eager"], ["torch_compile"]],
               "expected": ["correct", "correct"], "baseline": 0,
               "configs": [c.get("name", str(i)) for i, c in enumerate(task.configs)],
               "level": task.extra.get("level"), "time_ms": [], "iqr_ms": [], "agrees": [], "errors": []}
        todo = self.measured_configs(task)
        compiled = {"all": set(todo), "largest": set(todo[-1:]), "none": set()}[self.compile_which]
        try:
            for ci, config in enumerate(task.configs):
                row = ([None, None], [None, None], [None, None])
                if ci not in todo:
                    rec["errors"].append(f"config {ci}: not measured ({task.config_bytes(config) / 2**30:.2f} GiB "
                                         "of arrays, over --max_config_gib)")
                elif time.time() > self.deadline:
                    raise OutOfTime(task.id)
                else:
                    row = self.measure_config(task, config, ci, ci in compiled, rec["errors"])
                for key, vals in zip(("time_ms", "iqr_ms", "agrees"), row):
                    rec[key].append(vals)
        finally:
            self.torch._dynamo.reset()
            self._free()
        return rec

    def measure_config(self, task, config, ci: int, compiled: bool, errors: list) -> tuple:
        """([eager ms, compile ms], [iqrs], [1, agrees]) of one config; errors appended as text."""
        from kernels_harness.run.references import torch_values
        from kernels_harness.run.timing import gpu_lock
        row_t, row_q, row_a = [None, None], [None, None], [None, None]
        need = MEM_FACTOR * task.config_bytes(config) + MEM_SLACK
        hold = self.ledger.reserve(need, self.deadline) if self.ledger is not None else contextlib.nullcontext()
        try:
            with hold:
                with gpu_lock(self.lock, shared=True), self._ctx():
                    vals = torch_values(task, config, 0, device=self.device, build_on_device=True)
                    self._sync()
                model, inputs = vals["__model__"], vals["__inputs__"]
                calls = [self._call(model, inputs)]
                del vals
                if compiled:
                    self._compile(task, model, inputs, calls, row_a, ci, errors)
                with timing_priority():
                    stats = self.timer.measure(calls, lock_path=self.lock, **self.timing)
                for k, s in enumerate(stats):
                    row_t[k], row_q[k] = s["median_ms"], s["iqr_ms"]
                row_a[0] = 1
                del calls, model, inputs
        except (OutOfTime, NeedsGpuAlone):
            raise
        except TimeoutError:
            raise OutOfTime(task.id) from None
        except Exception as e:  # noqa: BLE001 - a module that fails here is recorded, the run goes on
            if self._is_oom(e) and not self.alone:
                raise NeedsGpuAlone(f"config {ci}: {type(e).__name__}") from None
            errors.append(f"config {ci}: {type(e).__name__}: {str(e)[:300]}")
        finally:
            self._free()
        return row_t, row_q, row_a

    def _compile(self, task, model, inputs, calls, row_a, ci, errors) -> None:
        from kernels_harness.run.timing import gpu_lock
        torch = self.torch
        try:
            try:
                cmodel = torch.compile(model, backend=locked_inductor(self.lock, self._sync))
                with self._ctx():
                    got = cmodel(*inputs)  # compiles here (no lock), first run under the shared lock
            except Exception as e:  # then inductor as torch.compile calls it, without the lock
                if self._is_oom(e):
                    raise
                torch._dynamo.reset()
                cmodel = torch.compile(model)
                with self._ctx():
                    got = cmodel(*inputs)
                errors.append(f"config {ci}: compiled without the GPU lock (with it: {type(e).__name__}: "
                              f"{str(e)[:150]})")
            atol, rtol = task.tolerance_for("float32", task.configs[ci])
            with gpu_lock(self.lock, shared=True), self._ctx():
                want = model(*inputs)
                row_a[1] = int(outputs_agree(got, want, max(atol, 1e-3), max(rtol, 1e-3)))
            del got, want
            calls.append(self._call(cmodel, inputs))
        except Exception as e:  # noqa: BLE001 - inductor fails on some modules: eager still counts
            if self._is_oom(e) and not self.alone:
                raise NeedsGpuAlone(f"config {ci}: torch.compile: {type(e).__name__}") from None
            errors.append(f"config {ci}: torch.compile failed: {type(e).__name__}: {str(e)[:200]}")
            torch._dynamo.reset()
