"""The sampler on merged LoRA weights: lora.merge after every update, Sampler.update_weights, no recompilation of the
sampler's programs or of merge, and log-probabilities equal to a forward pass of the unmerged adapters."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from cudaperf_jax.generation import sampler as sampler_mod
from cudaperf_jax.generation.sampler import Sampler, SamplingParams
from cudaperf_jax.kernels import DecodeKernels
from cudaperf_jax.kernels import step as kstep
from cudaperf_jax.models import lora
from cudaperf_jax.models.config import ModelConfig
from cudaperf_jax.models.hf_io import model_from_hf_state
from cudaperf_jax.models.lora import ADAPTERS, LoRAConfig
from tests.cudaperf_jax.models import tiny

_forward = nnx.jit(lambda m, t: m(t))


def _new_adapters(adapters, seed):
    """An adapter state of the same structure with random values (a stand-in for an optimizer update)."""
    leaves, tree = jax.tree.flatten(adapters)
    keys = jax.random.split(jax.random.key(seed), len(leaves))
    return jax.tree.unflatten(tree, [0.2 * jax.random.normal(k, x.shape) for k, x in zip(keys, leaves)])


def _forward_logprobs(model, prompt, generated):
    lp = jax.nn.log_softmax(_forward(model, jnp.asarray([list(prompt) + list(generated)]))[0], axis=-1)
    rows = np.arange(len(prompt) - 1, len(prompt) - 1 + len(generated))
    return np.asarray(lp)[rows, generated]


@pytest.mark.parametrize("kernels,prompts", [
    (DecodeKernels(path="xla"), [[5, 6, 7, 8, 9], [30, 31, 32, 33, 34]]),
    (DecodeKernels(path="pallas", interpret=True), [[5, 6, 7, 8, 9]])])   # batch 1: the fused decode layers
def test_merged_updates_need_no_recompilation_and_sample_the_adapted_policy(kernels, prompts):
    ref = tiny.hf_model("qwen2", seed=7, head_dim=32)   # head dim 32: a shape the fused decode layers take
    model = model_from_hf_state(ModelConfig.from_hf(ref.config.to_dict()), tiny.state_dict(ref))
    assert kstep.applies(model.cfg, kernels.resolve(1), len(prompts), 1) == (kernels.path == "pallas")
    lora.add_adapters(model, LoRAConfig(rank=4, alpha=8.0, targets="q,k,v,o,gate,up,down"), nnx.Rngs(0))
    graphdef, adapters, rest = nnx.split(model, ADAPTERS, ...)
    sampler = Sampler(lora.merged_model(model), prompt_bucket=8, kernels=kernels)
    params = SamplingParams(max_new_tokens=6, temperature=0, stop_token_ids=())
    first = sampler.generate(prompts, params)
    compiled = (sampler_mod._prefill._cache_size(), sampler_mod._decode._cache_size())
    merges = None
    outs = []
    for step in range(2):
        adapters = _new_adapters(adapters, step)
        sampler.update_weights(lora.merge(graphdef, adapters, rest))
        merges = merges or lora.fold._cache_size()
        outs.append(sampler.generate(prompts, params))
    assert (sampler_mod._prefill._cache_size(), sampler_mod._decode._cache_size()) == compiled
    assert lora.fold._cache_size() == merges
    assert sampler.kernels == kernels   # no fallback from the kernels to XLA
    assert np.abs(first.logprobs - outs[-1].logprobs).max() > 1e-2   # the new weights are used
    unmerged = nnx.merge(graphdef, adapters, rest)   # the last adapters, not merged
    for i, p in enumerate(prompts):
        np.testing.assert_allclose(outs[-1].logprobs[i], _forward_logprobs(unmerged, p, outs[-1].tokens[i].tolist()),
                                   atol=1e-4)
