"""The policy LLM: a Flax NNX decoder for Llama/Qwen2/Qwen3 checkpoints, weights in (HF, GGUF) and out (HF), and
its LoRA adapters (lora.py; PEFT's format: peft_io.py)."""
from cudaperf_jax.models.config import ConfigError, ModelConfig, RopeConfig
from cudaperf_jax.models.decoder import Decoder, KVCache
from cudaperf_jax.models.hf_io import CheckpointError, load_hf_dir, save_hf_dir
from cudaperf_jax.models.loading import load_policy, load_tokenizer
from cudaperf_jax.models.lora import LoRAConfig, add_adapters
from cudaperf_jax.models.sharding import make_mesh, shard_model

__all__ = ["CheckpointError", "ConfigError", "Decoder", "KVCache", "LoRAConfig", "ModelConfig", "RopeConfig",
           "add_adapters", "load_hf_dir", "load_policy", "load_tokenizer", "make_mesh", "save_hf_dir", "shard_model"]
