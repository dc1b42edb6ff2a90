"""Which parameters a step trains: the model split into its trained state and the rest."""
from __future__ import annotations

from flax import nnx


def split_model(model: nnx.Module, trained=nnx.Param):
    """(graphdef, params: nnx.State of the `trained` variables, rest: every other variable).

    trained: an nnx filter; nnx.Param trains every parameter (a full fine-tune), nnx.LoRAParam only the adapters
    (the base weights then sit in `rest`: LoRAParam is a subclass of Param, so the trained filter is applied first)."""
    return nnx.split(model, trained, ...)
