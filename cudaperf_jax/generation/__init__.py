"""Rollout sampling: batched prefill + `lax.while_loop` decode with a KV cache (see sampler.py)."""
from cudaperf_jax.generation.sampler import SampleOutput, Sampler, SamplingParams

__all__ = ["SampleOutput", "Sampler", "SamplingParams"]
