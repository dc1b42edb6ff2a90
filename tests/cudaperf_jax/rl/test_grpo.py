"""GRPO: advantages, returns and losses against hand computation; the training core's step on the GRPO objective
learns."""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from cudaperf_jax.rl import grpo
from cudaperf_jax.rl.objective import grpo_objective, make_logprob_fn
from cudaperf_jax.training import init_train_state, make_train_step, split_model, stack


def test_advantages_by_name():
    r = jnp.array([1.0, 0.0, 0.0, 1.0, 2.0, 2.0, 2.0, 2.0])
    a = grpo.ADVANTAGES["grpo"](r, 4)
    np.testing.assert_allclose(a[:4], [1, -1, -1, 1], atol=1e-5)
    np.testing.assert_allclose(a[4:], 0, atol=1e-6)  # identical rewards carry no signal
    np.testing.assert_allclose(grpo.ADVANTAGES["dr_grpo"](r, 4)[:4], [0.5, -0.5, -0.5, 0.5])
    np.testing.assert_allclose(grpo.ADVANTAGES["rloo"](r, 4)[:4], [1 - 1 / 3, -2 / 3, -2 / 3, 1 - 1 / 3], rtol=1e-6)
    with pytest.raises(ValueError, match="multiple of group_size"):
        grpo.ADVANTAGES["grpo"](r, 3)


def test_discounted_returns():
    r = jnp.array([[1.0, 0.0, 2.0]])
    np.testing.assert_allclose(grpo.discounted_returns(r, 0.5), [[1 + 0 + 0.5, 0 + 1.0, 2.0]])


def test_grpo_loss_matches_hand_computation():
    rng = np.random.default_rng(0)
    logp, old, ref = (jnp.asarray(rng.normal(-1, 0.3, (2, 3)), jnp.float32) for _ in range(3))
    adv = jnp.array([1.5, -0.5])
    mask = jnp.array([[1, 1, 0], [1, 1, 1]], jnp.float32)
    cfg = grpo.GRPOConfig(clip_eps=0.2, clip_eps_high=0.0, kl_beta=0.1)
    loss, aux = grpo.mean_loss("grpo", logp, old, ref, adv, mask, cfg)
    ratio = np.exp(np.asarray(logp) - np.asarray(old))
    a = np.asarray(adv)[:, None]
    surr = np.minimum(ratio * a, np.clip(ratio, 0.8, 1.2) * a)
    kl = np.exp(np.asarray(ref) - np.asarray(logp)) - (np.asarray(ref) - np.asarray(logp)) - 1
    expect = ((-surr + 0.1 * kl) * np.asarray(mask)).sum() / np.asarray(mask).sum()
    np.testing.assert_allclose(float(loss), expect, rtol=1e-5)
    np.testing.assert_allclose(float(aux["kl"]), (kl * np.asarray(mask)).sum() / np.asarray(mask).sum(), rtol=1e-5)
    seq = dataclasses.replace(cfg, aggregation="sequence_mean")
    total, weight, _ = grpo.POLICY_LOSSES["grpo"](logp, old, ref, adv, mask * jnp.array([[1.0], [0.0]]), seq)
    per = ((-surr + 0.1 * kl) * np.asarray(mask))[0].sum() / 2      # only row 0 has tokens: one sequence
    np.testing.assert_allclose([float(total), float(weight)], [per, 1.0], rtol=1e-5)


def _tiny_model():
    from cudaperf_jax.models.config import ModelConfig
    from cudaperf_jax.models.decoder import Decoder
    from tests.cudaperf_jax.models import tiny
    cfg = ModelConfig.from_hf(tiny.hf_config("qwen2").to_dict())
    return Decoder(cfg, rngs=nnx.Rngs(0))


def _batch(b=4, length=12, vocab=320, seed=0):
    rng = np.random.default_rng(seed)
    tokens = rng.integers(3, vocab, (b, length)).astype(np.int32)
    positions = np.broadcast_to(np.arange(length, dtype=np.int32), (b, length)).copy()
    kv_mask = np.ones((b, length), bool)
    loss_mask = np.zeros((b, length - 1), np.float32)
    loss_mask[:, 5:] = 1
    return {"tokens": tokens, "positions": positions, "kv_mask": kv_mask, "loss_mask": loss_mask,
            "advantages": np.array([1.0, -1.0, 1.0, -1.0], np.float32)}


def test_train_step_raises_rewarded_and_lowers_penalised_sequences():
    opt = optax.adam(3e-3)
    graphdef, params, opt_state, rest = init_train_state(_tiny_model(), opt)
    batch = _batch()
    logp_fn = make_logprob_fn(graphdef)
    lp0 = np.asarray(logp_fn(params, rest, batch["tokens"], batch["positions"], batch["kv_mask"]))
    batch.update(old_logp=lp0, ref_logp=lp0)
    step = make_train_step(graphdef, opt, grpo_objective(grpo.GRPOConfig(kl_beta=0.0)))
    losses = []
    for _ in range(5):
        params, opt_state, m = step(params, opt_state, rest, stack([batch]))
        losses.append(float(m["loss"]))
    lp = np.asarray(logp_fn(params, rest, batch["tokens"], batch["positions"], batch["kv_mask"]))
    seq = lambda x: (x * batch["loss_mask"]).sum(1)
    gain = seq(lp) - seq(lp0)
    assert gain[0] > 0 and gain[2] > 0 and gain[1] < 0 and gain[3] < 0
    assert losses[-1] < losses[0]


def test_unknown_loss_is_reported():
    with pytest.raises(ValueError, match="loss='ppo2': choose one of grpo, reinforce"):
        grpo.GRPOConfig(loss="ppo2")


def test_multi_turn_advantages_discount_then_normalise_per_task_and_turn():
    # T=2 turns, K=2 tasks, G=2 samples; task 1's rewards are all equal (no gradient) in both turns
    r = np.array([[[1.0, 0.0], [0.5, 0.5]],
                  [[0.0, 2.0], [0.5, 0.5]]], np.float32)
    ret, adv, equal = grpo.multi_turn_advantages(r, gamma=0.4, estimator="dr_grpo")
    np.testing.assert_allclose(ret[0, 0], [1.0 + 0.4 * 0.0, 0.0 + 0.4 * 2.0], rtol=1e-6)
    np.testing.assert_allclose(ret[1], r[1])
    np.testing.assert_allclose(adv[0, 0], [0.1, -0.1], atol=1e-6)     # mean 0.9 of (1.0, 0.8)
    np.testing.assert_allclose(adv[1, 0], [-1.0, 1.0], atol=1e-6)
    np.testing.assert_allclose(adv[:, 1], 0.0, atol=1e-6)
    assert equal == 2
    _, adv_g, _ = grpo.multi_turn_advantages(r, 0.4, "grpo")
    np.testing.assert_allclose(adv_g[1, 0], [-1.0, 1.0], atol=1e-4)
    with pytest.raises(ValueError, match="unknown advantage"):
        grpo.multi_turn_advantages(r, 0.4, "ppo")


def test_unjudged_samples_get_no_advantage_and_leave_the_baseline_alone():
    """A sample the harness could not judge (`unchecked`, reward 0) must not move its group's baseline nor get an
    advantage: in a group of compile failures (-0.2 each) its 0 would otherwise look like a success."""
    r = np.array([[[-0.2, -0.2, 0.0, 0.2]]], np.float32)          # T=1, K=1, G=4; sample 2 unchecked
    judged = np.array([[[True, True, False, True]]])
    _, adv, _ = grpo.multi_turn_advantages(r, 0.4, "dr_grpo", judged)
    b = (-0.2 - 0.2 + 0.2) / 3                                                 # the judged samples' mean
    np.testing.assert_allclose(adv[0, 0], [-0.2 - b, -0.2 - b, 0.0, 0.2 - b], atol=1e-6)
    _, adv_all, _ = grpo.multi_turn_advantages(r, 0.4, "dr_grpo")
    assert adv_all[0, 0, 2] > 0                                               # before: 0 > the mean -0.05


@pytest.mark.parametrize("chunk", [1, 5, 256])
def test_chunked_sequence_logprobs_equal_the_full_log_softmax(chunk):
    """The chunked LM head gives the log_softmax's values and gradients (L-1 = 11 is no multiple of 5)."""
    from cudaperf_jax.rl.objective import sequence_logprobs
    model = _tiny_model()
    graphdef, params, others = split_model(model)
    rng = np.random.default_rng(0)
    tokens = jnp.asarray(rng.integers(0, model.cfg.vocab_size, (2, 12)), jnp.int32)
    positions = jnp.broadcast_to(jnp.arange(12, dtype=jnp.int32), (2, 12))
    kv_mask = jnp.ones((2, 12), bool).at[1, :3].set(False)

    def full(p):
        m = nnx.merge(graphdef, p, others)
        logp = jax.nn.log_softmax(m(tokens, positions, kv_mask=kv_mask)[:, :-1].astype(jnp.float32), axis=-1)
        return jnp.take_along_axis(logp, tokens[:, 1:, None], axis=-1)[..., 0]

    def chunked(p):
        return sequence_logprobs(nnx.merge(graphdef, p, others), tokens, positions, kv_mask, chunk=chunk)

    want, got = full(params), chunked(params)
    assert got.shape == (2, 11)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)
    g_want = jax.grad(lambda p: full(p).sum())(params)
    g_got = jax.grad(lambda p: chunked(p).sum())(params)
    for a, b in zip(jax.tree.leaves(g_want), jax.tree.leaves(g_got)):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-4, atol=1e-5)
