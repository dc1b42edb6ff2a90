"""GGUF loader: a tiny GGUF written with gguf.GGUFWriter (llama.cpp layout, F32 and Q8_0 tensors) loads
to the same logits as transformers' own GGUF conversion of that file, and as the source checkpoint."""
import gguf
import jax.numpy as jnp
import numpy as np
import pytest
import torch

from cudaperf_jax.models.gguf_io import hf_name, permute_qk, read_gguf, unpermute_qk
from cudaperf_jax.models.hf_io import CheckpointError
from cudaperf_jax.models.loading import load_policy
from tests.cudaperf_jax.models import tiny

_TO_GGUF = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
            "lm_head.weight": "output.weight"}
_LAYER = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm", "self_attn.q_proj": "attn_q",
          "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
          "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}


def _gguf_name(name):
    if name in _TO_GGUF:
        return _TO_GGUF[name]
    _, _, i, *rest = name.split(".")
    return f"blk.{i}.{_LAYER['.'.join(rest[:-1])]}.{rest[-1]}"


def write_tiny_gguf(path, arch, model, quantize=(), name=None):
    """Writes `model` (transformers) as llama.cpp would: q/k rows permuted for llama; names in `quantize` as Q8_0."""
    c = model.config
    w = gguf.GGUFWriter(str(path), arch)
    if name is not None:
        w.add_name(name)
    w.add_block_count(c.num_hidden_layers)
    w.add_context_length(c.max_position_embeddings)
    w.add_embedding_length(c.hidden_size)
    w.add_feed_forward_length(c.intermediate_size)
    w.add_head_count(c.num_attention_heads)
    w.add_head_count_kv(c.num_key_value_heads)
    w.add_rope_freq_base(c.rope_parameters["rope_theta"])
    w.add_layer_norm_rms_eps(c.rms_norm_eps)
    w.add_vocab_size(c.vocab_size)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    for tname, arr in tiny.state_dict(model).items():
        if tname == "lm_head.weight" and c.tie_word_embeddings:
            continue
        if arch == "llama" and ".q_proj." in tname:
            arr = permute_qk(arr, c.num_attention_heads)
        elif arch == "llama" and ".k_proj." in tname:
            arr = permute_qk(arr, c.num_key_value_heads)
        if tname in quantize:
            q = gguf.quants.quantize(arr, gguf.GGMLQuantizationType.Q8_0)
            w.add_tensor(_gguf_name(tname), q, raw_shape=q.shape, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            w.add_tensor(_gguf_name(tname), arr.astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_permutation_round_trip():
    x = np.arange(8 * 3 * 2, dtype=np.float32).reshape(8 * 2, 3)
    np.testing.assert_array_equal(unpermute_qk(permute_qk(x, 2), 2), x)
    assert not np.array_equal(permute_qk(x, 2), x)
    assert hf_name("blk.3.attn_q.bias") == "model.layers.3.self_attn.q_proj.bias"
    assert hf_name("rope_freqs.weight") is None


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_tiny_gguf_matches_transformers_gguf_and_source(tmp_path, arch):
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint
    src = tiny.hf_model(arch, rope_scaling=None, seed=5)
    quant = ("model.layers.0.mlp.up_proj.weight", "model.layers.1.self_attn.q_proj.weight")
    path = tmp_path / f"tiny-{arch}.gguf"
    write_tiny_gguf(path, arch, src, quantize=quant)

    model, _ = load_policy(path, tokenizer=False)
    assert model.cfg.model_type == arch and model.cfg.num_layers == 2
    toks = np.random.RandomState(0).randint(0, 320, (2, 24))
    got = np.asarray(model(jnp.asarray(toks)))

    ref = tiny.hf_model(arch, rope_scaling=None, seed=99)  # same shapes, other weights: overwritten below
    sd = load_gguf_checkpoint(str(path), return_tensors=True, model_to_load=ref)["tensors"]
    missing = ref.load_state_dict({k: torch.as_tensor(np.asarray(v)) for k, v in sd.items()}, strict=False)
    assert set(missing.missing_keys) <= {"lm_head.weight"} and not missing.unexpected_keys
    with torch.no_grad():
        want = ref(torch.tensor(toks)).logits.numpy()
        source = src(torch.tensor(toks)).logits.numpy()
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=0)
    # Q8_0 rounding moves logits a little from the float32 source, far less than their spread.
    assert np.abs(got - source).max() < 0.05 * np.abs(source).max()
    _, tensors = read_gguf(path)
    q = tiny.state_dict(src)["model.layers.1.self_attn.q_proj.weight"]
    assert np.abs(tensors["model.layers.1.self_attn.q_proj.weight"] - q).max() < 0.01 * np.abs(q).max()


def test_unreadable_gguf_is_one_sentence(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a gguf")
    with pytest.raises(CheckpointError, match="not a readable GGUF"):
        read_gguf(bad)
    with pytest.raises(CheckpointError, match="no checkpoint"):
        load_policy(tmp_path / "missing.gguf")
