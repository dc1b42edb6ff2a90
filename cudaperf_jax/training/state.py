"""Which parameters a step trains: the model split into its trained state and the rest."""
from __future__ import annotations

from flax import nnx


def split_model(model: nnx.Module):
    """(graphdef, params: nnx.State of nnx.Param, others: the rest) — only params are trained."""
    return nnx.split(model, nnx.Param, ...)
