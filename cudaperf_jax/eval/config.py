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
    trials: int = 2                  # timing trials per config

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
        if self.max_tasks < 0 or self.workers < 0 or self.trials < 1:
            raise ValueError("max_tasks and workers must be >= 0 (0: all / the default) and trials >= 1")
        if not self.pass_k or any(k < 1 for k in self.pass_k):
            raise ValueError(f"pass_k={self.pass_k!r}: give one or more k >= 1")

    def check_sources(self) -> None:
        """Raises ConfigFieldError unless exactly one of solutions and model is given (both empty: the default)."""
        if bool(self.solutions) == bool(self.model):
            raise ConfigFieldError(SOURCES_MESSAGE)
