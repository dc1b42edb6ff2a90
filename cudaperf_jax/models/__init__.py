"""The policy LLM: a Flax NNX decoder for Llama/Qwen2/Qwen3 checkpoints, weights in (HF, GGUF) and out (HF)."""
from cudaperf_jax.models.config import ConfigError, ModelConfig, RopeConfig
from cudaperf_jax.models.decoder import Decoder, KVCache
from cudaperf_jax.models.hf_io import CheckpointError, load_hf_dir, save_hf_dir
from cudaperf_jax.models.loading import load_policy, load_tokenizer
from cudaperf_jax.models.sharding import make_mesh, shard_model

__all__ = ["CheckpointError", "ConfigError", "Decoder", "KVCache", "ModelConfig", "RopeConfig", "load_hf_dir",
           "load_policy", "load_tokenizer", "make_mesh", "save_hf_dir", "shard_model"]
