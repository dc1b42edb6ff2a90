"""The training core shared by SFT and RL: what is trained (split_model) and how a step updates it."""
from cudaperf_jax.training.state import split_model

__all__ = ["split_model"]
