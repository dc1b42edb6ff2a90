"""The sections every training stage shares: the optimizer and the device mesh. What is trained is the `lora` section,
cudaperf_jax.models.lora.LoRAConfig (rank 0: a full fine-tune; see training.adapters).

    OptimConfig(learning_rate=5e-5, schedule="cosine", warmup_steps=20)   # training.optimizer.make_optimizer
    MeshConfig(data=1, fsdp=8, tensor=1)                                  # training.sharding.mesh_of

Each validates its fields in `__post_init__` with a one-sentence ValueError naming the field;
`cudaperf_jax.experiment.config.from_configdict` adds the section's name (`config.optim: ...`).
"""
from __future__ import annotations

import dataclasses

SCHEDULES = ("cosine", "linear", "constant")


@dataclasses.dataclass(frozen=True)
class OptimConfig:
    """AdamW with a linear warmup then a decay schedule, weight decay on matrices, global-norm clipping."""
    learning_rate: float = 5e-5           # peak learning rate (reached after warmup_steps)
    schedule: str = "cosine"              # cosine | linear | constant (after warmup)
    warmup_steps: int = 20                # linear warmup from learning_rate / warmup_steps to the peak
    end_lr_fraction: float = 0.1          # final learning rate / peak (cosine, linear)
    weight_decay: float = 0.0             # decoupled (AdamW), on matrices only (ndim >= 2)
    b1: float = 0.9
    b2: float = 0.95
    eps: float = 1e-8
    grad_clip: float = 1.0                # global norm of the gradients; 0 = off

    def __post_init__(self):
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate={self.learning_rate}: must be positive")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule={self.schedule!r}: choose one of {', '.join(SCHEDULES)}")
        if self.warmup_steps < 0:
            raise ValueError(f"warmup_steps={self.warmup_steps}: must be >= 0")
        if not 0 <= self.end_lr_fraction <= 1:
            raise ValueError(f"end_lr_fraction={self.end_lr_fraction}: must be in [0, 1]")
        if self.weight_decay < 0 or self.grad_clip < 0:
            raise ValueError("weight_decay and grad_clip must be >= 0 (0: off)")
        if not (0 <= self.b1 < 1 and 0 <= self.b2 < 1 and self.eps > 0):
            raise ValueError("b1 and b2 must be in [0, 1) and eps > 0")


@dataclasses.dataclass(frozen=True)
class MeshConfig:
    """The device mesh of a run (axes data, fsdp, tensor; cudaperf_jax.models.sharding). Sizes 0 and 1 both mean one
    device on that axis; all of them 1: no mesh, the run's arrays on the default device."""
    data: int = 1                         # data-parallel replicas (the batch is split over data x fsdp)
    fsdp: int = 1                         # parameters, gradients and optimizer state sharded over this axis
    tensor: int = 1                       # attention heads / MLP columns split over this axis

    def __post_init__(self):
        for name in ("data", "fsdp", "tensor"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}={getattr(self, name)}: a mesh size is >= 0 (0 and 1: one device)")

    @property
    def devices(self) -> int:
        """Devices the mesh spans (1: no mesh)."""
        return max(self.data, 1) * max(self.fsdp, 1) * max(self.tensor, 1)
