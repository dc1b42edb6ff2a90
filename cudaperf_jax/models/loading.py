"""One entry point for every checkpoint source: `load_policy(path)` -> (Decoder, tokenizer).

PATH may be a Hugging Face model directory (config.json + safetensors, e.g. one written by
experiments/export.py), a .gguf file, or "default" (the SmolLM2-135M-Instruct GGUF of cudaperf_jax.assets).
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import jax.numpy as jnp

from cudaperf_jax.models.config import ModelConfig
from cudaperf_jax.models.decoder import Decoder
from cudaperf_jax.models.hf_io import CheckpointError, model_from_hf_state, read_hf_dir

DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16, "float16": jnp.float16}


def resolve_path(path: str | Path) -> Path:
    """The checkpoint path for PATH ("default" -> the cached default GGUF)."""
    if str(path) == "default":
        from cudaperf_jax.assets import ModelNotAvailable, default_model_path
        try:
            return default_model_path()
        except ModelNotAvailable as e:
            raise CheckpointError(str(e)) from None
    p = Path(path).expanduser()
    if not p.exists():
        raise CheckpointError(f"no checkpoint at {p}; pass a Hugging Face directory, a .gguf file or 'default'")
    return p


def load_tokenizer(path: str | Path):
    """The transformers tokenizer of a checkpoint (None when the directory has no tokenizer files)."""
    from transformers import AutoTokenizer
    p = resolve_path(path)
    try:
        if p.is_file():
            return AutoTokenizer.from_pretrained(str(p.parent), gguf_file=p.name)
        if not any((p / f).exists() for f in ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")):
            return None
        return AutoTokenizer.from_pretrained(str(p))
    except (OSError, ValueError, KeyError) as e:
        raise CheckpointError(f"could not load the tokenizer of {p} ({e}); check that the tokenizer "
                              "files are complete") from None


def read_checkpoint(path: str | Path, progress: bool = False) -> tuple[ModelConfig, dict]:
    """(ModelConfig, HF-named tensors) of a directory or GGUF file."""
    p = resolve_path(path)
    if p.is_file():
        if p.suffix != ".gguf":
            raise CheckpointError(f"{p} is a file but not .gguf; pass a .gguf file or a Hugging Face directory")
        from cudaperf_jax.models.gguf_io import read_gguf
        cfg_dict, tensors = read_gguf(p, progress=progress)
    else:
        cfg_dict, tensors = read_hf_dir(p)
    return ModelConfig.from_hf(cfg_dict), tensors


def load_policy(path: str | Path, *, dtype: str = "float32", param_dtype: str | None = None, mesh=None,
                tokenizer: bool = True, progress: bool = False) -> tuple[Decoder, object]:
    """(Decoder, tokenizer or None) from PATH; dtype names the compute dtype, param_dtype the storage one."""
    if dtype not in DTYPES or (param_dtype or dtype) not in DTYPES:
        raise ValueError(f"dtype must be one of {sorted(DTYPES)}")
    cfg, tensors = read_checkpoint(path, progress=progress)
    tok = load_tokenizer(path) if tokenizer else None
    if tok is not None and resolve_path(path).is_file():
        # GGUF metadata often names <|endoftext|>-like ids; the tokenizer (as transformers reads the
        # same file) knows the chat's end token, so its special ids win.
        ids = {k: getattr(tok, k) for k in ("eos_token_id", "bos_token_id", "pad_token_id")}
        cfg = dataclasses.replace(cfg, **{k: v for k, v in ids.items() if v is not None})
    model = model_from_hf_state(cfg, tensors, dtype=DTYPES[dtype], param_dtype=DTYPES[param_dtype or dtype],
                                mesh=mesh)
    return model, tok
