"""The typed configuration of an RL run (experiments/configs/rl.py starts from its defaults, the production values).

    cfg = from_configdict(RLConfig, config)    # cudaperf_jax.experiment.config: unknown fields, types, validation
    cfg.rollout, cfg.reward, cfg.grpo, cfg.tasks, cfg.harness, cfg.mesh, cfg.lora, cfg.decode_kernels

Every section validates its own fields; RLConfig checks what spans sections. An error is one sentence naming the
field (ConfigFieldError).
"""
from __future__ import annotations

import dataclasses

from cudaperf_jax.kernels import DecodeKernels
from cudaperf_jax.models.attention import AttentionConfig
from cudaperf_jax.models.lora import LoRAConfig
from cudaperf_jax.rewards.unified import RewardConfig
from cudaperf_jax.rl.grpo import GRPOConfig
from cudaperf_jax.rl.rollout import RolloutConfig
from cudaperf_jax.training.config import MeshConfig

DTYPES = ("float32", "bfloat16")
BACKENDS = ("auto", "cpu", "cuda")


@dataclasses.dataclass(frozen=True)
class TasksConfig:
    """The training tasks: a directory of task JSON files (suite) or a built dataset (dataset)."""
    suite: str = ""                  # a directory of task JSON files ("" = use dataset)
    dataset: str = "data/tasks"      # a built dataset (kernels_harness.datasets), used when suite is ""
    split: str = "train"             # the tasks of this split ("" = all)
    max_tasks: int = 0               # at most this many tasks (0 = all)

    def __post_init__(self):
        if not (self.suite or self.dataset):
            raise ValueError("give suite (a directory of task files) or dataset (a built dataset)")
        if self.max_tasks < 0:
            raise ValueError(f"max_tasks={self.max_tasks}: use 0 (all) or a positive count")


@dataclasses.dataclass(frozen=True)
class HarnessConfig:
    """The harness pool that judges the candidates (kernels_harness.run.pool.HarnessPool)."""
    backend: str = "auto"            # auto | cpu | cuda
    workers: int = 0                 # execution worker processes (0 = the pool's default)
    compile_workers: int = 0         # parallel compilations (0 = the pool's default)
    seed: int = 0                    # seed of the harness's input generation
    call_timeout_s: float = 10.0     # the longest one call of a candidate may take (a correctness trial, a timing
                                     # repetition), else `timeout`. The dataset's CUDA baselines take milliseconds,
                                     # so 10 s still judges a kernel thousands of times slower; a step waits for its
                                     # slowest candidate (H100 2026-12-07, 1.5B: one step's harness 142 s, the rest
                                     # of the step 40 s, under the pool's 20 s / 600 s)
    job_timeout_s: float = 60.0      # the longest a candidate may take in all (every config's checks and timing)

    def __post_init__(self):
        if self.backend not in BACKENDS:
            raise ValueError(f"backend={self.backend!r}: choose one of {', '.join(BACKENDS)}")
        if self.workers < 0 or self.compile_workers < 0:
            raise ValueError("workers and compile_workers must be >= 0 (0: the pool's default)")
        if not 0 < self.call_timeout_s <= self.job_timeout_s:
            raise ValueError(f"call_timeout_s={self.call_timeout_s} and job_timeout_s={self.job_timeout_s}: give "
                             "0 < call_timeout_s <= job_timeout_s")

    def pool_kwargs(self) -> dict:
        """HarnessPool(**kwargs) of this config (0 workers: the pool's default)."""
        return {"backend": self.backend, "workers": self.workers or None,
                "compile_workers": self.compile_workers or None, "seed": self.seed,
                "call_timeout_s": self.call_timeout_s, "job_timeout_s": self.job_timeout_s}


@dataclasses.dataclass(frozen=True)
class RLConfig:
    """One multi-turn GRPO run: the policy, the tasks, rollouts, reward, update, where it runs."""
    seed: int = 0
    model: str = "default"           # an SFT run directory, a GGUF file, a HF directory, or "default"
    dtype: str = "bfloat16"          # policy compute dtype (float32 on the CPU)
    memory_fraction: float = 0.55    # XLA_PYTHON_CLIENT_MEM_FRACTION, set before JAX starts (rest: the harness);
                                     # 0 leaves JAX's default
    steps: int = 40                  # RL steps (one rollout + update each)
    tasks_per_step: int = 8          # tasks of a step (a seeded permutation of the task list, epoch after epoch)
    save_every: int = 1              # checkpoint every N steps (and after the last)
    export_policy: bool = True       # the final policy as a HF directory, WORKDIR/policy (adapters merged), and
                                     # under LoRA the adapter alone, WORKDIR/adapter (PEFT)
    export_merged: bool = True       # with LoRA and export_policy: False writes the adapter alone (no WORKDIR/policy)
    adapter_dtype: str = "float32"   # the PEFT adapter file's dtype (bfloat16 halves it)
    prompt_bucket: int = 64          # prompt and train lengths are padded to the sampler's ladder of this bucket
    decode_kernels: DecodeKernels = DecodeKernels()   # the rollout sampler's decode kernels
    attention: AttentionConfig = AttentionConfig()    # the update's and the reference pass's attention
                                                      # (models.attention; auto: Pallas flash on one GPU, else XLA)
    remat: bool = True               # the update recomputes each layer's activations in its backward pass (off:
                                     # ~1/3 fewer FLOPs, activations of every layer kept: size grpo.micro_batch for it)
    tasks: TasksConfig = TasksConfig()
    rollout: RolloutConfig = RolloutConfig()
    reward: RewardConfig = RewardConfig()
    grpo: GRPOConfig = GRPOConfig()
    harness: HarnessConfig = HarnessConfig()
    mesh: MeshConfig = MeshConfig()
    lora: LoRAConfig = LoRAConfig()  # rank 0: every parameter trained; rank r: adapters, base frozen (its reference)

    def __post_init__(self):
        if self.dtype not in DTYPES or self.adapter_dtype not in DTYPES:
            raise ValueError(f"dtype={self.dtype!r}, adapter_dtype={self.adapter_dtype!r}: choose among "
                             f"{', '.join(DTYPES)}")
        if not 0.0 <= self.memory_fraction < 1.0:
            raise ValueError(f"memory_fraction={self.memory_fraction}: must lie in [0, 1); 0 leaves JAX's default")
        for name in ("steps", "tasks_per_step", "save_every", "prompt_bucket"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)}: must be at least 1")
        if self.attention.implementation == "pallas" and self.mesh.devices > 1:
            raise ValueError("attention.implementation='pallas' runs on one device; on a mesh use cudnn, xla or auto")
        if self.grpo.advantage == "rloo" and self.rollout.samples_per_task < 2:
            raise ValueError("grpo.advantage='rloo' needs rollout.samples_per_task >= 2 (a leave-one-out baseline)")
