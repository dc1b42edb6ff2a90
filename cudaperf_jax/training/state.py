"""Which parameters a step trains (the model split into its trained state and the rest), and what a run
checkpoints: only what it trains, with the optimizer state, the RNG and the step.

    graphdef, params, rest = split_model(model, trained)
    state = run_state(params, opt_state, seed)          # {"params", "opt_state", "rng", "step"}: run.save(step, state)
    state_bytes(jax.eval_shape(...))                     # its size, from shapes alone
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx


def split_model(model: nnx.Module, trained=nnx.Param):
    """(graphdef, params: nnx.State of the `trained` variables, rest: every other variable).

    trained: an nnx filter; nnx.Param trains every parameter (a full fine-tune), nnx.LoRAParam only the adapters
    (the base weights then sit in `rest`: LoRAParam is a subclass of Param, so the trained filter is applied first)."""
    return nnx.split(model, trained, ...)


def run_state(params, opt_state, seed: int) -> dict:
    """The checkpointed state of a training run at its start: {"params": the trained variables (the adapters under
    LoRA, every parameter at rank 0), "opt_state": the optimizer's state over them, "rng": uint32[2] key data (the
    run's RNG, advanced every step: dropout masks, rollout seeds), "step": int32[] (the last finished step, -1 before
    the first; a run's data position is a function of it)}. The frozen rest (the LoRA base) is not in it: the run
    directory's policy.json says how to rebuild it."""
    return {"params": params, "opt_state": opt_state, "rng": jax.random.PRNGKey(seed), "step": jnp.int32(-1)}


def state_bytes(tree) -> int:
    """Bytes of the arrays of `tree` (concrete or abstract: jax.ShapeDtypeStruct leaves)."""
    return sum(int(np.prod(x.shape)) * np.dtype(x.dtype).itemsize for x in jax.tree.leaves(tree))
