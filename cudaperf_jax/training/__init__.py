"""The training core shared by SFT, RL and the ranker: what is trained (split_model, with_adapters), the optimizer
(make_optimizer), the one jitted step (make_train_step) and where arrays live (mesh_of, place)."""
from cudaperf_jax.models.lora import LoRAConfig
from cudaperf_jax.training.adapters import (
    base_param_dtype,
    next_dropout_key,
    with_adapters,
)
from cudaperf_jax.training.config import MeshConfig, OptimConfig
from cudaperf_jax.training.optimizer import make_optimizer, make_schedule
from cudaperf_jax.training.sharding import mesh_of, place, place_batch, shardings_of
from cudaperf_jax.training.state import run_state, split_model, state_bytes
from cudaperf_jax.training.step import (
    DROPOUT_RNG,
    TrainStep,
    init_opt_state,
    init_train_state,
    make_train_step,
    stack,
    stack_micro_batches,
)

__all__ = ["DROPOUT_RNG", "LoRAConfig", "MeshConfig", "OptimConfig", "TrainStep", "base_param_dtype",
           "init_opt_state", "init_train_state", "make_optimizer", "make_schedule", "make_train_step", "mesh_of",
           "next_dropout_key", "place", "place_batch", "run_state", "shardings_of", "split_model", "stack",
           "stack_micro_batches", "state_bytes", "with_adapters"]
