"""Tiny random checkpoints (transformers, PyTorch) and a tiny byte-level BPE tokenizer for tests."""
from __future__ import annotations

import numpy as np

CHAT_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
                 "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
CORPUS = [("__global__ void add(float* a, const float* b, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; "
          "if (i < n) a[i] += b[i]; }"), "The quick brown fox jumps over the lazy dog.",
          "def add(a, b):\n    return a + b\n", "```cuda\nint main() { return 0; }\n```"] * 4
COMMON = {"vocab_size": 320, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4,
              "num_key_value_heads": 2, "max_position_embeddings": 256, "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0}


def hf_config(kind: str, **over):
    import transformers as tf
    if kind == "llama":
        c = dict(COMMON, rope_theta=500000.0, rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                 "high_freq_factor": 4.0, "original_max_position_embeddings": 64})
        return tf.LlamaConfig(**{**c, **over})
    if kind == "qwen2":
        c = dict(COMMON, tie_word_embeddings=True,
                 rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64})
        return tf.Qwen2Config(**{**c, **over})
    if kind == "qwen3":
        c = dict(COMMON, head_dim=32, rope_scaling={"rope_type": "linear", "factor": 2.0})
        return tf.Qwen3Config(**{**c, **over})
    raise ValueError(kind)


def hf_model(kind: str, seed: int = 0, **over):
    """A float32 transformers model with random weights (norm scales and biases randomised too)."""
    import torch
    import transformers as tf
    torch.manual_seed(seed)
    m = tf.AutoModelForCausalLM.from_config(hf_config(kind, **over), dtype=torch.float32).eval()
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return m


def state_dict(model) -> dict[str, np.ndarray]:
    return {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}


def tokenizer():
    """A byte-level BPE tokenizer (<= 320 ids) with <|endoftext|>=0, <|im_start|>=1, <|im_end|>=2 and a chat template."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import PreTrainedTokenizerFast
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(CORPUS, vocab_size=320, min_frequency=1,
                            special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"], show_progress=False)
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, bos_token="<|im_start|>", eos_token="<|im_end|>",
                                  pad_token="<|endoftext|>")
    tok.chat_template = CHAT_TEMPLATE
    return tok


def stepwise_logits(model, toks, slots: int, cache_dtype=None, kernels=None) -> np.ndarray:
    """Logits [1, T, V] of a batch-1 decoder fed one token at a time through its KV cache, so that every
    matmul has one row (the decode path), with the decode kernels `kernels` (a DecodeKernels; None: XLA) and the
    weight layouts the Sampler would build for them (Decoder.kernel_layouts)."""
    import jax.numpy as jnp
    from flax import nnx

    from cudaperf_jax.models.decoder import KVCache

    cache = KVCache.zeros(model.cfg, 1, slots, cache_dtype or jnp.float32)
    layouts = model.kernel_layouts(kernels, 1, cache.k[0].shape, cache.k[0].dtype)

    def one(m, t, p, c, i, lay):
        return m(t, p, cache=c, cache_index=i, kernels=kernels, layouts=lay) if lay else \
            m(t, p, cache=c, cache_index=i, kernels=kernels)
    step = nnx.jit(one)
    outs = []
    for t in range(toks.shape[1]):
        logits, cache = step(model, toks[:, t:t + 1], jnp.full((1, 1), t, jnp.int32), cache, jnp.int32(t), layouts)
        outs.append(np.asarray(logits))
    return np.concatenate(outs, axis=1)


def attention_reference(q, kn, vn, kc, vc, mask, idx):
    """Plain-JAX one-token attention with the cache write (the decoder's semantics): (out [B, 1, H*Dh],
    new k cache, new v cache) for q [B, 1, H, Dh], k/v [B, 1, Hkv, Dh], caches [B, Hkv, S, Dh], mask bool [B, S]."""
    import jax
    import jax.numpy as jnp
    b, _, h, dh = q.shape
    hkv = kc.shape[1]
    kc2, vc2 = kc.at[:, :, idx].set(kn[:, 0]), vc.at[:, :, idx].set(vn[:, 0])
    qg = q.reshape(b, hkv, h // hkv, dh)
    s = jnp.einsum("bkgd,bksd->bkgs", qg, kc2) * dh ** -0.5
    valid = (jnp.arange(kc.shape[2]) <= idx)[None] & mask
    p = jax.nn.softmax(jnp.where(valid[:, None, None, :], s, -1e30), axis=-1)
    return jnp.einsum("bkgs,bksd->bkgd", p, vc2).reshape(b, 1, h * dh), kc2, vc2
