"""The real Qwen2.5-Coder-0.5B-Instruct (Q4_K_M GGUF): our decoder in float32 gives transformers' logits (its own GGUF
loading of the same file, float32) within cudaperf_jax.generation.parity.TOLERANCES["float32"] on four chat prompts
(30 to ~1,000 tokens, one a real task's CUDA prompt), the same argmax everywhere, and the same 64 greedy tokens;
the GGUF's tokenizer ends a chat turn with <|im_end|>, which is the model's stop id. Slow: two loads of 0.5B
parameters (about 2 minutes on two CPU cores) and, without /tmp/models/qwen05.gguf, a 491 MB fetch."""
from pathlib import Path

import pytest

LOCAL = Path("/tmp/models/qwen05.gguf")   # the assembled file, where a machine already has it


@pytest.mark.slow
def test_qwen_coder_05b_matches_transformers():
    from cudaperf_jax import assets
    from cudaperf_jax.generation import parity
    from cudaperf_jax.models.loading import load_policy

    path = LOCAL if LOCAL.is_file() else assets.model_path("qwen2.5-coder-0.5b", download=True)
    model, tok = load_policy(path, dtype="float32")
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    assert tok.eos_token_id == im_end == 151645 and model.cfg.eos_ids == (im_end,)
    assert tok.pad_token_id == tok.convert_tokens_to_ids("<|endoftext|>") == model.cfg.pad_token_id
    assert tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True) == (
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")

    report = parity.compare(model, tok, parity.load_reference(path), max_new_tokens=64, progress=False)
    lengths = [r["prompt_tokens"] for r in report["prompts"]]
    assert lengths == sorted(lengths) and lengths[-1] > 500, lengths
    assert parity.check(report, parity.TOLERANCES["float32"]) == [], report["prompts"]
    assert all(len(r["ours_tokens"]) > 0 for r in report["prompts"])
