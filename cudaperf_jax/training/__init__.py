"""The training core shared by SFT, RL and the ranker: what is trained (split_model, with_adapters), the optimizer
(make_optimizer), the one jitted step (make_train_step) and where arrays live (mesh_of, place)."""
from cudaperf_jax.training.adapters import with_adapters
from cudaperf_jax.training.config import LoRAConfig, MeshConfig, OptimConfig
from cudaperf_jax.training.optimizer import make_optimizer, make_schedule
from cudaperf_jax.training.sharding import mesh_of, place, place_batch, shardings_of
from cudaperf_jax.training.state import split_model
from cudaperf_jax.training.step import (
    TrainStep,
    init_opt_state,
    init_train_state,
    make_train_step,
    stack,
    stack_micro_batches,
)

__all__ = ["LoRAConfig", "MeshConfig", "OptimConfig", "TrainStep", "init_opt_state", "init_train_state",
           "make_optimizer", "make_schedule", "make_train_step", "mesh_of", "place", "place_batch", "shardings_of",
           "split_model", "stack", "stack_micro_batches", "with_adapters"]
