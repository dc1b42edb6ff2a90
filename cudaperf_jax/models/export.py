"""A policy written out for other tools: the Hugging Face directory of the (merged) model and, for a model with LoRA
adapters, the adapters alone in PEFT's format.

    written = export_policy(model, "runs/sft/export", tokenizer=tok, dtype="bfloat16",
                            adapter_dir="runs/sft/adapter", adapter_dtype="float32",
                            base_model_name_or_path="Qwen/Qwen2.5-Coder-1.5B-Instruct", replace=True)
    # {"hf": Path("runs/sft/export"), "adapter": Path("runs/sft/adapter")}

transformers.AutoModelForCausalLM loads the first (adapters folded into the kernels), peft.PeftModel.from_pretrained
(base, adapter) the second. With replace=True (a run's own export directories) each directory is written under a
temporary name and swapped in at the end, so a killed export leaves the previous one whole; otherwise the files are
written into the directories as they are (nothing else in them is touched).
"""
from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from cudaperf_jax.models.decoder import Decoder
from cudaperf_jax.models.hf_io import save_hf_dir
from cudaperf_jax.models.lora import merged_model
from cudaperf_jax.models.peft_io import save_peft_dir


def _write_dir(final: str | Path, write: Callable[[Path], object], replace: bool) -> Path:
    """write(<final>.tmp), then <final>.tmp renamed to <final> (an older <final> removed first); write(final) when
    not replace."""
    final = Path(final)
    if not replace:
        write(final)
        return final
    tmp = final.with_name(final.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    write(tmp)
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    return final


def export_policy(model: Decoder, out_dir: str | Path | None, *, tokenizer=None, dtype: str = "float32",
                  adapter_dir: str | Path | None = None, adapter_dtype: str = "float32",
                  base_model_name_or_path: str | None = None, replace: bool = False) -> dict[str, Path]:
    """Writes `model` (its adapters merged) as a Hugging Face directory in `dtype` to out_dir (None: not written) and,
    when it has adapters and adapter_dir is given, the adapters alone as a PEFT directory (adapter_config.json naming
    base_model_name_or_path, adapter_model.safetensors in adapter_dtype: float32 or bfloat16). Returns the paths
    written: {["hf": out_dir][, "adapter": adapter_dir]}."""
    written = {}
    if out_dir is not None:
        written["hf"] = _write_dir(out_dir, lambda d: save_hf_dir(merged_model(model), d, tokenizer=tokenizer,
                                                                  dtype=dtype), replace)
    if model.has_adapters and adapter_dir is not None:
        written["adapter"] = _write_dir(adapter_dir, lambda d: save_peft_dir(
            model, d, base_model_name_or_path=base_model_name_or_path, dtype=adapter_dtype), replace)
    return written
