"""LoRA adapters in the decoder: config validation, an adapter-free decoder unchanged, filters that keep the base
apart, merged weights equal to the unmerged adapters, the zeroed-adapter reference equal to the base, dropout only
with a key, gradients for the adapters only, and the adapter sizes of Qwen2.5-Coder-1.5B."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax.sharding import PartitionSpec as P

from cudaperf_jax.experiment.config import ConfigFieldError
from cudaperf_jax.models import lora
from cudaperf_jax.models.config import ModelConfig
from cudaperf_jax.models.decoder import Decoder
from cudaperf_jax.models.hf_io import model_from_hf_state
from cudaperf_jax.models.lora import ADAPTERS, BASE, REST, LoRAConfig
from cudaperf_jax.models.sharding import make_mesh, shard_model
from tests.cudaperf_jax.models import tiny

ALL = "q,k,v,o,gate,up,down"
_forward = nnx.jit(lambda m, t: m(t))
_forward_rng = nnx.jit(lambda m, t, r: m(t, dropout_rng=r))
TOKS = jnp.asarray(np.random.RandomState(1).randint(0, 320, (2, 24)))


@pytest.fixture(scope="module")
def qwen2():
    """(ModelConfig, HF-named tensors) of a tiny random Qwen2 (q/k/v biases, tied embeddings)."""
    ref = tiny.hf_model("qwen2", seed=4)
    return ModelConfig.from_hf(ref.config.to_dict()), tiny.state_dict(ref)


def _model(qwen2, targets=None, rank=4, alpha=8.0, seed=0, **kw):
    """The tiny Qwen2 decoder, with adapters of random non-zero A and B where targets is given."""
    model = model_from_hf_state(*qwen2, **kw)
    if targets is None:
        return model
    lora.add_adapters(model, LoRAConfig(rank=rank, alpha=alpha, targets=targets), nnx.Rngs(seed))
    return _randomize(model, seed)


def _randomize(model, seed):
    leaves, tree = jax.tree.flatten(nnx.state(model, ADAPTERS))
    keys = jax.random.split(jax.random.key(seed + 100), len(leaves))
    nnx.update(model, jax.tree.unflatten(tree, [0.2 * jax.random.normal(k, x.shape) for k, x in zip(keys, leaves)]))
    return model


@pytest.mark.parametrize("field,kw", [
    ("rank", {"rank": -1}), ("rank", {"rank": 2.0}), ("rank", {"rank": True}), ("alpha", {"alpha": 0.0}),
    ("alpha", {"alpha": float("nan")}), ("targets", {"targets": "q,x"}), ("targets", {"targets": "q,q"}),
    ("targets", {"targets": ""}), ("targets", {"targets": ("q", "v")}), ("dropout", {"dropout": 1.0}),
    ("dropout", {"dropout": -0.1})])
def test_config_errors_name_the_field(field, kw):
    with pytest.raises(ConfigFieldError, match=f"lora.{field} "):
        LoRAConfig(**kw)


def test_config_targets_scaling_and_off():
    cfg = LoRAConfig(rank=8, alpha=16.0, targets=" down, q ,v")
    assert cfg.names == ("q", "v", "down") and cfg.targets == "q,v,down" and cfg.scaling == 2.0 and cfg.on
    assert cfg == LoRAConfig(rank=8, alpha=16.0, targets="q,v,down")
    assert not LoRAConfig().on and LoRAConfig().names == ("q", "k", "v", "o")
    model = Decoder(ModelConfig(num_layers=1, vocab_size=64, hidden_size=32, intermediate_size=48, num_heads=4,
                                num_kv_heads=2, head_dim=8), rngs=nnx.Rngs(0))
    graph = nnx.graphdef(model)
    assert lora.add_adapters(model, LoRAConfig(rank=0), nnx.Rngs(0)) is model and nnx.graphdef(model) == graph
    lora.add_adapters(model, LoRAConfig(rank=2), nnx.Rngs(0))
    with pytest.raises(ValueError, match="already has LoRA adapters"):
        lora.add_adapters(model, LoRAConfig(rank=2), nnx.Rngs(0))


def test_adapters_sit_beside_an_unchanged_base_and_filters_keep_them_apart(qwen2):
    plain = model_from_hf_state(*qwen2, param_dtype=jnp.bfloat16)
    paths = {p for p, _ in nnx.to_flat_state(nnx.state(plain))}
    model = _model(qwen2, "q,v,o,up", param_dtype=jnp.bfloat16)
    assert model.has_adapters and not plain.has_adapters and lora.lora_config(model).names == ("q", "v", "o", "up")
    _, adapters, rest = nnx.split(model, ADAPTERS, ...)
    flat_ad = nnx.to_flat_state(adapters)
    assert {p[-1] for p, _ in flat_ad} == {"lora_a", "lora_b"} and len(flat_ad) == 2 * 4 * model.cfg.num_layers
    assert {p[2:4] for p, _ in flat_ad} == {("attn", "lora"), ("mlp", "lora")}
    assert all(v[...].dtype == jnp.float32 and type(v) is nnx.LoRAParam for _, v in flat_ad)
    assert ("layers", 0, "attn", "lora", "q", "lora_a") in dict(flat_ad)
    assert nnx.state(model, ADAPTERS)["layers"][0]["mlp"]["lora"]["up"]["lora_b"].shape == (4, 96)
    # the frozen rest and the BASE filter are exactly the plain decoder's parameters, in bfloat16; nnx.Param alone
    # would include the adapters (LoRAParam subclasses Param)
    for state in (rest, nnx.state(model, BASE), nnx.state(model, REST)):
        assert {p for p, _ in nnx.to_flat_state(state)} == paths
        assert all(v[...].dtype == jnp.bfloat16 for _, v in nnx.to_flat_state(state))
    assert len(nnx.to_flat_state(nnx.state(model, nnx.Param))) == len(paths) + len(flat_ad)
    # the merged model is a plain decoder: same graph, same state structure
    merged = lora.merged_model(model)
    assert nnx.graphdef(merged) == nnx.graphdef(plain) and not merged.has_adapters
    assert jax.tree.structure(nnx.state(merged)) == jax.tree.structure(nnx.state(plain))
    assert nnx.state(merged)["layers"][0]["attn"]["qkv"][...].dtype == jnp.bfloat16
    # merging makes new arrays for the targeted kernels only (q,v,o -> qkv, o; up -> gate_up); the rest is shared
    graphdef, adapters, rest = nnx.split(model, ADAPTERS, ...)
    folded = lora.merge(graphdef, adapters, rest)
    assert jax.tree.structure(folded) == jax.tree.structure(nnx.state(plain))
    before = dict(nnx.to_flat_state(rest))
    new = {p for p, v in nnx.to_flat_state(folded) if v[...] is not before[p][...]}
    assert new == {("layers", i, blk, k) for i in range(model.cfg.num_layers)
                   for blk, k in (("attn", "qkv"), ("attn", "o"), ("mlp", "gate_up"))}


def test_fresh_adapters_and_zeroed_adapters_give_the_base_logits_exactly(qwen2):
    base = np.asarray(_forward(_model(qwen2), TOKS))
    fresh = model_from_hf_state(*qwen2)
    lora.add_adapters(fresh, LoRAConfig(rank=4, targets=ALL), nnx.Rngs(0))   # B = 0 at the start
    np.testing.assert_array_equal(np.asarray(_forward(fresh, TOKS)), base)
    model = _model(qwen2, ALL)
    assert np.abs(np.asarray(_forward(model, TOKS)) - base).max() > 0.1
    graphdef, adapters, rest = nnx.split(model, ADAPTERS, ...)
    reference = nnx.merge(graphdef, lora.zero_adapters(adapters), rest)   # the same base arrays, no copy
    assert reference.layers[0].attn.qkv[...] is rest["layers"][0]["attn"]["qkv"][...]
    np.testing.assert_array_equal(np.asarray(_forward(reference, TOKS)), base)


@pytest.mark.parametrize("targets", [ALL, "v,gate,down"])
def test_merged_weights_give_the_unmerged_logits(qwen2, targets):
    """Float32 to 1e-4, the tolerance of the decoder's other float32 parity tests: W + s A B rounds differently from
    x W + s (x A) B (the adapters move these logits by several units; an error in the fold would show as such)."""
    model = _model(qwen2, targets, alpha=12.0)
    unmerged = np.asarray(_forward(model, TOKS))
    merged = lora.merged_model(model)
    np.testing.assert_allclose(np.asarray(_forward(merged, TOKS)), unmerged, atol=1e-4, rtol=0)
    # the cached one-token decode path with adapters (and of the merged model) gives the same logits
    one = TOKS[:1, :10]
    full = unmerged[:1, :10]
    np.testing.assert_allclose(tiny.stepwise_logits(model, one, 16), full, atol=1e-4, rtol=0)
    np.testing.assert_allclose(tiny.stepwise_logits(merged, one, 16), full, atol=1e-4, rtol=0)


def test_dropout_only_with_a_key_and_remat_drops_the_same(qwen2):
    model = model_from_hf_state(*qwen2)
    lora.add_adapters(model, LoRAConfig(rank=4, targets=ALL, dropout=0.5), nnx.Rngs(0))
    _randomize(model, 1)
    key = jax.random.key(5)
    plain = np.asarray(_forward(model, TOKS))
    np.testing.assert_array_equal(np.asarray(_forward_rng(model, TOKS, None)), plain)
    dropped = np.asarray(_forward_rng(model, TOKS, key))
    assert np.abs(dropped - plain).max() > 1e-2
    np.testing.assert_array_equal(np.asarray(_forward_rng(model, TOKS, key)), dropped)
    assert np.abs(np.asarray(_forward_rng(model, TOKS, jax.random.key(6))) - dropped).max() > 1e-2
    remat = nnx.jit(lambda m, t, r: m(t, remat=True, dropout_rng=r))
    np.testing.assert_allclose(np.asarray(remat(model, TOKS, key)), dropped, atol=1e-5, rtol=0)


def test_gradients_reach_the_adapters_only(qwen2):
    model = model_from_hf_state(*qwen2)
    lora.add_adapters(model, LoRAConfig(rank=4, targets=ALL), nnx.Rngs(0))

    def loss(m, toks):
        lp = jax.nn.log_softmax(m(toks[:, :-1]), axis=-1)
        return -jnp.take_along_axis(lp, toks[:, 1:, None], axis=-1).mean()

    before = float(loss(model, TOKS))
    value, grads = nnx.jit(nnx.value_and_grad(loss, argnums=nnx.DiffState(0, ADAPTERS)))(model, TOKS)
    flat = nnx.to_flat_state(grads)
    assert len(flat) == len(nnx.to_flat_state(nnx.state(model, ADAPTERS))) and float(value) == pytest.approx(before)
    assert all(p[-1] in ("lora_a", "lora_b") for p, _ in flat)
    assert all(float(jnp.abs(g[...]).max()) == 0.0 for p, g in flat if p[-1] == "lora_a")   # B = 0: no grad for A
    assert all(float(jnp.abs(g[...]).max()) > 0.0 for p, g in flat if p[-1] == "lora_b")
    base = nnx.state(model, BASE)
    nnx.update(model, jax.tree.map(lambda p, g: p - 0.5 * g, nnx.state(model, ADAPTERS), grads))
    assert float(loss(model, TOKS)) < before - 1e-3
    assert all(a is b for a, b in zip(jax.tree.leaves(base), jax.tree.leaves(nnx.state(model, BASE))))


def test_adapters_are_placed_by_their_logical_axes(qwen2):
    model = _model(qwen2, "q,o,down")
    specs = nnx.get_partition_spec(nnx.state(model, ADAPTERS))["layers"][0]
    assert specs["attn"]["lora"]["q"]["lora_a"] == P("fsdp", None)
    assert specs["attn"]["lora"]["o"]["lora_b"] == P(None, "fsdp")
    assert specs["mlp"]["lora"]["down"]["lora_a"] == P("tensor", None)
    want = np.asarray(_forward(model, TOKS))
    shard_model(model, make_mesh(devices=jax.devices()[:1]))
    np.testing.assert_array_equal(np.asarray(_forward(model, TOKS)), want)


QWEN15 = ModelConfig(model_type="qwen2", vocab_size=151936, hidden_size=1536, intermediate_size=8960, num_layers=28,
                     num_heads=12, num_kv_heads=2, head_dim=128, qkv_bias=True, tie_word_embeddings=True)


@pytest.mark.parametrize("targets,count", [("q,k,v,o", 28 * 16 * (2 * 1536 + 2 * (1536 + 256) + 2 * 1536)),
                                           (ALL, 28 * 16 * (2 * 1536 + 2 * (1536 + 256) + 2 * 1536
                                                            + 3 * (1536 + 8960)))])
def test_adapter_sizes_of_qwen25_coder_15b(targets, count):
    cfg = LoRAConfig(rank=16, alpha=32.0, targets=targets)
    abstract = nnx.eval_shape(lambda: lora.add_adapters(Decoder(QWEN15, rngs=nnx.Rngs(0)), cfg, nnx.Rngs(1)))
    leaves = jax.tree.leaves(nnx.state(abstract, ADAPTERS))
    assert sum(x.size for x in leaves) == lora.num_adapter_params(QWEN15, cfg) == count
    assert all(x.dtype == jnp.float32 for x in leaves)
    if targets == "q,k,v,o":   # adapter + Adam's two moments, float32: the checkpoint the project keeps under 64 MB
        assert 3 * 4 * count < 64e6
