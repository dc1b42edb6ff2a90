"""Hugging Face checkpoints in and out: config.json + safetensors shards <-> Decoder.

The interchange format is a flat dict of HF tensor names to arrays in HF layout ([out, in] kernels);
`gguf_io` produces the same dict from a GGUF file, so every source goes through `model_from_hf_state`.
"""
from __future__ import annotations

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from cudaperf_jax.models.config import ModelConfig
from cudaperf_jax.models.decoder import Decoder
from cudaperf_jax.models.sharding import array_sharding


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be read; the message says what is wrong and what to do."""


def _layer_names(i: int) -> dict[str, str]:
    p = f"model.layers.{i}."
    return {k: p + v for k, v in {
        "q": "self_attn.q_proj", "k": "self_attn.k_proj", "v": "self_attn.v_proj", "o": "self_attn.o_proj",
        "qn": "self_attn.q_norm.weight", "kn": "self_attn.k_norm.weight", "an": "input_layernorm.weight",
        "mn": "post_attention_layernorm.weight", "gate": "mlp.gate_proj", "up": "mlp.up_proj",
        "down": "mlp.down_proj"}.items()}


def abstract_model(cfg: ModelConfig, dtype=jnp.float32, param_dtype=jnp.float32) -> Decoder:
    """A Decoder whose parameters are shapes only (nothing allocated)."""
    return nnx.eval_shape(lambda: Decoder(cfg, rngs=nnx.Rngs(0), dtype=dtype, param_dtype=param_dtype))


def model_from_hf_state(cfg: ModelConfig, tensors: dict, *, dtype=jnp.float32, param_dtype=jnp.float32,
                        mesh=None) -> Decoder:
    """Builds a Decoder from HF-named tensors (numpy or jax arrays, HF layout), sharded on `mesh` if given."""
    model = abstract_model(cfg, dtype, param_dtype)

    def get(name):
        if name not in tensors:
            raise CheckpointError(f"the checkpoint has no tensor {name!r}; it does not match its "
                                  f"config ({cfg.model_type}, {cfg.num_layers} layers)")
        return np.asarray(tensors[name])

    def put(var: nnx.Param, arr):
        arr = np.asarray(arr)
        if tuple(arr.shape) != tuple(var.shape):
            raise CheckpointError(f"a tensor has shape {arr.shape} where the config implies {var.shape}; "
                                  "the checkpoint and its config.json disagree")
        x = jnp.asarray(arr, dtype=param_dtype)
        if mesh is not None:
            spec = var.get_metadata().get("out_sharding") or var.get_metadata().get("sharding_names") or ()
            x = jax.device_put(x, array_sharding(mesh, spec, x.shape))
        var.value = x

    put(model.embed, get("model.embed_tokens.weight"))
    put(model.final_norm.scale, get("model.norm.weight"))
    if model.lm_head is not None:
        put(model.lm_head, get("lm_head.weight").T)
    for i, layer in enumerate(model.layers):
        n = _layer_names(i)
        put(layer.attn_norm.scale, get(n["an"]))
        put(layer.mlp_norm.scale, get(n["mn"]))
        a = layer.attn
        put(a.qkv, np.concatenate([get(n[x] + ".weight").T for x in "qkv"], axis=1))
        if a.qkv_bias is not None:
            put(a.qkv_bias, np.concatenate([get(n[x] + ".bias") for x in "qkv"]))
        put(a.o, get(n["o"] + ".weight").T)
        if a.o_bias is not None:
            put(a.o_bias, get(n["o"] + ".bias"))
        if a.q_norm is not None:
            put(a.q_norm.scale, get(n["qn"]))
            put(a.k_norm.scale, get(n["kn"]))
        m = layer.mlp
        put(m.gate_up, np.stack([get(n["gate"] + ".weight").T, get(n["up"] + ".weight").T], axis=1))
        put(m.down, get(n["down"] + ".weight").T)
        if m.gate_up_bias is not None:
            put(m.gate_up_bias, np.stack([get(n["gate"] + ".bias"), get(n["up"] + ".bias")]))
            put(m.down_bias, get(n["down"] + ".bias"))
    return model


def model_to_hf_state(model: Decoder, dtype=np.float32) -> dict[str, np.ndarray]:
    """HF-named tensors (HF layout, numpy `dtype`) of a Decoder; the inverse of model_from_hf_state."""
    if model.has_adapters:
        raise CheckpointError("this model has LoRA adapters, which a plain checkpoint would drop; export "
                              "lora.merged_model(model), or the adapters alone with peft_io.save_peft_dir")
    cfg: ModelConfig = model.cfg
    h, kv, hd = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim

    def arr(var):
        return np.asarray(jax.device_get(var[...]).astype(np.float32)).astype(dtype)

    out = {"model.embed_tokens.weight": arr(model.embed), "model.norm.weight": arr(model.final_norm.scale)}
    if model.lm_head is not None:
        out["lm_head.weight"] = np.ascontiguousarray(arr(model.lm_head).T)
    cuts = np.cumsum([h * hd, kv * hd])
    for i, layer in enumerate(model.layers):
        n = _layer_names(i)
        out[n["an"]], out[n["mn"]] = arr(layer.attn_norm.scale), arr(layer.mlp_norm.scale)
        a = layer.attn
        for name, w in zip("qkv", np.split(arr(a.qkv), cuts, axis=1)):
            out[n[name] + ".weight"] = np.ascontiguousarray(w.T)
        if a.qkv_bias is not None:
            for name, b in zip("qkv", np.split(arr(a.qkv_bias), cuts)):
                out[n[name] + ".bias"] = b
        out[n["o"] + ".weight"] = np.ascontiguousarray(arr(a.o).T)
        if a.o_bias is not None:
            out[n["o"] + ".bias"] = arr(a.o_bias)
        if a.q_norm is not None:
            out[n["qn"]], out[n["kn"]] = arr(a.q_norm.scale), arr(a.k_norm.scale)
        gu = arr(layer.mlp.gate_up)
        out[n["gate"] + ".weight"] = np.ascontiguousarray(gu[:, 0].T)
        out[n["up"] + ".weight"] = np.ascontiguousarray(gu[:, 1].T)
        out[n["down"] + ".weight"] = np.ascontiguousarray(arr(layer.mlp.down).T)
        if layer.mlp.gate_up_bias is not None:
            gub = arr(layer.mlp.gate_up_bias)
            out[n["gate"] + ".bias"], out[n["up"] + ".bias"] = gub[0], gub[1]
            out[n["down"] + ".bias"] = arr(layer.mlp.down_bias)
    return out


def read_hf_dir(path: str | Path) -> tuple[dict, dict[str, np.ndarray]]:
    """(config.json dict, tensors) of a Hugging Face model directory with safetensors weights."""
    from safetensors import safe_open
    path = Path(path)
    cfg_file = path / "config.json"
    if not cfg_file.is_file():
        raise CheckpointError(f"{path} has no config.json; pass a Hugging Face model directory or a .gguf file")
    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise CheckpointError(f"{path} has no *.safetensors files; convert the weights to safetensors "
                              "(transformers: model.save_pretrained(dir, safe_serialization=True))")
    try:
        cfg = json.loads(cfg_file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{cfg_file} is not valid JSON ({_one_line(e)}); restore it from the model's "
                              "source") from None
    tensors = {}
    for f in files:
        try:
            with safe_open(str(f), framework="flax") as fh:
                for k in fh.keys():  # noqa: SIM118  (safe_open is not iterable)
                    tensors[k] = np.asarray(fh.get_tensor(k))
        except Exception as e:  # noqa: BLE001 - safetensors raises its own error type (and others) for a damaged file
            raise CheckpointError(f"{f} is not a readable safetensors file ({_one_line(e)}); it is incomplete or "
                                  "damaged: download or export it again") from None
    return cfg, tensors


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text[:200]}" if text else type(e).__name__


def load_hf_dir(path, *, dtype=jnp.float32, param_dtype=jnp.float32, mesh=None) -> Decoder:
    """A Decoder from a Hugging Face directory (config.json + safetensors)."""
    cfg_dict, tensors = read_hf_dir(path)
    cfg = ModelConfig.from_hf(cfg_dict)
    return model_from_hf_state(cfg, tensors, dtype=dtype, param_dtype=param_dtype, mesh=mesh)


def save_hf_dir(model: Decoder, out_dir: str | Path, *, tokenizer=None, dtype: str = "float32",
                generation_config: dict | None = None) -> Path:
    """Writes config.json, model.safetensors, generation_config.json (and tokenizer files) to out_dir.

    dtype: "float32" or "bfloat16" for the stored weights.
    """
    from safetensors.flax import save_file
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cfg = model.cfg.to_hf()
    cfg["torch_dtype"] = dtype
    (out / "config.json").write_text(json.dumps(cfg, indent=2))
    state = model_to_hf_state(model)
    jdt = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}[dtype]
    save_file({k: jnp.asarray(v, jdt) for k, v in state.items()}, str(out / "model.safetensors"),
              metadata={"format": "pt"})
    gen = {"bos_token_id": model.cfg.bos_token_id, "eos_token_id": model.cfg.eos_token_id,
           "pad_token_id": model.cfg.pad_token_id, **(generation_config or {})}
    (out / "generation_config.json").write_text(json.dumps(gen, indent=2))
    if tokenizer is not None:
        tokenizer.save_pretrained(str(out))
    return out
