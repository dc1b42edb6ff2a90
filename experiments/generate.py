"""Prints the continuation of a prompt by the policy.

    python -m experiments.generate --model=PATH --prompt=TEXT [--max_new_tokens=N --temperature=T
        --top_p=P --top_k=K --seed=S --chat --stop=STR ...]

PATH: a registered model name ("default" = smollm2-135m, qwen2.5-coder-0.5b, qwen2.5-coder-1.5b; fetched into the
cache on first use), a Hugging Face directory, a .gguf file or an exported checkpoint.
With --temperature=0 decoding is greedy (the same tokens as transformers' greedy generate).
"""
from __future__ import annotations

import sys

from absl import app, flags

flags.DEFINE_string("model", "default", "A registered model name (python -m cudaperf_jax.assets list), Hugging Face "
                    "directory, .gguf file or exported checkpoint.")
flags.DEFINE_string("prompt", None, "Prompt text.", required=True)
flags.DEFINE_integer("max_new_tokens", 128, "Most tokens to generate.")
flags.DEFINE_float("temperature", 0.0, "Sampling temperature; 0 is greedy.")
flags.DEFINE_float("top_p", 1.0, "Nucleus sampling mass (1 = off).")
flags.DEFINE_integer("top_k", 0, "Top-k filter (0 = off).")
flags.DEFINE_integer("seed", 0, "PRNG seed.")
flags.DEFINE_bool("chat", False, "Wrap the prompt in the tokenizer's chat template (one user turn).")
flags.DEFINE_multi_string("stop", [], "Stop string (repeatable).")
flags.DEFINE_enum("dtype", "float32", ["float32", "bfloat16"], "Compute and weight dtype.")
FLAGS = flags.FLAGS


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments {argv[1:]}")
    from cudaperf_jax.generation.sampler import Sampler, SamplingParams
    from cudaperf_jax.models.config import ConfigError
    from cudaperf_jax.models.hf_io import CheckpointError
    from cudaperf_jax.models.loading import load_policy
    try:
        model, tok = load_policy(FLAGS.model, dtype=FLAGS.dtype)
        if tok is None:
            raise CheckpointError(f"{FLAGS.model} has no tokenizer files; export it with experiments/export.py "
                                  "or copy the tokenizer into the directory")
        params = SamplingParams(max_new_tokens=FLAGS.max_new_tokens, temperature=FLAGS.temperature,
                                top_p=FLAGS.top_p, top_k=FLAGS.top_k, stop_strings=tuple(FLAGS.stop))
        out = Sampler(model, tok).generate([FLAGS.prompt], params, seed=FLAGS.seed, chat=FLAGS.chat)
    except (CheckpointError, ConfigError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    print(out.texts[0])


if __name__ == "__main__":
    app.run(main)
