"""The real default model (SmolLM2-135M-Instruct, Q4_1 GGUF): the JAX sampler's greedy continuation equals
transformers' (its own GGUF conversion of the same file) for 32 tokens on three prompts. Slow: it
fetches the model into $CUDAPERF_CACHE and dequantises 135M parameters twice."""
import numpy as np
import pytest
import torch


@pytest.mark.slow
def test_smollm2_greedy_matches_transformers():
    import transformers as tf
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    from cudaperf_jax.assets import default_model_path
    from cudaperf_jax.generation.sampler import Sampler, SamplingParams
    from cudaperf_jax.models.loading import load_policy

    path = default_model_path(download=True)
    model, tok = load_policy(path)
    cfg = tf.AutoConfig.from_pretrained(str(path.parent), gguf_file=path.name)
    ref = tf.AutoModelForCausalLM.from_config(cfg, dtype=torch.float32).eval()
    tensors = load_gguf_checkpoint(str(path), return_tensors=True, model_to_load=ref)["tensors"]
    ref.load_state_dict({k: torch.as_tensor(np.asarray(v)) for k, v in tensors.items()}, strict=False)

    prompts = ["def add(a, b):", "The capital of France is",
               "Write a CUDA kernel that adds two float vectors of length n."]
    out = Sampler(model, tok).generate(prompts, SamplingParams(max_new_tokens=32, temperature=0))
    for i, p in enumerate(prompts):
        ids = tok(p, return_tensors="pt").input_ids
        with torch.no_grad():
            want = ref.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=32,
                                do_sample=False)[0, ids.shape[1]:].tolist()
        assert out.tokens[i, : out.lengths[i]].tolist() == want, (p, out.texts[i])
    chat = Sampler(model, tok).generate(["What is 2+2?"], SamplingParams(max_new_tokens=32, temperature=0),
                                        chat=True)
    assert chat.texts[0].strip()
