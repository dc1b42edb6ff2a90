"""Writes a policy checkpoint as a Hugging Face directory that transformers.AutoModelForCausalLM loads and, for a LoRA
policy, its adapter alone in PEFT's format.

    python -m experiments.export --model=PATH --out=DIR [--dtype=float32|bfloat16]
        [--adapter_out=ADAPTER_DIR] [--adapter_dtype=float32|bfloat16]

PATH: a registered model name (python -m cudaperf_jax.assets list), a Hugging Face directory, a .gguf file
(dequantised), a training run directory, or BASE+ADAPTER (models.loading). DIR receives config.json,
model.safetensors, generation_config.json and the tokenizer files, the adapters merged; its logits equal this
model's. When PATH is a LoRA run (or BASE+ADAPTER), ADAPTER_DIR (default DIR/adapter) receives adapter_config.json +
adapter_model.safetensors, which peft.PeftModel.from_pretrained(base, ADAPTER_DIR) loads; its base_model_name_or_path
is the base's Hugging Face id where known (e.g. Qwen/Qwen2.5-Coder-1.5B-Instruct for qwen2.5-coder-1.5b).
--adapter_dtype=bfloat16 halves the adapter file.
"""
from __future__ import annotations

import sys
from pathlib import Path

from absl import app, flags

flags.DEFINE_string("model", "default", "A registered model name, Hugging Face directory, .gguf file, training run "
                    "directory or BASE+ADAPTER.")
flags.DEFINE_string("out", None, "Output directory.", required=True)
flags.DEFINE_enum("dtype", "float32", ["float32", "bfloat16"], "dtype of the stored weights.")
flags.DEFINE_string("adapter_out", "", "Where a LoRA policy's PEFT adapter goes (default: OUT/adapter).")
flags.DEFINE_enum("adapter_dtype", "float32", ["float32", "bfloat16"], "dtype of the adapter file.")
FLAGS = flags.FLAGS


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments {argv[1:]}")
    from cudaperf_jax.models.config import ConfigError
    from cudaperf_jax.models.export import export_policy
    from cudaperf_jax.models.hf_io import CheckpointError
    from cudaperf_jax.models.loading import adapter_base_id, load_policy
    try:
        model, tok = load_policy(FLAGS.model, progress=True, merge=False)
        written = export_policy(model, FLAGS.out, tokenizer=tok, dtype=FLAGS.dtype,
                                adapter_dir=FLAGS.adapter_out or Path(FLAGS.out) / "adapter",
                                adapter_dtype=FLAGS.adapter_dtype, base_model_name_or_path=adapter_base_id(FLAGS.model))
    except (CheckpointError, ConfigError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    print(f"wrote {written['hf']} ({model.cfg.model_type}, {model.cfg.num_params / 1e6:.1f}M parameters)")
    if "adapter" in written:
        print(f"wrote {written['adapter']} (PEFT LoRA adapter, {FLAGS.adapter_dtype})")


if __name__ == "__main__":
    app.run(main)
