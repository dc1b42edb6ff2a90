"""GGUF files in: metadata -> HF config dict, tensors dequantised (gguf package) -> HF names and layout.

llama.cpp's converter permutes the rows of Llama q/k projections (interleaved rotary pairs); this
module undoes it so the tensors match transformers' rotate-half layout. Qwen2/Qwen3 GGUFs are not
permuted. Llama-3 style `rope_freqs` tensors are refused (use the HF checkpoint for those).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from cudaperf_jax.models.hf_io import CheckpointError

ARCHS = ("llama", "qwen2", "qwen3")

_GLOBAL = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
           "output.weight": "lm_head.weight"}
_LAYER = {"attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
          "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
          "attn_output": "self_attn.o_proj", "attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm",
          "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}


def _reader(path):
    try:
        import gguf
    except ImportError:
        raise CheckpointError("reading GGUF files needs the `gguf` package; run `pip install gguf`") from None
    try:
        return gguf, gguf.GGUFReader(str(path))
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{path} is not a readable GGUF file ({' '.join(str(e).split())[:160]}); "
                              "download it again") from None


def _field(reader, key, default=None):
    f = reader.fields.get(key)
    if f is None:
        return default
    v = f.contents()
    return v


def hf_name(gguf_name: str) -> str | None:
    """The transformers tensor name for a GGUF tensor name (None for tensors with no HF counterpart)."""
    if gguf_name in _GLOBAL:
        return _GLOBAL[gguf_name]
    parts = gguf_name.split(".")
    if len(parts) == 4 and parts[0] == "blk" and parts[2] in _LAYER:
        return f"model.layers.{parts[1]}.{_LAYER[parts[2]]}.{parts[3]}"
    return None


def unpermute_qk(w: np.ndarray, n_head: int) -> np.ndarray:
    """Undoes llama.cpp's q/k row permutation; w is [n_head * head_dim, ...] (weight or bias)."""
    dim = w.shape[0] // n_head // 2
    return w.reshape(n_head, dim, 2, *w.shape[1:]).swapaxes(2, 1).reshape(w.shape)


def permute_qk(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's q/k row permutation (the inverse of unpermute_qk)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def read_gguf(path: str | Path, progress: bool = False) -> tuple[dict, dict[str, np.ndarray]]:
    """(HF-style config dict, HF-named float32 tensors) of a Llama/Qwen2/Qwen3 GGUF file.

    A damaged or truncated file is a CheckpointError in one sentence, whatever the gguf package raised."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"no GGUF file at {path}; check the path (or run `python -m cudaperf_jax.assets fetch`)")
    try:
        return _read_gguf(path, progress)
    except CheckpointError:
        raise
    except Exception as e:  # noqa: BLE001 - the gguf reader raises IndexError, KeyError, struct errors... on bad bytes
        text = " ".join(str(e).split())[:160]
        raise CheckpointError(f"{path} is not a readable GGUF file ({type(e).__name__}{': ' + text if text else ''}); "
                              "it is incomplete or damaged: download it again") from None


def _read_gguf(path: Path, progress: bool) -> tuple[dict, dict[str, np.ndarray]]:
    gguf, r = _reader(path)
    arch = _field(r, "general.architecture")
    if arch not in ARCHS:
        raise CheckpointError(f"{path.name} is a {arch!r} model; only {ARCHS} GGUF files are supported")

    def a(key, default=None):
        return _field(r, f"{arch}.{key}", default)

    names = {t.name for t in r.tensors}
    if "rope_freqs.weight" in names:
        raise CheckpointError(f"{path.name} uses llama.cpp rope_freqs (Llama-3 rope scaling); load the "
                              "Hugging Face checkpoint of this model instead")
    heads = int(a("attention.head_count"))
    kv_heads = int(a("attention.head_count_kv", heads))
    hidden = int(a("embedding_length"))
    head_dim = int(a("attention.key_length", hidden // heads))
    tokens = _field(r, "tokenizer.ggml.tokens")
    vocab = int(a("vocab_size", len(tokens) if tokens is not None else 0))
    cfg = {
        "model_type": arch, "vocab_size": vocab, "hidden_size": hidden,
        "intermediate_size": int(a("feed_forward_length")), "num_hidden_layers": int(a("block_count")),
        "num_attention_heads": heads, "num_key_value_heads": kv_heads, "head_dim": head_dim,
        "rms_norm_eps": float(a("attention.layer_norm_rms_epsilon", 1e-6)),
        "max_position_embeddings": int(a("context_length", 2048)),
        "rope_theta": float(a("rope.freq_base", 10000.0)),
        "tie_word_embeddings": "output.weight" not in names,
        "bos_token_id": _field(r, "tokenizer.ggml.bos_token_id"),
        "eos_token_id": _field(r, "tokenizer.ggml.eos_token_id"),
        "pad_token_id": _field(r, "tokenizer.ggml.padding_token_id"),
    }
    scaling = a("rope.scaling.type")
    if scaling and scaling != "none":
        cfg["rope_scaling"] = {"rope_type": scaling, "factor": float(a("rope.scaling.factor", 1.0))}
        orig = a("rope.scaling.original_context_length")
        if orig:
            cfg["rope_scaling"]["original_max_position_embeddings"] = int(orig)
    if arch == "llama":
        cfg["attention_bias"] = "blk.0.attn_q.bias" in names
    tensors = {}
    items = r.tensors
    if progress:
        from tqdm import tqdm
        items = tqdm(items, desc=f"dequantising {path.name}", unit="tensor")
    for t in items:
        name = hf_name(t.name)
        if name is None:
            continue
        w = np.asarray(gguf.quants.dequantize(t.data, t.tensor_type), dtype=np.float32)
        w = w.reshape(tuple(int(x) for x in reversed(t.shape)))
        if arch == "llama" and ".self_attn.q_proj." in name:
            w = unpermute_qk(w, heads)
        elif arch == "llama" and ".self_attn.k_proj." in name:
            w = unpermute_qk(w, kv_heads)
        tensors[name] = w
    return cfg, tensors
