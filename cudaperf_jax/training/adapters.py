"""What a run trains, from its `lora` section (cudaperf_jax.models.lora.LoRAConfig): the model to train, the nnx filter
of its trained variables, the storage dtype of its frozen base, and the dropout key of each step.

    model, tok = load_policy(path, dtype=cfg.dtype, param_dtype=base_param_dtype(cfg.lora, cfg.dtype, cfg.param_dtype))
    model, trained = with_adapters(model, cfg.lora, rngs=nnx.Rngs(cfg.seed))   # rank 0: (model, nnx.Param)
    graphdef, params, opt_state, rest = init_train_state(model, optimizer, trained=trained, mesh=mesh)
    rng, key = next_dropout_key(state["rng"], cfg.lora)     # every step; key is None when there is no dropout
    params, opt_state, m = step(params, opt_state, rest, batch, rng=key)

The one place where LoRA plugs into training: with rank > 0 the adapters (float32 nnx.LoRAParam) are added and the
filter is lora.ADAPTERS, so gradients, the optimizer state and the checkpoints hold only the adapters; the base
weights are `rest`, frozen in their storage dtype. Rank 0 trains every nnx.Param (a full fine-tune).
"""
from __future__ import annotations

import jax
from flax import nnx

from cudaperf_jax.models.lora import ADAPTERS, LoRAConfig, add_adapters


def base_param_dtype(lora: LoRAConfig, dtype: str, param_dtype: str) -> str:
    """The storage dtype to load the policy's weights in: param_dtype for a full fine-tune (the optimizer updates
    them); the compute dtype under LoRA (the base is frozen, so storing it wider than it is computed in buys nothing:
    bfloat16 on GPUs, half the memory; float32 on the CPU). The adapters are float32 either way."""
    return dtype if lora.on else param_dtype


def with_adapters(model: nnx.Module, lora: LoRAConfig, rngs: nnx.Rngs | None = None):
    """(the model to train, the nnx filter of what is trained): rank 0 -> (model unchanged, nnx.Param); rank > 0 ->
    (model with adapters added in place, lora.ADAPTERS). rngs: the adapters' initialisation (A as PEFT draws it,
    B zero, so the adapted model starts as the base); default nnx.Rngs(0)."""
    if not lora.on:
        return model, nnx.Param
    return add_adapters(model, lora, rngs or nnx.Rngs(0)), ADAPTERS


def next_dropout_key(rng: jax.Array, lora: LoRAConfig) -> tuple[jax.Array, jax.Array | None]:
    """(the run's RNG advanced by one step, this step's dropout key or None when lora has no dropout).

    rng: uint32[2] key data (checkpointed with the run's state, so a resumed run draws the same masks). Advanced
    every step whether or not it is used, so turning dropout on does not change anything else a step draws."""
    new, key = jax.random.split(rng)
    return new, (key if lora.on and lora.dropout > 0 else None)
