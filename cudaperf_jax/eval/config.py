"""The typed configuration of an evaluation (experiments/evaluate.py; experiments/configs/evaluate.py starts from its
defaults): a suite, the policy or solution files judged on it, how the policy samples (a rl.rollout.RolloutConfig,
every field of it), the harness and the report.

    cfg = from_configdict(EvalConfig, config)     # cudaperf_jax.experiment.config
"""
from __future__ import annotations

import dataclasses

from cudaperf_jax.experiment.config import ConfigFieldError
from cudaperf_jax.kernels import DecodeKernels
from cudaperf_jax.rl.rollout import RolloutConfig
from kernels_harness.run.timing import TimingParams

# How an evaluation times a correct candidate on each config (kernels_harness.run.timing.Timer.measure), beside
# PyTorch eager (interleaved, every candidate) and torch.compile (once per task and config, kernels_harness.run.
# baselines). The pool's own default (warm-up 3, 10 rounds at least, 0.25 s) is for dataset times; here: 2 warm-up
# calls and 5 rounds at least, then until the IQR is 2% of the median or 0.1 s has passed. KernelBench's largest
# configs take ms (eager, H200: level 1 median 4.6 ms), so a config costs ~0.1 s of the GPU's exclusive turn and a
# candidate ~0.4 s (the soak's 0.02 s budget left 2-3 samples of a 3 ms config; 0.1 s gives ~10-30). max_s: a
# candidate much slower than eager (seconds a call) is timed once after one warm-up instead of 7 times: its speedup
# is far below 1 either way, and the exclusive turn of the GPU it holds stops every other worker's checks.
EVAL_TIMING = TimingParams(warmup=2, min_reps=5, max_reps=100, budget_s=0.1, max_s=3.0)

SOURCES_MESSAGE = ("give exactly one of --config.solutions=DIR (solution files) or --config.model=PATH (a policy)")


@dataclasses.dataclass(frozen=True)
class EvalConfig:
    """One evaluation: what is judged, on which tasks, how, and what the report groups by."""
    seed: int = 0
    suite: str = "experiments/suites/smoke"  # a built dataset | a directory of task JSON files | a KernelBench dir
    split: str = ""                  # for a built dataset: the split to evaluate ("" = all)
    max_tasks: int = 0               # 0 = every task of the suite
    select: str = "first"            # with max_tasks: "first" tasks | "spread" (round-robin over families, balanced)
    kernelbench_cache: str = "data/kernelbench/tasks"   # imported KernelBench tasks reused when their source matches
    solutions: str = ""              # a directory of <task_id>.cu / <task_id>/<name>.cu (instead of a policy)
    model: str = ""                  # a policy: a model name, a run dir (adapters merged), a GGUF file, a HF
                                     # directory, or BASE+ADAPTER_DIR (a PEFT adapter on top of BASE)
    dtype: str = "float32"           # the policy's compute dtype
    rollout: RolloutConfig = RolloutConfig(samples_per_task=1, turns=1, temperature=0.7, top_p=0.95)
                                     # the policy's samples: samples_per_task (n of best-of-n, pass@k), turns (each
                                     # sees the harness feedback), max_new_tokens (the dataset's verified answers:
                                     # median 476 tokens, p90 965; 512 cut 42%), sampling, prompt, gen_batch
    decode_kernels: DecodeKernels = DecodeKernels()   # the sampler's decode kernels (see configs/rl.py)
    dedupe: bool = True              # judge each distinct (task, source) once; repeats take its verdict
    pass_k: tuple[int, ...] = (1, 2, 5, 10)   # pass@k for the k <= samples_per_task
    ranker: str = ""                 # a ranker checkpoint: best-of-n selected by Ranker.score as well
    group_by: str = "level"          # per-group table: "level" (KernelBench level, else family) | "family"
    backend: str = "auto"            # auto | cpu | cuda
    workers: int = 0                 # harness workers (0 = the pool's default)
    torch_compile: bool = True       # torch2cuda on cuda: also time torch.compile (speedup_compile, fast_p/compile)
    trials: int = 2                  # correctness trials per config (fresh inputs each)
    compile_workers: int = 0         # parallel nvcc builds (0 = the pool's default: one per core)
    call_timeout_s: float = 30.0     # the longest one call of the candidate may take (each correctness trial and
                                     # each timing repetition), else `timeout`. KernelBench eager on the largest
                                     # configs (H200 store): level 1 median 4.6 ms, p90 16 ms, max 186 ms; levels
                                     # 2-3 max 82 ms. 30 s lets a correct kernel 160x slower than the slowest eager
                                     # (6,000x the median) be judged correct (with a speedup of ~0.01); a kernel that
                                     # hangs costs a worker 30 s
    job_timeout_s: float = 300.0     # the longest a candidate may take in all (checks, references, waits for the
                                     # GPU, timing), else `timeout` (`unchecked` if in the harness's own work): each
                                     # config x trial is one call, timing 2 more a config once a call passes max_s,
                                     # so a kernel near the call limit on the largest config (~1/16 of it on the
                                     # next) needs ~4 x 30 s; 300 s bounds one slow on every config. KernelBench
                                     # ports bound a whole sample too (inspect_evals: 300 s, build and timed runs)
    timing: TimingParams = EVAL_TIMING   # repetitions of the timing (see EVAL_TIMING above)
    device_budget: float = 0.9       # cuda: the share of the GPU memory free when the harness started (after the
                                     # policy's JAX memory) that its jobs may reserve at once; a KernelBench job holds
                                     # ~2.6x its largest config's arrays (level 1: up to 17 GB), so on an 80 GB H100
                                     # beside JAX at 0.5 two such jobs cannot run together: they wait their turn
                                     # instead of running out of memory and being checked again alone (0: no budget)

    def __post_init__(self):
        if self.solutions and self.model:
            raise ValueError(SOURCES_MESSAGE)
        if self.select not in ("first", "spread"):
            raise ValueError(f"select={self.select!r}: choose first or spread")
        if self.group_by not in ("level", "family"):
            raise ValueError(f"group_by={self.group_by!r}: choose level or family")
        if self.backend not in ("auto", "cpu", "cuda"):
            raise ValueError(f"backend={self.backend!r}: choose auto, cpu or cuda")
        if self.dtype not in ("float32", "bfloat16"):
            raise ValueError(f"dtype={self.dtype!r}: choose float32 or bfloat16")
        if self.max_tasks < 0 or self.workers < 0 or self.compile_workers < 0 or self.trials < 2:
            raise ValueError("max_tasks, workers and compile_workers must be >= 0 (0: all / the default) and "
                             "trials >= 2 (fresh inputs catch cached results)")
        if not 0 <= self.device_budget <= 1:
            raise ValueError(f"device_budget={self.device_budget}: give a share between 0 and 1 (0: no budget)")
        if not 0 < self.call_timeout_s <= self.job_timeout_s:
            raise ValueError(f"call_timeout_s={self.call_timeout_s} and job_timeout_s={self.job_timeout_s}: give "
                             "0 < call_timeout_s <= job_timeout_s")
        if not self.pass_k or any(k < 1 for k in self.pass_k):
            raise ValueError(f"pass_k={self.pass_k!r}: give one or more k >= 1")

    def pool_kwargs(self) -> dict:
        """The HarnessPool arguments of this evaluation (backend, workers, limits, timing, torch.compile)."""
        return harness_kwargs(backend=self.backend, workers=self.workers, compile_workers=self.compile_workers,
                              trials=self.trials, call_timeout_s=self.call_timeout_s,
                              job_timeout_s=self.job_timeout_s, timing=self.timing, seed=self.seed,
                              torch_compile=self.torch_compile, device_budget=self.device_budget)

    def check_sources(self) -> None:
        """Raises ConfigFieldError unless exactly one of solutions and model is given (both empty: the default)."""
        if bool(self.solutions) == bool(self.model):
            raise ConfigFieldError(SOURCES_MESSAGE)


def harness_kwargs(*, backend: str, workers: int, compile_workers: int, trials: int, call_timeout_s: float,
                   job_timeout_s: float, timing: TimingParams, seed: int, torch_compile: bool,
                   device_budget: float) -> dict:
    """HarnessPool(**kwargs) of an evaluation (also benchmarks/zero_shot.py's flags); 0 workers: the pool's default.
    torch.compile is timed on cuda only (the resolved backend decides; on cpu nothing is timed)."""
    from kernels_harness.run.pool import resolve_backend
    from kernels_harness.run.pool_config import PoolConfig
    kw = {"backend": backend, "trials": trials, "call_timeout_s": call_timeout_s, "job_timeout_s": job_timeout_s,
          "timing_params": timing.as_kwargs(), "seed": seed,
          "torch_compile": torch_compile and resolve_backend(backend) == "cuda",
          "config": PoolConfig(device_budget=device_budget)}
    if workers:
        kw["workers"] = workers
    if compile_workers:
        kw["compile_workers"] = compile_workers
    return kw
