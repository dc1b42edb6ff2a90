"""LoRA in the training core: only the adapters are trained and held by the optimizer over a base frozen in its
storage dtype; dropout draws from a key that advances every step and costs nothing at rate 0; a run's checkpoint
holds what is trained (Qwen2.5-Coder-1.5B rank 16 on q,k,v,o: under 64 MB, from shapes alone) and a tiny one's bytes
on disk follow."""
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from cudaperf_jax.models.config import ModelConfig
from cudaperf_jax.models.decoder import Decoder
from cudaperf_jax.models.lora import ADAPTERS, LoRAConfig
from cudaperf_jax.sft.step import token_nll_loss
from cudaperf_jax.training import (
    OptimConfig,
    base_param_dtype,
    init_train_state,
    make_optimizer,
    make_train_step,
    next_dropout_key,
    run_state,
    split_model,
    stack_micro_batches,
    state_bytes,
    with_adapters,
)
from tests.cudaperf_jax.models import tiny
from tests.cudaperf_jax.training.test_step import sft_batch

QWEN15 = ModelConfig(model_type="qwen2", vocab_size=151936, hidden_size=1536, intermediate_size=8960, num_layers=28,
                     num_heads=12, num_kv_heads=2, head_dim=128, qkv_bias=True, tie_word_embeddings=True)


def _tiny(dtype=jnp.float32, seed=0):
    return Decoder(ModelConfig.from_hf(tiny.hf_config("llama").to_dict()), rngs=nnx.Rngs(seed), dtype=dtype,
                   param_dtype=dtype)


def test_base_dtype_is_the_compute_dtype_under_lora_and_param_dtype_at_rank_0():
    assert base_param_dtype(LoRAConfig(rank=16), "bfloat16", "float32") == "bfloat16"
    assert base_param_dtype(LoRAConfig(rank=16), "float32", "float32") == "float32"
    assert base_param_dtype(LoRAConfig(rank=0), "bfloat16", "float32") == "float32"
    model = _tiny()
    graph = nnx.graphdef(model)
    same, trained = with_adapters(model, LoRAConfig(rank=0))
    assert same is model and trained is nnx.Param and nnx.graphdef(model) == graph


def test_only_the_adapters_are_trained_over_a_frozen_bfloat16_base():
    model, trained = with_adapters(_tiny(jnp.bfloat16), LoRAConfig(rank=4, alpha=8.0, targets="q,v,o,down"),
                                   rngs=nnx.Rngs(1))
    assert trained is ADAPTERS and model.has_adapters
    opt, _ = make_optimizer(OptimConfig(learning_rate=2e-2, warmup_steps=0, schedule="constant"), 10)
    graphdef, params, opt_state, rest = init_train_state(model, opt, trained=trained)
    flat = nnx.to_flat_state(params)
    assert {p[-1] for p, _ in flat} == {"lora_a", "lora_b"} and len(flat) == 2 * 4 * model.cfg.num_layers
    assert all(v[...].dtype == jnp.float32 for _, v in flat)
    assert all(v[...].dtype == jnp.bfloat16 for _, v in nnx.to_flat_state(rest))         # the base, as stored
    n_adapter = sum(x.size for x in jax.tree.leaves(params))
    assert sum(x.size for x in jax.tree.leaves(opt_state)) == 2 * n_adapter + 2   # mu, nu; Adam and schedule counts
    rest_before = [np.asarray(x).copy() for x in jax.tree.leaves(rest)]
    step = make_train_step(graphdef, opt, token_nll_loss())
    batch = stack_micro_batches(sft_batch(), 2)
    losses = []
    for _ in range(4):
        params, opt_state, m = step(params, opt_state, rest, batch)
        losses.append(float(m["loss"]))
    assert losses[-1] < losses[0] - 0.05, losses
    for a, b in zip(rest_before, jax.tree.leaves(rest)):                                  # frozen, not donated
        np.testing.assert_array_equal(a, np.asarray(b))


def _dropout_step(rng, dropout=0.5):
    model, trained = with_adapters(_tiny(), LoRAConfig(rank=4, targets="q,k,v,o,gate,up,down", dropout=dropout),
                                   rngs=nnx.Rngs(1))
    # B = 0 at the start makes the adapters' output (and dropout's effect on the loss) zero: start from B != 0
    leaves, tree = jax.tree.flatten(nnx.state(model, ADAPTERS))
    nnx.update(model, jax.tree.unflatten(tree, [0.3 * jax.random.normal(jax.random.key(i), x.shape)
                                                for i, x in enumerate(leaves)]))
    opt = optax.sgd(0.1)
    graphdef, params, opt_state, rest = init_train_state(model, opt, trained=trained)
    step = make_train_step(graphdef, opt, token_nll_loss())
    batch = stack_micro_batches(sft_batch(), 2)
    params, _, m = step(params, opt_state, rest, batch, rng=rng)
    return float(m["loss"]), params, step, (params, opt_state, rest, batch)


def test_dropout_draws_from_the_step_key_and_rate_0_has_no_random_ops():
    rng = jax.random.PRNGKey(3)
    new, key = next_dropout_key(rng, LoRAConfig(rank=4, dropout=0.1))
    again, key2 = next_dropout_key(rng, LoRAConfig(rank=4, dropout=0.1))
    assert key is not None and np.array_equal(key, key2) and np.array_equal(new, again)   # a resumed run: same masks
    assert not np.array_equal(new, rng) and not np.array_equal(next_dropout_key(new, LoRAConfig(rank=4,
                                                                                                dropout=0.1))[1], key)
    off, none = next_dropout_key(rng, LoRAConfig(rank=4))
    assert none is None and np.array_equal(off, new)                # the RNG advances alike with dropout off
    assert next_dropout_key(rng, LoRAConfig(rank=0, dropout=0.1))[1] is None

    plain, _, step, args = _dropout_step(None)
    a, pa, _, _ = _dropout_step(key)
    b, pb, _, _ = _dropout_step(key)
    c, _, _, _ = _dropout_step(jax.random.PRNGKey(4))
    assert a == b and all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(pa), jax.tree.leaves(pb)))
    assert len({plain, a, c}) == 3                                  # masks from the key, none without it
    # without a key the step's program has no random numbers at all (dropout 0 costs nothing)
    params, opt_state, rest, batch = args
    opt_state = jax.tree.map(jnp.copy, opt_state)
    text = step._program("step", batch, False).lower(params, opt_state, rest, batch).as_text()
    keyed = step._program("step", batch, True).lower(params, opt_state, rest, batch, key).as_text()
    assert "threefry" not in text and "threefry" in keyed


@pytest.mark.parametrize("targets,limit_mb", [("q,k,v,o", 64)])
def test_checkpoint_of_a_qwen25_coder_15b_rank16_run_is_small_from_shapes_alone(targets, limit_mb):
    """The state a LoRA run checkpoints (adapters, the run's optimizer over them, RNG, step), sized by
    jax.eval_shape: no weight of the 1.5B model is materialised."""
    lora = LoRAConfig(rank=16, alpha=32.0, targets=targets)
    opt, _ = make_optimizer(OptimConfig(learning_rate=2e-4), 100)

    def state():
        model = Decoder(QWEN15, rngs=nnx.Rngs(0), dtype=jnp.bfloat16, param_dtype=jnp.bfloat16)
        model, trained = with_adapters(model, lora)
        _, params, rest = split_model(model, trained)
        return run_state(params, opt.init(params), 0), rest

    ckpt, rest = jax.eval_shape(state)
    size, base = state_bytes(ckpt), state_bytes(rest)
    n = 28 * 16 * (2 * 1536 + 2 * (1536 + 256) + 2 * 1536)                  # A [in, 16] + B [16, out] per target
    assert size == 3 * 4 * n + 2 * 4 + 8 + 4                                # f32 adapter, mu, nu; 2 counts, rng, step
    assert size < limit_mb * 1e6 and base > 3e9                             # 52.3 MB beside a 3.1 GB bf16 base
    print(f"Qwen2.5-Coder-1.5B rank 16 {targets}: checkpoint {size / 1e6:.1f} MB, frozen base {base / 1e9:.2f} GB")


def test_a_tiny_lora_checkpoint_on_disk_holds_the_adapters_not_the_base(tmp_path):
    from cudaperf_jax.experiment import open_run
    opt, _ = make_optimizer(OptimConfig(), 10)
    sizes = {}
    for rank in (0, 4):
        model, trained = with_adapters(_tiny(), LoRAConfig(rank=rank), rngs=nnx.Rngs(0))
        _, params, opt_state, _ = init_train_state(model, opt, trained=trained)
        run = open_run(tmp_path / f"rank{rank}", {"rank": rank}, name="t")
        run.save(0, run_state(params, opt_state, 0))
        run.close()
        disk = sum(f.stat().st_size for f in (tmp_path / f"rank{rank}" / "checkpoints" / "0").rglob("*")
                   if f.is_file())
        sizes[rank] = (state_bytes(run_state(params, opt_state, 0)), disk)
    (full, full_disk), (lora, lora_disk) = sizes[0], sizes[4]
    assert lora < full / 10 and lora_disk < full_disk / 3
    print(f"tiny run checkpoint: rank 0 {full} B of arrays, {full_disk} B on disk; "
          f"rank 4 q,k,v,o {lora} B of arrays, {lora_disk} B on disk")


def test_remat_gives_the_adapters_the_same_gradients_with_and_without_dropout():
    """Per-layer remat (what the RL and SFT steps use) over a model with adapters merged inside jax.grad."""
    from cudaperf_jax.rl.objective import sequence_logprobs
    model, _ = with_adapters(_tiny(), LoRAConfig(rank=4, targets="q,v,o,up", dropout=0.3), rngs=nnx.Rngs(1))
    leaves, tree = jax.tree.flatten(nnx.state(model, ADAPTERS))
    nnx.update(model, jax.tree.unflatten(tree, [0.3 * jax.random.normal(jax.random.key(i), x.shape)
                                                for i, x in enumerate(leaves)]))
    graphdef, params, rest = split_model(model, ADAPTERS)
    toks = jnp.asarray(sft_batch(rows=2, length=16)["tokens"])

    def loss(p, remat, key):
        return sequence_logprobs(nnx.merge(graphdef, p, rest), toks, None, None, remat=remat, dropout_rng=key).sum()
    for key in (None, jax.random.PRNGKey(0)):
        a = jax.jit(jax.grad(loss), static_argnums=1)(params, True, key)
        b = jax.jit(jax.grad(loss), static_argnums=1)(params, False, key)
        for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
            np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-5, atol=1e-6)
        assert max(float(jnp.abs(x).max()) for x in jax.tree.leaves(a)) > 1e-3
