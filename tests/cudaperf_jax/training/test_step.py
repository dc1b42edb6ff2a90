"""The training core: micro-batches accumulated inside jit give one full-batch step (same shape through lax.scan,
and RL's micro-batches of different lengths through accumulate + apply); only the trained filter's variables are
differentiated; the optimizer's schedule and weight-decay mask."""
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from cudaperf_jax.rl.batch import build_batch, micro_batches
from cudaperf_jax.rl.grpo import GRPOConfig
from cudaperf_jax.rl.objective import TRAIN_KEYS, grpo_objective, make_logprob_fn
from cudaperf_jax.sft.step import token_nll_loss
from cudaperf_jax.training import (
    OptimConfig,
    init_train_state,
    make_optimizer,
    make_schedule,
    make_train_step,
    stack,
    stack_micro_batches,
)

TOL = {"rtol": 2e-6, "atol": 2e-7}


def tiny_model(seed=0):
    from cudaperf_jax.models.config import ModelConfig
    from cudaperf_jax.models.decoder import Decoder
    from tests.cudaperf_jax.models import tiny
    return Decoder(ModelConfig.from_hf(tiny.hf_config("llama").to_dict()), rngs=nnx.Rngs(seed))


def sft_batch(rows=4, length=24, seed=0):
    """A packed batch: two segments per row, response weights on part of each."""
    rng = np.random.default_rng(seed)
    tokens = rng.integers(3, 320, (rows, length)).astype(np.int32)
    seg = np.ones((rows, length), np.int32)
    seg[:, length // 2:] = 2
    seg[-1, -5:] = 0                                     # padding at the end of the last row
    positions = np.concatenate([np.arange(length // 2), np.arange(length - length // 2)])[None].repeat(rows, 0)
    targets = np.roll(tokens, -1, 1)
    weights = (rng.random((rows, length)) < 0.6).astype(np.float32) * (seg > 0)
    return {"tokens": tokens, "positions": positions.astype(np.int32), "segment_ids": seg, "targets": targets,
            "weights": weights}


def candidates(lengths, seed=0):
    """Rollout-like candidates: (prompt, completion) lengths; sampler log-probs filled in later."""
    rng = np.random.default_rng(seed)
    return [SimpleNamespace(prompt_ids=rng.integers(3, 320, p).astype(np.int32),
                            completion_ids=rng.integers(3, 320, n).astype(np.int32),
                            logprobs=np.zeros(n, np.float32), ref_logprobs=None) for p, n in lengths]


def with_policy_logprobs(cands, graphdef, params, rest, bucket):
    """The candidates' old log-probs = the policy's (one forward pass over all of them), and reference log-probs a
    little off (KL > 0)."""
    b = build_batch(cands, np.zeros(len(cands)), 0, bucket)
    lp = np.asarray(make_logprob_fn(graphdef)(params, rest, b["tokens"], b["positions"], b["kv_mask"]))
    for i, c in enumerate(cands):
        m = b["loss_mask"][i] > 0
        c.logprobs = lp[i][m]
        c.ref_logprobs = lp[i][m] - 0.05 * np.arange(m.sum(), dtype=np.float32) / m.sum()
    return cands


def _state(opt, seed=0):
    return init_train_state(tiny_model(seed), opt)


def _close(a, b):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), **TOL)


def test_scanned_micro_batches_equal_one_full_batch_step():
    """SFT's step: the same 4 rows as 1 and 4 stacked micro-batches give the same params and metrics (SGD: the
    update is linear in the gradients, so float reduction order is all that differs)."""
    opt = optax.sgd(0.5)
    batch = sft_batch()
    out = []
    for n in (1, 4):
        graphdef, params, opt_state, rest = _state(opt)
        step = make_train_step(graphdef, opt, token_nll_loss())
        for _ in range(2):
            params, opt_state, m = step(params, opt_state, rest, stack_micro_batches(batch, n))
        out.append((params, jax.device_get(m)))
    (p1, m1), *others = out
    assert m1["weight"] == batch["weights"].sum() and 0 < m1["accuracy"] < 1 and m1["loss"] > 0
    for p, m in others:
        _close(p, p1)
        for k in m1:
            np.testing.assert_allclose(m[k], m1[k], **TOL)
    moved = max(float(np.abs(np.asarray(a) - np.asarray(b)).max()) for a, b in
                zip(jax.tree.leaves(p1), jax.tree.leaves(_state(opt)[1])))
    assert moved > 1e-3                                   # the step really changed the parameters


def test_micro_batches_of_different_lengths_equal_one_full_batch_step():
    """RL's update: candidates micro-batched at their own bucketed lengths and accumulated one shape at a time equal
    one step over all of them padded to the longest (loss, KL, clip fraction, gradient norm, parameters)."""
    opt = optax.sgd(0.5)
    cfg = GRPOConfig(kl_beta=0.1)
    graphdef, params, opt_state, rest = _state(opt)
    cands = with_policy_logprobs(candidates([(5, 3), (7, 6), (20, 12), (30, 25), (9, 2)]), graphdef, params, rest, 8)
    adv = np.array([1.0, -0.5, 0.7, -1.2, 0.3], np.float32)
    step = make_train_step(graphdef, opt, grpo_objective(cfg))
    mbs = micro_batches(cands, adv, 0, size=2, bucket=8)
    assert len({mb["tokens"].shape for mb in mbs}) >= 2                    # several lengths, none padded to all
    acc = None
    for mb in mbs:
        acc = step.accumulate(params, rest, acc, stack([{k: mb[k] for k in TRAIN_KEYS}]))
    got_p, _, got = step.apply(params, opt_state, acc)

    graphdef, params, opt_state, rest = _state(opt)
    full = build_batch(cands, adv, 0, bucket=8)
    assert full["tokens"].shape[1] > max(mb["tokens"].shape[1] for mb in mbs[:2])
    want_p, _, want = step(params, opt_state, rest, stack([{k: full[k] for k in TRAIN_KEYS}]))
    got, want = jax.device_get(got), jax.device_get(want)
    assert want["weight"] == sum(len(c.completion_ids) for c in cands) and want["kl"] > 0
    for k in want:
        np.testing.assert_allclose(got[k], want[k], **TOL)
    _close(got_p, want_p)


def test_only_the_trained_filter_is_differentiated_and_donated():
    """What is trained is a filter: here only the LM head and the final norm (LoRA passes nnx.LoRAParam). The
    optimizer state mirrors those alone; the rest is an argument that the step leaves untouched and alive."""
    trained = nnx.All(nnx.Param, nnx.Any(nnx.PathContains("lm_head"), nnx.PathContains("final_norm")))
    opt = optax.adam(1e-2)
    graphdef, params, opt_state, rest = init_train_state(tiny_model(), opt, trained=trained)
    assert set(params.keys()) == {"lm_head", "final_norm"} and "layers" in rest
    assert len(jax.tree.leaves(opt_state)) == 2 * len(jax.tree.leaves(params)) + 1        # mu, nu, count
    rest_before = [np.asarray(x).copy() for x in jax.tree.leaves(rest)]
    before = [np.asarray(x).copy() for x in jax.tree.leaves(params)]
    step = make_train_step(graphdef, opt, token_nll_loss())
    batch = stack_micro_batches(sft_batch(), 2)
    losses = []
    for _ in range(3):
        params, opt_state, m = step(params, opt_state, rest, batch)
        losses.append(float(m["loss"]))
    assert losses[-1] < losses[0]
    for a, b in zip(rest_before, jax.tree.leaves(rest)):                # not donated, not changed
        np.testing.assert_array_equal(a, np.asarray(b))
    assert all(np.abs(a - np.asarray(b)).max() > 0 for a, b in zip(before, jax.tree.leaves(params)))


def test_schedule_and_weight_decay_on_matrices_only():
    cfg = OptimConfig(learning_rate=1e-3, schedule="cosine", warmup_steps=4, end_lr_fraction=0.1, weight_decay=0.5,
                      grad_clip=1.0)
    sched = make_schedule(cfg, 20)
    np.testing.assert_allclose([float(sched(s)) for s in (0, 3, 4, 20)], [2.5e-4, 1e-3, 1e-3, 1e-4], rtol=1e-2)
    assert float(make_schedule(OptimConfig(schedule="constant", warmup_steps=0), 5)(4)) == pytest.approx(5e-5)
    opt, _ = make_optimizer(cfg, 20)
    params = {"w": jnp.ones((2, 3)), "scale": jnp.ones(3)}
    grads = jax.tree.map(jnp.zeros_like, params)
    upd, _ = opt.update(grads, opt.init(params), params)
    assert float(upd["w"][0, 0]) == pytest.approx(-2.5e-4 * 0.5) and float(jnp.abs(upd["scale"]).max()) == 0.0
    with pytest.raises(ValueError, match="schedule='step'"):
        OptimConfig(schedule="step")
