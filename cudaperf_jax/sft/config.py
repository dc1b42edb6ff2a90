"""The typed configuration of an SFT run (experiments/configs/sft.py starts from its defaults, the production values:
one H200, bf16 compute over float32 weights, 6 packed rows of 3072 tokens per step).

    cfg = from_configdict(SFTConfig, config)   # cudaperf_jax.experiment.config: unknown fields, types, validation
    cfg.data, cfg.optim, cfg.mesh, cfg.lora

Every section validates its own fields (one sentence naming the field, ConfigFieldError).
"""
from __future__ import annotations

import dataclasses

from cudaperf_jax.experiment.config import ConfigFieldError
from cudaperf_jax.models.attention import AttentionConfig
from cudaperf_jax.models.lora import LoRAConfig
from cudaperf_jax.prompts import DEFAULT as DEFAULT_PROMPT
from cudaperf_jax.training.config import MeshConfig, OptimConfig

RESPONSES = ("fastest", "all_correct", "baseline")
DTYPES = ("float32", "bfloat16")
TRACKS = ("c2cuda", "torch2cuda")

__all__ = ["DataConfig", "OptimConfig", "SFTConfig", "SFTConfigError"]


class SFTConfigError(ConfigFieldError):
    """A field of the SFT config (or the data it selects) that cannot be used; the message says which and what to
    pass."""


def _check(ok: bool, msg: str):
    if not ok:   # from_configdict names the section: "config.data: seq_len=8: ..."
        raise ValueError(msg)


@dataclasses.dataclass(frozen=True)
class DataConfig:
    """Which examples, and how they are packed into rows of `seq_len` tokens."""
    dataset_seed: int = 0                 # seed of kernels_harness.datasets.registry.generate
    tracks: tuple[str, ...] = TRACKS
    families: tuple[str, ...] = ()        # () = every family of the tracks
    responses: str = "fastest"            # fastest | all_correct | baseline (see data.pick_implementations)
    refine: float = 0.5                   # fraction of answers also taught as a refinement turn (earlier answer +
                                          # feedback, see sft.data)
    prompt: str = DEFAULT_PROMPT          # the prompt variant posing the tasks (cudaperf_jax.prompts.PROMPTS)
    times: str = "data/times/h200"        # measured times store (kernels_harness.datasets.times)
    max_train_tasks: int = 0              # 0 = all train tasks
    max_val_tasks: int = 0                # 0 = all val tasks
    shuffle_seed: int = 0                 # example order before packing and row order per epoch
    seq_len: int = 3072                   # tokens per packed row; longer examples are dropped (counted): 2048
                                          # dropped 522 of the 5,135 train examples (67 single-turn), 3072 drops 53
    batch_rows: int = 6                   # packed rows per step (~18k tokens)
    micro_rows: int = 0                   # rows per micro-batch (the step accumulates batch_rows / micro_rows of
                                          # them inside one jitted program); 0 = batch_rows
    val_rows: int = 0                     # packed val rows evaluated (0 = all)

    def __post_init__(self):
        _check(self.responses in RESPONSES, f"responses={self.responses!r}: choose one of {', '.join(RESPONSES)}")
        _check(0.0 <= self.refine <= 1.0, f"refine={self.refine}: give a fraction between 0 and 1")
        from cudaperf_jax.prompts import PROMPTS
        _check(self.prompt in PROMPTS, f"prompt={self.prompt!r}: choose one of {', '.join(sorted(PROMPTS))}")
        _check(bool(self.tracks) and all(t in TRACKS for t in self.tracks),
               f"tracks={self.tracks!r}: give one or both of {', '.join(TRACKS)}")
        _check(self.seq_len >= 16, f"seq_len={self.seq_len}: need at least 16 tokens per row")
        _check(self.batch_rows >= 1, f"batch_rows={self.batch_rows}: need at least 1 row per step")
        _check(self.micro_rows >= 0 and (self.micro_rows == 0 or self.batch_rows % self.micro_rows == 0),
               f"micro_rows={self.micro_rows}: use 0 (no accumulation) or a divisor of batch_rows={self.batch_rows}")
        for name in ("max_train_tasks", "max_val_tasks", "val_rows"):
            _check(getattr(self, name) >= 0, f"{name}={getattr(self, name)}: use 0 (all) or a positive count")

    @property
    def micro_batches(self) -> int:
        """Micro-batches per step."""
        return self.batch_rows // (self.micro_rows or self.batch_rows)


@dataclasses.dataclass(frozen=True)
class SFTConfig:
    """One SFT run: the policy, the data, the optimiser, where it runs, how long, what is written."""
    seed: int = 0
    model: str = "default"                # a model name (assets list) | a .gguf file | a HF directory | an SFT run
    dtype: str = "bfloat16"               # compute dtype (float32 on the CPU)
    param_dtype: str = "float32"          # storage dtype of the trained weights (and of Adam's moments) at lora.rank
                                          # 0; with LoRA the frozen base is stored in `dtype`, the adapters in float32
    steps: int = 300                      # ~2/3 of an epoch of the train split's ~3,400 fastest implementations
    eval_every: int = 50                  # validation loss every N steps (and after the last)
    early_stop_patience: int = 0          # stop after this many validations in a row that do not lower the best
                                          # val loss by early_stop_min_delta (the stop is checkpointed; a rerun
                                          # stays stopped); 0 = run every step
    early_stop_min_delta: float = 0.0     # the smallest val-loss decrease that counts as an improvement
    checkpoint_every: int = 25            # Orbax checkpoint every N steps (and after the last)
    keep_checkpoints: int = 2
    remat: bool = True                    # recompute layer activations in the backward pass
    attention: AttentionConfig = AttentionConfig()   # the training forward's attention (models.attention): auto =
                                          # the Pallas flash kernel on one GPU (causal + segment ids), XLA elsewhere
    export: bool = True                   # write a Hugging Face directory to <workdir>/export at the end (adapters
                                          # merged) and, with LoRA, the adapter alone to <workdir>/adapter (PEFT)
    export_merged: bool = True            # with LoRA and export: False writes the adapter alone (no merged copy)
    export_dtype: str = "bfloat16"
    adapter_dtype: str = "float32"        # the PEFT adapter file's dtype (bfloat16 halves it)
    progress: bool = True                 # tqdm bar
    data: DataConfig = DataConfig()
    optim: OptimConfig = OptimConfig()
    mesh: MeshConfig = MeshConfig()
    lora: LoRAConfig = LoRAConfig()

    def __post_init__(self):
        _check(all(d in DTYPES for d in (self.dtype, self.param_dtype, self.export_dtype, self.adapter_dtype)),
               f"dtype, param_dtype, export_dtype and adapter_dtype must be one of {', '.join(DTYPES)}")
        _check(self.steps >= 1, f"steps={self.steps}: need at least 1 step")
        _check(self.eval_every >= 1 and self.checkpoint_every >= 1 and self.keep_checkpoints >= 1,
               "eval_every, checkpoint_every and keep_checkpoints must be >= 1")
        _check(not (self.attention.implementation == "pallas" and self.mesh.devices > 1),
               "attention.implementation='pallas' runs on one device; on a mesh use cudnn, xla or auto")
        _check(self.early_stop_patience >= 0 and self.early_stop_min_delta >= 0,
               "early_stop_patience and early_stop_min_delta must be >= 0 (patience 0: no early stop)")
