"""One entry point for every checkpoint source: `load_policy(path)` -> (Decoder, tokenizer).

PATH may be a registered model name (cudaperf_jax.assets: "smollm2-135m" alias "default", "qwen2.5-coder-0.5b",
"qwen2.5-coder-1.5b"; its cached GGUF, fetched on first use), a Hugging Face model directory (config.json +
safetensors, e.g. one written by experiments/export.py), a .gguf file, a training run directory (or its
checkpoints/ directory, or one step's directory in it), or BASE+ADAPTER: any of these as BASE with a PEFT LoRA
directory (adapter_config.json + adapter_model.safetensors, what training writes to WORKDIR/adapter or
peft.PeftModel.save_pretrained) applied on top, e.g. `--config.model=qwen2.5-coder-1.5b+runs/sft_lora/adapter` (an
existing path containing "+" is taken whole). Every source gives a plain Decoder: adapters are merged into its
kernels.

A training run directory (experiments.train_sft, train_rl) holds
    policy.json         {"format": "cudaperf_jax.policy/1", "model_config": ModelConfig.to_hf(), "param_dtype",
                         "base": the model the run started from (a model name or an absolute path),
                         "base_hf_id": its Hugging Face id where known, "lora": LoRAConfig fields or null}
    tokenizer/          the tokenizer files (absent when the policy has no tokenizer)
    checkpoints/<step>/ Orbax checkpoints whose state has "params": what the run trains - the Decoder's nnx.Param
                        state (rank 0, a full fine-tune), or only its adapters' nnx.LoRAParam state (LoRA: the base
                        is rebuilt from "base" and the adapters merged into it); the newest step is loaded
written by `write_run_policy(workdir, model, tokenizer, base=..., lora=...)` when the run starts.
"""
from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import jax
import jax.numpy as jnp

from cudaperf_jax.models.config import ModelConfig
from cudaperf_jax.models.decoder import Decoder
from cudaperf_jax.models.hf_io import CheckpointError, model_from_hf_state, read_hf_dir
from cudaperf_jax.models.lora import ADAPTERS, LoRAConfig

DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16, "float16": jnp.float16}
POLICY_META = "policy.json"
POLICY_FORMAT = "cudaperf_jax.policy/1"


def sources_hint() -> str:
    """What PATH may be, in words (for errors)."""
    from cudaperf_jax import assets
    return f"pass a registered model name ({', '.join(assets.names())}), a Hugging Face directory or a .gguf file"


def resolve_path(path: str | Path, download: bool = True) -> Path:
    """The checkpoint path for PATH: a registered model name -> its cached GGUF (fetched first when absent and
    DOWNLOAD is true, with a line on stderr saying what and how big), anything else -> an existing path."""
    from cudaperf_jax import assets
    if assets.is_model_name(str(path)):
        try:
            return assets.model_path(str(path), download=download)
        except assets.ModelNotAvailable as e:
            raise CheckpointError(str(e)) from None
    p = Path(path).expanduser()
    if not p.exists():
        raise CheckpointError(f"no checkpoint at {p}; {sources_hint()}")
    return p


def split_adapter(path: str | Path) -> tuple[str, Path] | None:
    """(BASE, ADAPTER directory) of a BASE+ADAPTER path; None for any other path (an existing path is taken whole)."""
    text = str(path)
    if "+" not in text or Path(text).expanduser().exists():
        return None
    base, adapter = text.rsplit("+", 1)
    return base, Path(adapter).expanduser()


def load_tokenizer(path: str | Path):
    """The transformers tokenizer of a checkpoint (None when the directory has no tokenizer files); BASE's for
    BASE+ADAPTER."""
    from transformers import AutoTokenizer
    parts = split_adapter(path)
    if parts is not None:
        return load_tokenizer(parts[0])
    p = resolve_path(path)
    run = run_directory(p)
    if run is not None:
        p = run / "tokenizer"
        if not p.is_dir():
            return None
    try:
        if p.is_file():
            tok = AutoTokenizer.from_pretrained(str(p.parent), gguf_file=p.name)
            align_eos_to_chat(tok, _gguf_eos_ids(p))
            return tok
        if not any((p / f).exists() for f in ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")):
            return None
        return AutoTokenizer.from_pretrained(str(p))
    except (OSError, ValueError, KeyError) as e:
        raise CheckpointError(f"could not load the tokenizer of {p} ({e}); check that the tokenizer "
                              "files are complete") from None


def _gguf_eos_ids(path: Path) -> list[int]:
    """The eos id the GGUF file's own metadata names (tokenizer.ggml.eos_token_id), as a list (empty when absent)."""
    from cudaperf_jax.assets.gguf_header import read_metadata
    try:
        eos = read_metadata(path, ("tokenizer.ggml.eos_token_id",)).get("tokenizer.ggml.eos_token_id")
    except (OSError, ValueError):
        return []
    return [] if eos is None else [int(eos)]


def chat_end_id(tokenizer, candidates) -> int | None:
    """Of the token ids CANDIDATES, the one the tokenizer's chat template writes right after an assistant message (the
    end of a turn: <|im_end|> for Qwen and SmolLM2), or None (no template, or none of them ends a turn)."""
    marker = "\u2063CUDAPERF-TURN\u2063"
    if not getattr(tokenizer, "chat_template", None):
        return None
    try:
        msgs = [{"role": "user", "content": "x"}, {"role": "assistant", "content": marker}]
        text = tokenizer.apply_chat_template(msgs, tokenize=False)
    except Exception:  # noqa: BLE001 - a template may refuse this conversation (jinja raises its own errors)
        return None
    tail = text[text.rfind(marker) + len(marker):] if marker in text else ""
    for c in candidates:
        token = tokenizer.convert_ids_to_tokens(int(c))
        if token and tail.startswith(token):
            return int(c)
    return None


def align_eos_to_chat(tokenizer, file_eos: list[int]) -> None:
    """Makes the tokenizer's eos the chat's end of turn when the file names one that the tokenizer lost.

    transformers' GGUF tokenizers take eos from the file in some versions and not in others (5.17 reads both
    Qwen2.5-Coder files' eos as <|endoftext|>, 5.25 as <|im_end|>, which their metadata names); the policy must stop
    on the end of a chat turn, and multi-turn prompts strip it (prompts.ChatTokens), so of the file's eos and the
    tokenizer's, the one the chat template ends an assistant turn with becomes the tokenizer's eos."""
    own = [] if tokenizer.eos_token_id is None else [tokenizer.eos_token_id]
    candidates = list(dict.fromkeys([*file_eos, *own]))
    end = chat_end_id(tokenizer, candidates)
    if end is not None and end != tokenizer.eos_token_id:
        tokenizer.eos_token = tokenizer.convert_ids_to_tokens(end)


def run_directory(path: str | Path) -> Path | None:
    """The training run directory PATH names (the run, its checkpoints/ or a step in it), or None."""
    p = Path(path)
    if not p.is_dir():
        return None
    if (p / POLICY_META).is_file():
        return p
    if p.name == "checkpoints" and (p.parent / POLICY_META).is_file():
        return p.parent
    if p.name.isdigit() and p.parent.name == "checkpoints" and (p.parent.parent / POLICY_META).is_file():
        return p.parent.parent
    return None


def base_source(model: str | Path) -> str:
    """How a run records the model it started from: a model name as is, a path made absolute."""
    from cudaperf_jax import assets
    text = str(model)
    if assets.is_model_name(text):
        return text
    if split_adapter(text) is not None:
        base, adapter = split_adapter(text)
        return f"{base_source(base)}+{adapter.resolve()}"
    p = Path(text).expanduser()
    return str(p.resolve()) if p.exists() else text


def base_hf_id(model: str | Path) -> str | None:
    """The Hugging Face id (or directory) a PEFT adapter trained on `model` names as its base_model_name_or_path:
    the id of a model name (cudaperf_jax.assets.hf_id), a Hugging Face directory itself, a run directory's export/
    (its merged policy); None where unknown (a GGUF file, BASE+ADAPTER)."""
    from cudaperf_jax.assets import hf_id
    if hf_id(str(model)) is not None:
        return hf_id(str(model))
    p = Path(str(model)).expanduser()
    run = run_directory(p)
    if run is not None:
        p = run / "export"
    return str(p.resolve()) if (p / "config.json").is_file() else None


def adapter_base_id(path: str | Path) -> str | None:
    """base_model_name_or_path for the adapters of PATH: a run directory's policy.json "base_hf_id", BASE's id for
    BASE+ADAPTER (base_hf_id), None otherwise."""
    parts = split_adapter(path)
    if parts is not None:
        return base_hf_id(parts[0])
    run = run_directory(Path(str(path)).expanduser())
    return None if run is None else read_run_policy(run).get("base_hf_id")


def write_run_policy(workdir: str | Path, model: Decoder, tokenizer=None, *, base: str | Path | None = None,
                     lora: LoRAConfig | None = None) -> Path:
    """Writes policy.json (and tokenizer/) into a training run directory, so load_policy can read its checkpoints.

    model: the policy as loaded (before adapters are added); base: the model path or name it was loaded from;
    lora: the run's adapters (None or rank 0: the checkpoints hold every parameter)."""
    workdir = Path(workdir)
    on = lora is not None and lora.on
    if on and base is None:
        raise ValueError("a LoRA run directory needs the base model it is built on (base=...)")
    meta = {"format": POLICY_FORMAT, "model_config": model.cfg.to_hf(),
            "param_dtype": jnp.dtype(model.embed[...].dtype).name,
            "base": None if base is None else base_source(base), "base_hf_id": None if base is None else
            base_hf_id(base), "lora": dataclasses.asdict(lora) if on else None}
    if tokenizer is not None:
        tokenizer.save_pretrained(str(workdir / "tokenizer"))
    tmp = workdir / (POLICY_META + ".tmp")
    tmp.write_text(json.dumps(meta, indent=2, sort_keys=True))
    os.replace(tmp, workdir / POLICY_META)
    return workdir / POLICY_META


def _checkpoint_step(path: Path, run: Path) -> Path:
    """The step directory to load: PATH itself when it is one, else the newest finished step."""
    ckpts = run / "checkpoints"
    if path.parent == ckpts:
        return path
    # Orbax writes a step under a temporary name and renames it when complete: digit names are finished steps.
    steps = sorted((int(d.name), d) for d in ckpts.iterdir() if d.name.isdigit()) if ckpts.is_dir() else []
    if not steps:
        raise CheckpointError(f"the run directory {run} holds no checkpoint yet; let its training save one "
                              "(it saves every checkpoint_every steps) or pass another policy")
    return steps[-1][1]


def read_run_policy(run: Path) -> dict:
    """policy.json of a run directory, checked: its fields plus "config" (ModelConfig), "stored" (the jnp storage
    dtype) and "lora_config" (LoRAConfig or None)."""
    try:
        meta = json.loads((run / POLICY_META).read_text())
        if meta.get("format") != POLICY_FORMAT:
            raise ValueError(f"format {meta.get('format')!r}")
        cfg = ModelConfig.from_hf(meta["model_config"])
        stored = DTYPES[meta.get("param_dtype", "float32")]
        lora = LoRAConfig(**meta["lora"]) if meta.get("lora") else None
        if lora is not None and not meta.get("base"):
            raise ValueError("a LoRA run without its base model")
    except (ValueError, KeyError, TypeError) as e:
        raise CheckpointError(f"{run / POLICY_META} is unreadable ({e}); it should be the file a training run "
                              "writes when it starts: rerun the training into a new workdir") from None
    return {**meta, "config": cfg, "stored": stored, "lora_config": lora}


def _load_base(run: Path, meta: dict, dtype, param_dtype) -> Decoder:
    """The base Decoder a LoRA run's adapters were trained on (policy.json's "base"), checked against its shape."""
    try:
        model, _ = load_policy(meta["base"], dtype=jnp.dtype(dtype).name, param_dtype=jnp.dtype(param_dtype).name,
                               tokenizer=False)
    except CheckpointError as e:
        raise CheckpointError(f"the LoRA run {run} is built on {meta['base']}, which could not be loaded ({e}); put "
                              "that model back where policy.json says or load the run's export/ instead") from None
    shape = ("vocab_size", "hidden_size", "intermediate_size", "num_layers", "num_heads", "num_kv_heads", "head_dim")
    if any(getattr(model.cfg, k) != getattr(meta["config"], k) for k in shape):
        raise CheckpointError(f"the base model at {meta['base']} no longer has the shape the LoRA run {run} was "
                              "trained on (policy.json's model_config); restore the original base model")
    return model


def load_run_policy(path: str | Path, *, dtype=jnp.float32, param_dtype=jnp.float32, mesh=None,
                    merge: bool = True) -> Decoder:
    """The Decoder of a training run directory's newest (or the named) checkpoint. A LoRA run's base is loaded from
    policy.json's "base" and its adapters restored on top: merged into the base's kernels (merge=True, a plain
    Decoder) or kept as adapters (merge=False: what a PEFT export needs)."""
    import orbax.checkpoint as ocp
    from flax import nnx

    from cudaperf_jax.models.hf_io import abstract_model
    from cudaperf_jax.models.lora import add_adapters, merged_model
    p = Path(path)
    run = run_directory(p)
    if run is None:
        raise CheckpointError(f"{p} is not a training run directory (no {POLICY_META}); pass a run directory, "
                              "a Hugging Face directory, a .gguf file or a registered model name")
    meta = read_run_policy(run)
    step_dir = _checkpoint_step(p, run)
    lora = meta["lora_config"]
    if lora is None:
        model = abstract_model(meta["config"], dtype=dtype, param_dtype=meta["stored"])
        trained = nnx.Param
    else:
        model = add_adapters(_load_base(run, meta, dtype, param_dtype), lora, nnx.Rngs(0))
        trained = ADAPTERS
    abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), nnx.state(model, trained))
    # read onto the default device (a mesh reshards below): with the target's sharding given, Orbax need not read it
    # from the checkpoint's sharding file, which it warns is unsafe across topologies
    device = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    target = {"params": jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=device), abstract)}
    from cudaperf_jax.experiment.orbax_loop import finishing_reads
    try:
        with finishing_reads(), ocp.PyTreeCheckpointer() as ckptr:
            restored = ckptr.restore(step_dir.resolve() / "default", args=ocp.args.PyTreeRestore(
                item=target, restore_args=ocp.checkpoint_utils.construct_restore_args(target), partial_restore=True))
        params = restored["params"]
        _check_params(abstract, params)
    except Exception as e:  # noqa: BLE001 - Orbax/tensorstore raise many types for a damaged checkpoint
        raise CheckpointError(f"the checkpoint {step_dir} could not be read ({type(e).__name__}: "
                              f"{str(e).splitlines()[0][:200] if str(e) else 'no detail'}); it is incomplete or "
                              "damaged: delete that step directory to fall back to the previous one") from None
    if lora is None:
        nnx.update(model, jax.tree.map(lambda x: jnp.asarray(x, param_dtype), params))
    else:
        nnx.update(model, jax.tree.map(lambda x: jnp.asarray(x, jnp.float32), params))
        model = merged_model(model) if merge else model
    if mesh is not None:
        from cudaperf_jax.models.sharding import shard_model
        shard_model(model, mesh)
    return model


def _check_params(abstract, params):
    """Raises ValueError when restored params differ from the model's in structure or shapes."""
    a, b = jax.tree.structure(abstract), jax.tree.structure(params)
    if a != b:
        raise ValueError("the checkpoint's parameters do not match policy.json's model")
    for x, y in zip(jax.tree.leaves(abstract), jax.tree.leaves(params)):
        if isinstance(y, jax.ShapeDtypeStruct):  # partial_restore leaves what the checkpoint lacks abstract
            raise ValueError("the checkpoint lacks parameters that policy.json's model has")  # noqa: TRY004
        if tuple(x.shape) != tuple(y.shape):
            raise ValueError(f"a parameter has shape {tuple(y.shape)} where policy.json implies {tuple(x.shape)}")


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
                tokenizer: bool = True, progress: bool = False, merge: bool = True) -> tuple[Decoder, object]:
    """(Decoder, tokenizer or None) from PATH (see the module docstring); dtype names the compute dtype, param_dtype
    the storage one. Adapters (a LoRA run's, BASE+ADAPTER's) come merged into the storage dtype's kernels, or kept
    as float32 adapters beside the base with merge=False (what a PEFT export needs)."""
    if dtype not in DTYPES or (param_dtype or dtype) not in DTYPES:
        raise ValueError(f"dtype must be one of {sorted(DTYPES)}")
    parts = split_adapter(path)
    if parts is not None:
        return _load_with_adapter(*parts, dtype=dtype, param_dtype=param_dtype, mesh=mesh, tokenizer=tokenizer,
                                  progress=progress, merge=merge)
    p = resolve_path(path)
    if run_directory(p) is not None:
        model = load_run_policy(p, dtype=DTYPES[dtype], param_dtype=DTYPES[param_dtype or dtype], mesh=mesh,
                                merge=merge)
        return model, (load_tokenizer(p) if tokenizer else None)
    cfg, tensors = read_checkpoint(p, progress=progress)
    tok = load_tokenizer(p) if tokenizer else None
    if tok is not None and p.is_file():
        # The tokenizer's special ids win (its eos is the chat's end of turn: load_tokenizer aligns it); the file's own
        # eos, when another, stops too.
        ids = {k: getattr(tok, k) for k in ("bos_token_id", "pad_token_id")}
        eos = list(dict.fromkeys([*([tok.eos_token_id] if tok.eos_token_id is not None else []), *cfg.eos_ids]))
        ids["eos_token_id"] = (eos[0] if len(eos) == 1 else eos) if eos else None
        cfg = dataclasses.replace(cfg, **{k: v for k, v in ids.items() if v is not None})
    model = model_from_hf_state(cfg, tensors, dtype=DTYPES[dtype], param_dtype=DTYPES[param_dtype or dtype],
                                mesh=mesh)
    return model, tok


def _load_with_adapter(base: str, adapter: Path, *, mesh=None, merge: bool = True, **kw) -> tuple[Decoder, object]:
    """BASE+ADAPTER: BASE loaded by load_policy (merged), the PEFT directory ADAPTER applied (and merged)."""
    from cudaperf_jax.models.lora import merged_model
    from cudaperf_jax.models.peft_io import load_peft_dir
    if not adapter.is_dir():
        raise CheckpointError(f"no adapter directory at {adapter}; BASE+ADAPTER needs a PEFT LoRA directory after "
                              "the '+' (what training writes to WORKDIR/adapter)")
    model, tok = load_policy(base, **kw)
    model = load_peft_dir(model, adapter)
    model = merged_model(model) if merge else model
    if mesh is not None:
        from cudaperf_jax.models.sharding import shard_model
        shard_model(model, mesh)
    return model, tok
