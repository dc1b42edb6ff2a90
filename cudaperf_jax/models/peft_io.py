"""LoRA adapters in and out in Hugging Face PEFT's format: adapter_config.json + adapter_model.safetensors.

    save_peft_dir(model, dir, base_model_name_or_path="Qwen/Qwen2.5-Coder-1.5B-Instruct")
    load_peft_dir(model, dir)      # adds the directory's adapters to a plain Decoder (or fills the model's own)

PEFT names a tensor `base_model.model.model.layers.<i>.self_attn.q_proj.lora_A.weight` and stores lora_A [r, in] and
lora_B [out, r] (torch's Linear layout); ours are A [in, r] and B [r, out], so each is transposed on the way. Both
scale the adapter output by lora_alpha / r. `peft.PeftModel.from_pretrained(hf_model, dir)` reads what this writes.
"""
from __future__ import annotations

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from cudaperf_jax.models.decoder import Decoder
from cudaperf_jax.models.hf_io import CheckpointError, _one_line
from cudaperf_jax.models.lora import (
    TARGETS,
    LoRAConfig,
    adapter_shapes,
    add_adapters,
    lora_config,
)

CONFIG_FILE, WEIGHTS_FILE = "adapter_config.json", "adapter_model.safetensors"
MODULES = {"q": "self_attn.q_proj", "k": "self_attn.k_proj", "v": "self_attn.v_proj", "o": "self_attn.o_proj",
           "gate": "mlp.gate_proj", "up": "mlp.up_proj", "down": "mlp.down_proj"}
_BY_PEFT_NAME = {m.rsplit(".", 1)[1]: t for t, m in MODULES.items()}      # "q_proj" -> "q"
# adapter_config.json settings of variants this loader cannot represent, with their plain-LoRA values.
_PLAIN = {"use_rslora": False, "use_dora": False, "bias": "none", "lora_bias": False, "fan_in_fan_out": False,
          "layers_to_transform": None, "layers_pattern": None, "modules_to_save": None, "rank_pattern": {},
          "alpha_pattern": {}, "target_parameters": None, "trainable_token_indices": None, "layer_replication": None,
          "exclude_modules": None}


def _key(i: int, target: str, ab: str) -> str:
    return f"base_model.model.model.layers.{i}.{MODULES[target]}.lora_{ab}.weight"


def _loras(model: Decoder, cfg: LoRAConfig):
    """(layer index, target, its nnx.LoRA) for every adapter of the model."""
    for i, layer in enumerate(model.layers):
        for t in cfg.names:
            block = layer.attn if t in ("q", "k", "v", "o") else layer.mlp
            yield i, t, getattr(block.lora, t)


def peft_config(cfg: LoRAConfig, base_model_name_or_path: str | None = None) -> dict:
    """The adapter_config.json dict of a LoRAConfig (PEFT's LoraConfig fields for a plain LoRA on a causal LM)."""
    return {"peft_type": "LORA", "task_type": "CAUSAL_LM", "base_model_name_or_path": base_model_name_or_path,
            "r": cfg.rank, "lora_alpha": cfg.alpha, "lora_dropout": cfg.dropout,
            "target_modules": [MODULES[t].rsplit(".", 1)[1] for t in cfg.names], "init_lora_weights": True,
            "inference_mode": True, **_PLAIN}


def save_peft_dir(model: Decoder, out_dir: str | Path, *, base_model_name_or_path: str | None = None,
                  dtype: str = "float32") -> Path:
    """Writes the model's adapters as a PEFT directory (adapter_config.json, adapter_model.safetensors).

    dtype: "float32" (as trained) or "bfloat16" (half the bytes; PEFT and load_peft_dir read either)."""
    import ml_dtypes
    from safetensors.numpy import save_file
    np_dtype = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16}.get(dtype)
    if np_dtype is None:
        raise ValueError(f"dtype={dtype!r}: the adapter file is written in float32 or bfloat16")
    cfg = lora_config(model)
    if cfg is None:
        raise ValueError("this model has no LoRA adapters to export; add them (lora.add_adapters) or export the "
                         "whole model with hf_io.save_hf_dir")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tensors = {}
    for i, t, lo in _loras(model, cfg):
        for ab, w in (("A", lo.lora_a), ("B", lo.lora_b)):
            f32 = np.asarray(jax.device_get(w[...]), np.float32).T
            tensors[_key(i, t, ab)] = np.ascontiguousarray(f32.astype(np_dtype))
    save_file(tensors, str(out / WEIGHTS_FILE), metadata={"format": "pt"})
    (out / CONFIG_FILE).write_text(json.dumps(peft_config(cfg, base_model_name_or_path), indent=2, sort_keys=True))
    return out


def _targets(modules, where: Path) -> str:
    """Our comma-separated targets for PEFT's target_modules (a list of names, or "all-linear")."""
    if modules == "all-linear":
        return ",".join(TARGETS)
    if isinstance(modules, str) or not isinstance(modules, list) or not modules:
        raise CheckpointError(f"{where} gives target_modules as {modules!r}; only a list of module names among "
                              f"{sorted(_BY_PEFT_NAME)} (or 'all-linear') can be loaded")
    bad = [m for m in modules if m not in _BY_PEFT_NAME]
    if bad:
        raise CheckpointError(f"{where} targets modules {bad} that this decoder has no adapters for; use modules "
                              f"among {sorted(_BY_PEFT_NAME)}")
    return ",".join(_BY_PEFT_NAME[m] for m in modules)


def read_peft_dir(path: str | Path) -> tuple[LoRAConfig, dict[str, np.ndarray]]:
    """(LoRAConfig, PEFT-named float32 tensors) of a PEFT LoRA directory; CheckpointError says what is wrong."""
    from safetensors.numpy import load_file
    path = Path(path)
    cfg_file, weights = path / CONFIG_FILE, path / WEIGHTS_FILE
    if not cfg_file.is_file():
        raise CheckpointError(f"{path} has no {CONFIG_FILE}; pass a PEFT adapter directory (what "
                              "PeftModel.save_pretrained or save_peft_dir writes)")
    if not weights.is_file():
        raise CheckpointError(f"{path} has no {WEIGHTS_FILE}; save the adapter with safetensors "
                              "(PeftModel.save_pretrained(dir, safe_serialization=True))")
    try:
        meta = json.loads(cfg_file.read_text())
        if not isinstance(meta, dict):
            raise TypeError("not a JSON object")
    except (ValueError, TypeError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{cfg_file} is not a valid adapter config ({_one_line(e)}); write it again") from None
    if meta.get("peft_type") != "LORA":
        raise CheckpointError(f"{path} holds a {meta.get('peft_type')!r} adapter; only PEFT LoRA adapters load here")
    for key, plain in _PLAIN.items():
        if meta.get(key) not in (None, False, {}, [], "none"):
            raise CheckpointError(f"{cfg_file} sets {key}={meta[key]!r}, which this decoder's LoRA does not "
                                  f"support; train the adapter with {key}={plain!r}")
    try:
        cfg = LoRAConfig(rank=meta.get("r"), alpha=float(meta.get("lora_alpha", 8)),
                         targets=_targets(meta.get("target_modules"), cfg_file),
                         dropout=float(meta.get("lora_dropout") or 0.0))
    except (ValueError, TypeError) as e:
        if isinstance(e, CheckpointError):
            raise
        raise CheckpointError(f"{cfg_file} has an unusable setting ({_one_line(e)}); fix the adapter config") from None
    if not cfg.on:
        raise CheckpointError(f"{cfg_file} has rank r=0; an adapter needs r >= 1")
    try:
        tensors = {k: np.asarray(v, np.float32) for k, v in load_file(str(weights)).items()}
    except Exception as e:  # noqa: BLE001 - safetensors raises its own error type (and others) for a damaged file
        raise CheckpointError(f"{weights} is not a readable safetensors file ({_one_line(e)}); it is incomplete or "
                              "damaged: save the adapter again") from None
    return cfg, tensors


def load_peft_dir(model: Decoder, path: str | Path, *, rngs: nnx.Rngs | None = None) -> Decoder:
    """Loads a PEFT LoRA directory into `model` (in place; returns it): a model without adapters gets the directory's
    (rank, alpha, targets, dropout); a model with adapters must have the same rank, alpha and targets. Nothing is
    changed when the directory does not fit the model."""
    cfg, tensors = read_peft_dir(path)
    own = lora_config(model)
    if own is not None and (own.rank, own.alpha, own.names) != (cfg.rank, cfg.alpha, cfg.names):
        raise CheckpointError(f"{path} has adapters of rank {cfg.rank}, alpha {cfg.alpha} on {','.join(cfg.names)} "
                              f"but the model's are rank {own.rank}, alpha {own.alpha} on {','.join(own.names)}; "
                              "load it into a model without adapters or with the same LoRA settings")
    shapes = adapter_shapes(model.cfg, cfg.names)
    arrays = {}
    for i in range(model.cfg.num_layers):
        for t in cfg.names:
            n_in, n_out = shapes[t][:2]
            for ab, shape in (("A", (cfg.rank, n_in)), ("B", (n_out, cfg.rank))):
                key = _key(i, t, ab)
                if key not in tensors:
                    raise CheckpointError(f"{path} has no tensor {key}; the adapter was made for another model "
                                          f"(this one has {model.cfg.num_layers} layers)")
                if tensors[key].shape != shape:
                    raise CheckpointError(f"{path}'s {key} has shape {tensors[key].shape} where this model needs "
                                          f"{shape}; the adapter was made for another model")
                arrays[key] = tensors[key].T
    extra = sorted(set(tensors) - set(arrays))
    if extra:
        raise CheckpointError(f"{path} has {len(extra)} tensors this model has no place for (e.g. {extra[0]}); "
                              "the adapter was made for another model")
    if own is None:
        add_adapters(model, cfg, rngs or nnx.Rngs(0))
    for i, t, lo in _loras(model, cfg):
        lo.lora_a.value = jnp.asarray(arrays[_key(i, t, "A")], lo.lora_a.dtype)
        lo.lora_b.value = jnp.asarray(arrays[_key(i, t, "B")], lo.lora_b.dtype)
    return model


def combine_peft_dirs(dirs, out_dir: str | Path, *, base_model_name_or_path: str | None = None,
                      dtype: str = "float32") -> Path:
    """Writes one PEFT LoRA directory equal to the adapters of `dirs` applied one after the other on the same base
    (e.g. an RL adapter trained on the SFT adapter's merged policy): adapter i (rank r_i, scale s_i = alpha_i / r_i,
    targets T_i) contributes s_i * A_i @ B_i, so the sum is one adapter of rank R = sum r_i on the union of the
    targets with lora_alpha = R (scale 1), lora_A [R, in] the A_i stacked and lora_B [out, R] the s_i * B_i side by
    side (zeros where adapter i has no such target). Exact in real arithmetic; applied in turn, each merge rounds to
    the base's storage dtype once more. dtype: float32 | bfloat16 for the file. Returns out_dir."""
    import re

    import ml_dtypes
    from safetensors.numpy import save_file
    np_dtype = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16}.get(dtype)
    if np_dtype is None:
        raise ValueError(f"dtype={dtype!r}: the adapter file is written in float32 or bfloat16")
    parts = [read_peft_dir(d) for d in dirs]
    if not parts:
        raise ValueError("give at least one adapter directory to combine")
    pattern = re.compile(r"base_model\.model\.model\.layers\.(\d+)\.")
    layers = sorted({int(m.group(1)) for _, t in parts for k in t if (m := pattern.match(k))})
    names = tuple(t for t in TARGETS if any(t in cfg.names for cfg, _ in parts))
    rank = sum(cfg.rank for cfg, _ in parts)
    out = {}
    for i in layers:
        for t in names:
            shape = next((ts[_key(i, t, "A")].shape[1], ts[_key(i, t, "B")].shape[0]) for cfg, ts in parts
                         if t in cfg.names)
            a_blocks, b_blocks = [], []
            for cfg, ts in parts:
                if t in cfg.names:
                    a_blocks.append(ts[_key(i, t, "A")])
                    b_blocks.append(ts[_key(i, t, "B")] * np.float32(cfg.scaling))
                else:
                    a_blocks.append(np.zeros((cfg.rank, shape[0]), np.float32))
                    b_blocks.append(np.zeros((shape[1], cfg.rank), np.float32))
            out[_key(i, t, "A")] = np.ascontiguousarray(np.concatenate(a_blocks, 0).astype(np_dtype))
            out[_key(i, t, "B")] = np.ascontiguousarray(np.concatenate(b_blocks, 1).astype(np_dtype))
    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    save_file(out, str(d / WEIGHTS_FILE), metadata={"format": "pt"})
    cfg = LoRAConfig(rank=rank, alpha=float(rank), targets=",".join(names))
    (d / CONFIG_FILE).write_text(json.dumps(peft_config(cfg, base_model_name_or_path), indent=2, sort_keys=True))
    return d
