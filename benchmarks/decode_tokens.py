"""The tokens the Sampler decodes for a fixed prompt, with its default decode kernels, as JSON: for comparing two
trees (the same random weights: the same init code and seed). Standalone - it imports the package from PYTHONPATH and
uses only API that the tree before the kernels package (c4f2f74) has too, so the same file runs against both:

    PYTHONPATH=/path/to/tree python benchmarks/decode_tokens.py --out tokens.json [--models smollm2,qwen2.5-1.5b]

Per model (random SmolLM2-135M- and Qwen2.5-1.5B-shaped decoders in bf16 on a GPU): 48 greedy tokens and 48 tokens
sampled with seed 0 (temperature 1, top-k 50, top-p 0.9: the CUDA top-k path), their log-probabilities, and which
decode config ran (the new tree's DecodeKernels, or the old tree's CUDAPERF_* environment).
"""
from __future__ import annotations

import argparse
import json
import os
import time

SPECS = {
    "qwen2.5-1.5b": {"model_type": "qwen2", "vocab_size": 151936, "hidden_size": 1536, "intermediate_size": 8960,
                     "num_hidden_layers": 28, "num_attention_heads": 12, "num_key_value_heads": 2, "head_dim": 128,
                     "max_position_embeddings": 32768, "rope_theta": 1000000.0, "rms_norm_eps": 1e-6,
                     "tie_word_embeddings": True, "bos_token_id": 151643, "eos_token_id": 151645,
                     "pad_token_id": 151643, "use_sliding_window": False},
    "smollm2": {"model_type": "llama", "vocab_size": 49152, "hidden_size": 576, "intermediate_size": 1536,
                "num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3, "head_dim": 64,
                "max_position_embeddings": 8192, "rope_theta": 100000.0, "rms_norm_eps": 1e-5,
                "tie_word_embeddings": True, "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 2},
}


def run(name: str, new_tokens: int) -> dict:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from flax import nnx

    from cudaperf_jax.generation.sampler import Sampler, SamplingParams
    from cudaperf_jax.models.config import ModelConfig
    from cudaperf_jax.models.decoder import Decoder
    dtype = jnp.bfloat16 if jax.default_backend() == "gpu" else jnp.float32
    model = Decoder(ModelConfig.from_hf(SPECS[name]), rngs=nnx.Rngs(0), dtype=dtype, param_dtype=dtype)
    prompt = [int(t) for t in np.random.RandomState(7).randint(3, SPECS[name]["vocab_size"], 40)]
    sampler = Sampler(model, prompt_bucket=64, pad_id=0)
    out = {}
    for mode, params in (("greedy", SamplingParams(max_new_tokens=new_tokens, temperature=0.0, stop_token_ids=())),
                         ("sampled", SamplingParams(max_new_tokens=new_tokens, temperature=1.0, top_k=50, top_p=0.9,
                                                    stop_token_ids=()))):
        got = sampler.generate([prompt], params, seed=0)
        out[mode] = {"tokens": got.tokens[0].tolist(), "logprobs": [round(float(x), 6) for x in got.logprobs[0]]}
    kernels = getattr(sampler, "kernels", None)   # the new tree: the DecodeKernels that ran
    out["decode_config"] = (kernels.resolve(1).to_dict() if kernels is not None else
                            {k: v for k, v in os.environ.items() if k.startswith("CUDAPERF_")})
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", default="smollm2,qwen2.5-1.5b")
    ap.add_argument("--new_tokens", type=int, default=48)
    args = ap.parse_args(argv)
    import jax
    res = {"device": str(jax.devices()[0]), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "models": {name: run(name, args.new_tokens) for name in args.models.split(",")}}
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)
    for name, r in res["models"].items():
        print(f"{name:14s} greedy {r['greedy']['tokens'][:8]}... sampled {r['sampled']['tokens'][:8]}...", flush=True)
    return res


if __name__ == "__main__":
    main()
