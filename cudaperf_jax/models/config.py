"""Decoder configuration for the Llama, Qwen2 and Qwen3 families, read from and written to HF config.json.

`ModelConfig.from_hf(dict)` accepts both config.json styles: the older one (`rope_theta` plus
`rope_scaling`) and transformers 5's (`rope_parameters`). `to_hf()` writes a dict that
`transformers.AutoConfig.for_model(**d)` accepts and that reproduces the same model.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any

SUPPORTED_TYPES = ("llama", "qwen2", "qwen3")
SUPPORTED_ROPE = ("default", "linear", "dynamic", "llama3", "yarn")
_ARCH = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM"}
# size field -> the largest value a real checkpoint has (beyond: a damaged config, refused before any allocation)
_SIZES = {"vocab_size": 1 << 22, "hidden_size": 1 << 17, "intermediate_size": 1 << 19, "num_layers": 1 << 10,
          "num_heads": 1 << 10, "num_kv_heads": 1 << 10, "head_dim": 1 << 12, "max_position_embeddings": 1 << 24}


class ConfigError(ValueError):
    """A checkpoint configuration this decoder cannot represent; the message says what to change."""


@dataclasses.dataclass(frozen=True)
class RopeConfig:
    """RoPE parameters as transformers names them (`rope_parameters`)."""
    theta: float = 10000.0
    type: str = "default"
    factor: float | None = None
    low_freq_factor: float | None = None           # llama3
    high_freq_factor: float | None = None          # llama3
    original_max_position_embeddings: int | None = None  # llama3, yarn, dynamic
    beta_fast: float | None = None                 # yarn
    beta_slow: float | None = None                 # yarn
    attention_factor: float | None = None          # yarn
    mscale: float | None = None                    # yarn
    mscale_all_dim: float | None = None            # yarn
    truncate: bool | None = None                   # yarn
    partial_rotary_factor: float = 1.0

    def __post_init__(self):
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.name == "type" or v is None or (f.name == "truncate" and isinstance(v, bool)):
                continue
            if f.name == "truncate" or not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
                raise ConfigError(f"rope parameter {f.name} must be a finite number, not {v!r}; fix config.json")
        if not isinstance(self.type, str):
            raise ConfigError(f"rope_type must be a string, not {self.type!r}; fix config.json")

    def to_hf(self) -> dict[str, Any]:
        d = {"rope_type": self.type, "rope_theta": self.theta}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.name not in ("theta", "type", "partial_rotary_factor") and v is not None:
                d[f.name] = v
        if self.partial_rotary_factor != 1.0:
            d["partial_rotary_factor"] = self.partial_rotary_factor
        return d


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Shape and options of one decoder-only checkpoint."""
    model_type: str = "llama"
    vocab_size: int = 32000
    hidden_size: int = 512
    intermediate_size: int = 1376
    num_layers: int = 4
    num_heads: int = 8
    num_kv_heads: int = 8
    head_dim: int = 64
    rms_norm_eps: float = 1e-6
    max_position_embeddings: int = 2048
    rope: RopeConfig = RopeConfig()
    tie_word_embeddings: bool = False
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    qk_norm: bool = False
    bos_token_id: int | None = None
    eos_token_id: int | list[int] | None = None
    pad_token_id: int | None = None

    def __post_init__(self):
        if self.model_type not in SUPPORTED_TYPES:
            raise ConfigError(f"model_type {self.model_type!r} is not supported; use one of {SUPPORTED_TYPES}")
        for name, top in _SIZES.items():
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= top:
                raise ConfigError(f"{name} must be an integer from 1 to {top}, not {v!r}; fix config.json")
        for name in ("bos_token_id", "pad_token_id"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool)):
                raise ConfigError(f"{name} must be an integer or null, not {v!r}; fix config.json")
        e = self.eos_token_id
        if e is not None and not (isinstance(e, int) and not isinstance(e, bool)) and not (
                isinstance(e, (list, tuple)) and all(isinstance(x, int) and not isinstance(x, bool) for x in e)):
            raise ConfigError(f"eos_token_id must be an integer, a list of them or null, not {e!r}; fix config.json")
        if not (self.rms_norm_eps >= 0 and math.isfinite(self.rms_norm_eps)):
            raise ConfigError(f"rms_norm_eps must be a finite number >= 0, not {self.rms_norm_eps!r}; fix config.json")
        if not (self.rope.theta > 0 and math.isfinite(self.rope.theta)):
            raise ConfigError(f"rope_theta must be a finite number > 0, not {self.rope.theta!r}; fix config.json")
        if self.num_heads % self.num_kv_heads:
            raise ConfigError(f"num_attention_heads ({self.num_heads}) must be a multiple of "
                              f"num_key_value_heads ({self.num_kv_heads}); fix config.json")
        if self.rope.type not in SUPPORTED_ROPE:
            raise ConfigError(f"rope_type {self.rope.type!r} is not supported; use one of {SUPPORTED_ROPE}")

    @property
    def eos_ids(self) -> tuple[int, ...]:
        e = self.eos_token_id
        return () if e is None else tuple(e) if isinstance(e, (list, tuple)) else (int(e),)

    @property
    def num_params(self) -> int:
        """Parameter count (embeddings counted once when tied)."""
        d, f, hd = self.hidden_size, self.intermediate_size, self.head_dim
        attn = d * hd * (2 * self.num_heads + 2 * self.num_kv_heads)
        if self.qkv_bias:
            attn += hd * (self.num_heads + 2 * self.num_kv_heads)
        if self.o_bias:
            attn += d
        mlp = 3 * d * f + (2 * f + d if self.mlp_bias else 0)
        layer = attn + mlp + 2 * d + (2 * hd if self.qk_norm else 0)
        emb = self.vocab_size * d * (1 if self.tie_word_embeddings else 2)
        return self.num_layers * layer + emb + d

    @classmethod
    def from_hf(cls, cfg: dict[str, Any]) -> ModelConfig:
        """From a config.json dict (or `PretrainedConfig.to_dict()`); ConfigError names what is missing or wrong."""
        if not isinstance(cfg, dict):
            raise ConfigError(f"a model config must be a JSON object, not {type(cfg).__name__}; fix config.json")
        try:
            return cls._from_hf(cfg)
        except KeyError as e:
            raise ConfigError(f"the model config has no {e.args[0]!r}; fix config.json") from None
        except (TypeError, ValueError, ZeroDivisionError, AttributeError, OverflowError) as e:
            if isinstance(e, ConfigError):
                raise
            raise ConfigError(f"the model config is not usable ({type(e).__name__}: "
                              f"{' '.join(str(e).split())[:160]}); fix config.json") from None

    @classmethod
    def _from_hf(cls, cfg: dict[str, Any]) -> ModelConfig:
        mt = cfg.get("model_type", "llama")
        if mt not in SUPPORTED_TYPES:
            raise ConfigError(f"model_type {mt!r} is not supported; use a Llama, Qwen2 or Qwen3 checkpoint")
        if cfg.get("use_sliding_window") and mt != "llama":
            raise ConfigError("sliding-window attention is not supported; set use_sliding_window=false")
        heads = cfg["num_attention_heads"]
        hd = cfg.get("head_dim") or cfg["hidden_size"] // heads
        rp = dict(cfg.get("rope_parameters") or {})
        rs = dict(cfg.get("rope_scaling") or {})
        rp = {**rs, **rp}
        rtype = rp.get("rope_type", rp.get("type", "default")) or "default"
        theta = rp.get("rope_theta", cfg.get("rope_theta", 10000.0))
        known = {f.name for f in dataclasses.fields(RopeConfig)}
        extra = {k: v for k, v in rp.items() if k in known and k not in ("theta", "type")}
        rope = RopeConfig(theta=float(theta), type=rtype, **extra)
        attn_bias = bool(cfg.get("attention_bias", False))
        return cls(
            model_type=mt, vocab_size=cfg["vocab_size"], hidden_size=cfg["hidden_size"],
            intermediate_size=cfg["intermediate_size"], num_layers=cfg["num_hidden_layers"],
            num_heads=heads, num_kv_heads=cfg.get("num_key_value_heads") or heads, head_dim=hd,
            rms_norm_eps=float(cfg.get("rms_norm_eps", 1e-6)),
            max_position_embeddings=int(cfg.get("max_position_embeddings", 2048)), rope=rope,
            tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            qkv_bias=True if mt == "qwen2" else attn_bias,
            o_bias=False if mt == "qwen2" else attn_bias,
            mlp_bias=bool(cfg.get("mlp_bias", False)) if mt == "llama" else False,
            qk_norm=mt == "qwen3", bos_token_id=cfg.get("bos_token_id"),
            eos_token_id=cfg.get("eos_token_id"), pad_token_id=cfg.get("pad_token_id"))

    def to_hf(self) -> dict[str, Any]:
        """A config.json dict for transformers (writes both rope styles so old and new versions read it)."""
        if self.model_type == "qwen2" and (not self.qkv_bias or self.o_bias or self.mlp_bias):
            raise ConfigError("a qwen2 checkpoint has q/k/v biases only; this model cannot be exported as qwen2")
        if self.model_type == "qwen3" and (self.qkv_bias != self.o_bias or self.mlp_bias or not self.qk_norm):
            raise ConfigError("this model's biases/norms do not match the qwen3 layout; cannot export it")
        d: dict[str, Any] = {
            "architectures": [_ARCH[self.model_type]], "model_type": self.model_type,
            "vocab_size": self.vocab_size, "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size, "num_hidden_layers": self.num_layers,
            "num_attention_heads": self.num_heads, "num_key_value_heads": self.num_kv_heads,
            "head_dim": self.head_dim, "rms_norm_eps": self.rms_norm_eps, "hidden_act": "silu",
            "max_position_embeddings": self.max_position_embeddings,
            "tie_word_embeddings": self.tie_word_embeddings, "rope_theta": self.rope.theta,
            "rope_parameters": self.rope.to_hf(), "torch_dtype": "float32", "use_cache": True,
            "bos_token_id": self.bos_token_id, "eos_token_id": self.eos_token_id,
            "pad_token_id": self.pad_token_id,
        }
        if self.rope.type != "default":
            d["rope_scaling"] = self.rope.to_hf()
        if self.model_type == "llama":
            d["attention_bias"] = self.qkv_bias
            d["mlp_bias"] = self.mlp_bias
            if self.qkv_bias != self.o_bias:
                raise ConfigError("a llama checkpoint has either all or no attention biases; cannot export it")
        elif self.model_type == "qwen3":
            d["attention_bias"] = self.qkv_bias
        if self.model_type != "llama":
            d["use_sliding_window"] = False
        return d
