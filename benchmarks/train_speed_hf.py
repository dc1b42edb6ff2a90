"""The transformers + PEFT side of benchmarks/train_speed.py (run by it in its own process; see its docstring).

The model: AutoModelForCausalLM.from_pretrained(dir, gguf_file=..., torch_dtype=bfloat16) of the GGUF that our side
loads (dequantised by transformers), attn_implementation="sdpa", peft.get_peft_model with the LoraConfig of ours (r,
lora_alpha, the same target projections, no dropout, no bias); torch.optim.AdamW over the adapters (lr 5e-5, betas
0.9/0.95, eps 1e-8, no weight decay) after clip_grad_norm_(1.0), as optax's chain in training.make_optimizer. A step:
model(input_ids, position_ids, labels) (its loss: log_softmax over every position in float32, mean over the labelled
tokens), backward, clip, step, zero_grad. The labels are our SFT weights: the next token where the prediction of a
response token is trained, -100 elsewhere; position_ids restart in each packed example, so transformers' packed-
sequence mask keeps attention inside an example as our segment ids do.
"""
from __future__ import annotations

import gc
import json
import time
from pathlib import Path

PEFT_NAMES = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj", "gate": "gate_proj", "up": "up_proj",
              "down": "down_proj"}
SDPA_OPS = {"_scaled_dot_product_flash_attention": "flash", "_scaled_dot_product_efficient_attention": "efficient",
            "_scaled_dot_product_cudnn_attention": "cudnn", "_scaled_dot_product_attention_math": "math",
            "_flash_attention_forward": "flash", "_efficient_attention_forward": "efficient"}


def load_hf(args, torch):
    """The bf16 (CPU: float32) transformers model of --model, attention sdpa."""
    import transformers
    dtype = torch.bfloat16 if args.device == "gpu" else torch.float32
    if args.model == "tiny":
        from benchmarks.rl_step import SHAPES
        from cudaperf_jax.models.loading import load_tokenizer
        cfg = transformers.LlamaConfig(**{**SHAPES["tiny"], "vocab_size": len(load_tokenizer("default"))})
        return transformers.AutoModelForCausalLM.from_config(cfg, dtype=dtype, attn_implementation="sdpa")
    from cudaperf_jax.models.loading import resolve_path
    path = resolve_path(args.model)
    if path.is_file():
        return transformers.AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name,
                                                                 dtype=dtype, attn_implementation="sdpa")
    return transformers.AutoModelForCausalLM.from_pretrained(str(path), dtype=dtype, attn_implementation="sdpa")


def labels_of(batch: dict):
    """int64[B, L] labels for transformers' shifted loss: labels[:, t+1] = targets[:, t] where weights[:, t] > 0
    (our prediction at t of the token at t+1), -100 elsewhere."""
    import numpy as np
    if (batch["weights"][:, -1] > 0).any():   # sft.packing never weighs a row's last position (no next token)
        raise ValueError("a weighted last position has no place in transformers' shifted labels")
    labels = np.full(batch["tokens"].shape, -100, np.int64)
    labels[:, 1:] = np.where(batch["weights"][:, :-1] > 0, batch["targets"][:, :-1], -100)
    return labels


def sdpa_kernels(fn, torch) -> str:
    """The SDPA kernels one call of fn runs, from the profiler's op names (flash, efficient, cudnn, math)."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    names = {e.key for e in prof.key_averages()}
    found = sorted({v for n in names for k, v in SDPA_OPS.items() if k in n})
    return ",".join(found) or "none seen"


def run_hf(args, out: Path) -> list[dict]:
    import warnings

    import numpy as np
    import torch
    warnings.filterwarnings("ignore", category=FutureWarning)   # transformers 5.2x renames gradient_checkpointing_*

    from benchmarks.train_speed import batch_path
    gpu = args.device == "gpu"
    path = batch_path(args, out)
    if not path.is_file():
        raise SystemExit(f"{path} is missing: run the JAX side of this shape first (--only jax or both)")
    with np.load(path) as z:
        batch = {k: z[k] for k in z.files}
    dev = torch.device("cuda" if gpu else "cpu")
    inputs = {"input_ids": torch.as_tensor(batch["tokens"], dtype=torch.long, device=dev),
              "position_ids": torch.as_tensor(batch["positions"], dtype=torch.long, device=dev),
              "labels": torch.as_tensor(labels_of(batch), device=dev), "use_cache": False}
    real = int((batch["segment_ids"] > 0).sum())
    t0 = time.perf_counter()
    base = load_hf(args, torch).to(dev)
    load_s = time.perf_counter() - t0
    rows = []
    for spec in args.hf.split(",") + (["sdpa:compile"] if args.torch_compile else []):
        row = {"framework": "hf", "shape": args.shape, "targets": args.targets, "config": spec,
               "tokens": real, "padded_tokens": int(batch["tokens"].size), "load_s": round(load_s, 1),
               "device": torch.cuda.get_device_name() if gpu else "cpu", "torch": torch.__version__}
        try:
            base = _row(args, base, spec, inputs, row, torch)
        except Exception as e:  # noqa: BLE001 - out of memory (recorded as the row's result), next row
            row["error"] = f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"
        gc.collect()
        if gpu:
            torch.cuda.empty_cache()
        print(f"[hf] {json.dumps(row)}", flush=True)
        rows.append(row)
    return rows


def _row(args, base, spec: str, inputs: dict, row: dict, torch):
    """Fills `row` with one configuration's timings; returns the base model without adapters (for the next row)."""
    import peft
    import transformers

    from benchmarks.train_speed import TARGETS, _timing
    gpu = args.device == "gpu"
    row["transformers"], row["peft"] = transformers.__version__, peft.__version__
    lcfg = peft.LoraConfig(r=args.rank, lora_alpha=args.alpha, lora_dropout=0.0, bias="none", task_type="CAUSAL_LM",
                           target_modules=[PEFT_NAMES[t] for t in TARGETS[args.targets].split(",")])
    if "ckpt" in spec:
        base.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    else:
        base.gradient_checkpointing_disable()
    model = peft.get_peft_model(base, lcfg)
    try:
        model.train()
        fwd = torch.compile(model) if "compile" in spec else model
        trained = [p for p in model.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(trained, lr=5e-5, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0)

        def step():
            loss = fwd(**inputs).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(trained, 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            _sync(torch, gpu)
            return loss

        if gpu:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        step()
        row["compile_s"] = round(time.perf_counter() - t0, 1)   # the first step (torch.compile's compile)
        for _ in range(max(args.warmup - 1, 0)):
            step()
        row["sdpa_kernel"] = sdpa_kernels(step, torch)
        times = []
        for _ in range(args.steps):
            t0 = time.perf_counter()
            loss = step()
            times.append(time.perf_counter() - t0)
        row.update(_timing(times, row["tokens"], row["padded_tokens"]), loss=float(loss.detach()))
        if gpu:
            row["peak_gb"] = round(torch.cuda.max_memory_allocated() / 1e9, 2)
    finally:
        base = model.unload()    # the base without adapters, for the next row
    return base


def _sync(torch, gpu: bool):
    if gpu:
        torch.cuda.synchronize()
