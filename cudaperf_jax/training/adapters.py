"""What a run trains, from its `lora` section: the model to train and the nnx filter of its trained variables.

    model, trained = with_adapters(model, cfg.lora)       # rank 0: (model, nnx.Param), a full fine-tune
    graphdef, params, opt_state, rest = init_train_state(model, optimizer, trained=trained, mesh=mesh)

The one place where LoRA plugs in: with rank > 0 this adds the adapters (cudaperf_jax.models.lora) and returns
nnx.LoRAParam, so gradients and the optimizer state hold only the adapters and the base weights are `rest`.
"""
from __future__ import annotations

from flax import nnx

from cudaperf_jax.experiment.config import ConfigFieldError
from cudaperf_jax.training.config import LoRAConfig


def with_adapters(model: nnx.Module, lora: LoRAConfig):
    """(the model to train, the nnx filter of what is trained)."""
    if lora.rank == 0:
        return model, nnx.Param
    raise ConfigFieldError(f"config.lora: rank={lora.rank} needs the LoRA adapters (cudaperf_jax.models.lora), which "
                           "this build does not have yet; use lora.rank=0 (a full fine-tune)")
