"""Writes a policy checkpoint as a Hugging Face directory that transformers.AutoModelForCausalLM loads.

    python -m experiments.export --model=PATH --out=DIR [--dtype=float32|bfloat16]

PATH: a registered model name (python -m cudaperf_jax.assets list), a Hugging Face directory or a .gguf file
(dequantised). DIR receives config.json, model.safetensors, generation_config.json and the tokenizer files; its
logits equal this model's.
"""
from __future__ import annotations

import sys

from absl import app, flags

flags.DEFINE_string("model", "default", "A registered model name, Hugging Face directory or .gguf file.")
flags.DEFINE_string("out", None, "Output directory.", required=True)
flags.DEFINE_enum("dtype", "float32", ["float32", "bfloat16"], "dtype of the stored weights.")
FLAGS = flags.FLAGS


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments {argv[1:]}")
    from cudaperf_jax.models.config import ConfigError
    from cudaperf_jax.models.hf_io import CheckpointError, save_hf_dir
    from cudaperf_jax.models.loading import load_policy
    try:
        model, tok = load_policy(FLAGS.model, progress=True)
        out = save_hf_dir(model, FLAGS.out, tokenizer=tok, dtype=FLAGS.dtype)
    except (CheckpointError, ConfigError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    print(f"wrote {out} ({model.cfg.model_type}, {model.cfg.num_params / 1e6:.1f}M parameters)")


if __name__ == "__main__":
    app.run(main)
