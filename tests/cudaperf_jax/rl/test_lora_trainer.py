"""The RL trainer under LoRA, on a tiny policy and the cpu harness: only the adapters are trained over a frozen base,
the reference is the base (zeroed adapters: no copy of it, KL > 0 once the adapters move), the sampler decodes the
adapted policy from merged weights (its log-probs are the update's: ratio 1) that share every untargeted array with
the base, and no sampler or merge program is compiled again after the first step."""
import jax
import numpy as np
from flax import nnx

from cudaperf_jax.experiment import open_run
from cudaperf_jax.experiment.config import from_configdict
from cudaperf_jax.generation import sampler as sampler_mod
from cudaperf_jax.models import lora
from cudaperf_jax.rl.config import RLConfig
from cudaperf_jax.rl.trainer import Trainer
from tests.cudaperf_jax.models import tiny


def _config(model):
    from experiments.configs import rl_tiny
    c = rl_tiny.get_config()
    c.model = str(model)
    c.tasks.max_tasks = 1                 # the same task every step, one turn: the same prompt shape every step
    c.rollout.update(turns=1, max_new_tokens=8)
    c.lora.update(rank=4, alpha=8.0, targets="q,v,o,up")
    return from_configdict(RLConfig, c)


def test_lora_steps_sample_merged_adapters_against_the_base_and_recompile_nothing(tmp_path):
    from kernels_harness.run.pool import HarnessPool
    policy = tmp_path / "policy"
    tiny.hf_model("llama").save_pretrained(policy)
    tiny.tokenizer().save_pretrained(policy)
    cfg = _config(policy)
    run = open_run(tmp_path / "run", cfg, name="train_rl")
    tr = Trainer(cfg, run)
    assert {p[-1] for p, _ in nnx.to_flat_state(tr.state["params"])} == {"lora_a", "lora_b"}
    assert all(not np.asarray(x).any() for x in jax.tree.leaves(tr.ref_params))          # the zeroed adapters
    assert jax.tree.structure(tr.ref_params) == jax.tree.structure(tr.state["params"])
    rest0 = jax.tree.map(np.asarray, tr.rest)
    counts, rows = [], []
    with HarnessPool(backend="cpu", workers=1, compile_workers=1, seed=0) as pool:
        client = tr.client(pool)
        for step in range(3):
            rows.append(tr.step(step, client))
            counts.append((sampler_mod._prefill._cache_size(), sampler_mod._decode._cache_size(),
                           lora.fold._cache_size()))
            if step == 0:   # equal rewards give no gradient at the start (policy = reference): move the adapters
                leaves, tree = jax.tree.flatten(tr.state["params"])
                keys = jax.random.split(jax.random.key(5), len(leaves))
                tr.state["params"] = jax.tree.unflatten(tree, [0.2 * jax.random.normal(k, x.shape)
                                                               for k, x in zip(keys, leaves)])
    assert counts[1] == counts[0] and counts[2] == counts[0], counts      # new weights, same programs
    assert rows[0]["kl"] == 0.0 and rows[1]["kl"] > 1e-3 and rows[2]["kl"] > 1e-3, rows  # the reference: the base
    # the sampler decoded the adapted policy: its log-probs (merged weights) are the update's (unmerged adapters)
    assert abs(rows[1]["ratio_mean"] - 1) < 1e-4 and abs(rows[2]["ratio_mean"] - 1) < 1e-4, rows
    assert rows[1]["grad_norm"] > 0
    for a, b in zip(jax.tree.leaves(tr.rest), jax.tree.leaves(rest0)):  # the base is frozen
        np.testing.assert_array_equal(np.asarray(a), b)
    # the sampler's weights: merged kernels for the targeted projections, the base's own arrays for the rest
    merged = dict(nnx.to_flat_state(tr.sampler.state))
    rest = dict(nnx.to_flat_state(tr.rest))
    shared = {p for p, v in merged.items() if v[...] is rest[p][...]}
    assert set(merged) - shared == {("layers", i, blk, k) for i in range(2)
                                    for blk, k in (("attn", "qkv"), ("attn", "o"), ("mlp", "gate_up"))}
    assert int(tr.state["step"]) == 2 and not np.array_equal(tr.state["rng"], jax.random.PRNGKey(cfg.seed))
