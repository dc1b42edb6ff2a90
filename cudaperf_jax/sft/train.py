"""The SFT warm start as a library call: `train(config, workdir) -> summary dict`.

    from cudaperf_jax.sft.train import train
    summary = train(cfg, "runs/sft")     # an sft.config.SFTConfig (a ConfigDict is converted by from_configdict)

Writes into the run directory (cudaperf_jax.experiment.workdir): config.json, policy.json + tokenizer/
(so `models.loading.load_policy(workdir)` returns the trained policy, adapters merged), sft_data/ (the packed rows,
built once), metrics.jsonl and tensorboard/ (loss, accuracy, grad_norm, lr, tokens, tokens_per_s; val_loss and
val_accuracy every eval_every steps), checkpoints/ (every checkpoint_every steps: what is trained - the adapters
under LoRA, every parameter at rank 0 - with its Adam state, the RNG and the step), loss.png, summary.json, export/
(a Hugging Face directory, adapters merged) and, under LoRA, adapter/ (the adapter alone, PEFT's format). Calling it
again on the same workdir and config resumes after the last checkpoint (kill -9 included) and writes the same
metrics.

The update is the training core's (cudaperf_jax.training): `data.batch_rows` rows per step, as
batch_rows / micro_rows micro-batches accumulated inside one jitted program, the optimizer of `optim`, the mesh of
`mesh`, what is trained from `lora` (rank 0: every parameter; rank r: adapters on a base frozen in the compute dtype,
with lora.dropout drawn from the checkpointed RNG).
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from cudaperf_jax.experiment import open_run
from cudaperf_jax.experiment.config import from_configdict
from cudaperf_jax.sft import data as data_lib
from cudaperf_jax.sft import packing, report
from cudaperf_jax.sft import step as step_lib
from cudaperf_jax.sft.config import SFTConfig
from cudaperf_jax.training import (
    base_param_dtype,
    init_train_state,
    make_optimizer,
    make_train_step,
    mesh_of,
    next_dropout_key,
    place_batch,
    run_state,
    stack_micro_batches,
    state_bytes,
    with_adapters,
)

RUN_NAME = "train_sft"


def typed(config) -> SFTConfig:
    """An SFTConfig as is; a ConfigDict or dict converted (and validated) by from_configdict."""
    return config if isinstance(config, SFTConfig) else from_configdict(SFTConfig, config)


def load_model(cfg: SFTConfig, mesh=None):
    """(Decoder, tokenizer) of cfg.model (a registered model name is fetched once into the cache when missing), on
    `mesh`."""
    from cudaperf_jax.models.loading import load_policy
    model, tok = load_policy(cfg.model, dtype=cfg.dtype,
                             param_dtype=base_param_dtype(cfg.lora, cfg.dtype, cfg.param_dtype), mesh=mesh,
                             progress=cfg.progress)
    if tok is None:
        from cudaperf_jax.models.hf_io import CheckpointError
        raise CheckpointError(f"{cfg.model} has no tokenizer files; SFT needs the tokenizer (and its chat template) "
                              "to pose the prompts")
    return model, tok


def _save_packed(path: Path, packed: packing.Packed, stats: dict):
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez(tmp, **packed._asdict(), stats=np.asarray(json.dumps(stats)))
    os.replace(tmp, path)


def _load_packed(path: Path) -> tuple[packing.Packed, dict] | None:
    if not path.is_file():
        return None
    try:
        with np.load(path) as z:
            return packing.Packed(*(z[k] for k in packing.FIELDS)), json.loads(str(z["stats"]))
    except (OSError, ValueError, KeyError):  # a damaged cache is rebuilt
        return None


def build_data(cfg: SFTConfig, model, tokenizer, workdir: Path) -> dict[str, tuple[packing.Packed, dict]]:
    """{"train": (packed rows, stats), "val": ...}, read from <workdir>/sft_data/ when built before (the workdir's
    config is fixed, so the cache is too)."""
    from cudaperf_jax.generation.sampler import Sampler
    out_dir = workdir / "sft_data"
    out_dir.mkdir(exist_ok=True)
    sampler = Sampler(model, tokenizer)   # its encode is the RL rollout's prompt path
    eos = model.cfg.eos_ids[0] if model.cfg.eos_ids else tokenizer.eos_token_id
    times = None
    out = {}
    for split, limit in (("train", cfg.data.max_train_tasks), ("val", cfg.data.max_val_tasks)):
        path = out_dir / f"{split}.npz"
        cached = _load_packed(path)
        if cached is None:
            times = times or data_lib.load_times(cfg.data.times)
            tasks = data_lib.load_tasks(cfg.data, split, limit)
            examples, stats = data_lib.build_examples(
                tasks, times, cfg.data.responses, lambda msgs: sampler.encode(msgs, chat=True), tokenizer, eos,
                refine=cfg.data.refine, seed=cfg.data.shuffle_seed, prompt=cfg.data.prompt)
            examples = packing.shuffled(examples, cfg.data.shuffle_seed)
            packed, pstats = packing.pack(examples, cfg.data.seq_len, sampler.pad_id)
            cached = (packed, {**stats, **pstats})
            _save_packed(path, *cached)
        out[split] = cached
    if out["train"][0].rows == 0:
        raise data_lib.NoExamples(f"no train example fits in data.seq_len={cfg.data.seq_len} tokens "
                                  f"({json.dumps(out['train'][1])}); raise data.seq_len or select other tasks")
    return out


class Step(NamedTuple):
    """What `build_step` makes of a loaded policy: the split model, the optimizer's state, the jitted programs."""
    graphdef: object
    params: object           # the trained variables (the adapters under LoRA, every parameter at rank 0)
    opt_state: object
    rest: object             # every other variable (the frozen base under LoRA)
    train_step: object       # training.TrainStep: (params, opt_state, rest, stacked micro-batches[, rng])
    eval_step: object        # (params, rest, batch) -> (nll sum, correct sum, weight sum)
    schedule: object         # optax schedule: the learning rate of a step


def build_step(cfg: SFTConfig, model, mesh=None) -> Step:
    """The training core of an SFT run for `model` (adapters added in place under LoRA, see training.with_adapters):
    the optimizer of cfg.optim over cfg.steps, the state on `mesh`, the step of the token NLL with cfg.remat and
    cfg.attention, and the eval step."""
    from flax import nnx
    model, trained = with_adapters(model, cfg.lora, rngs=nnx.Rngs(cfg.seed))
    optimizer, schedule = make_optimizer(cfg.optim, cfg.steps)
    graphdef, params, opt_state, rest = init_train_state(model, optimizer, trained=trained, mesh=mesh)
    loss = step_lib.token_nll_loss(remat=cfg.remat, attention=cfg.attention)
    return Step(graphdef, params, opt_state, rest, make_train_step(graphdef, optimizer, loss, mesh=mesh),
                step_lib.make_eval_step(graphdef, attention=cfg.attention), schedule)


def evaluate(eval_step, params, rest, packed: packing.Packed, cfg: SFTConfig, mesh=None) -> dict:
    """val_loss (mean nll per weighted token), val_accuracy, val_tokens over the first data.val_rows rows."""
    nll = correct = count = 0.0
    for batch in packing.eval_batches(packed, cfg.data.batch_rows, cfg.data.val_rows):
        a, b, c = eval_step(params, rest, place_batch(batch, mesh))
        nll, correct, count = nll + float(a), correct + float(b), count + float(c)
    if count == 0:
        return {}
    return {"val_loss": nll / count, "val_accuracy": correct / count, "val_tokens": int(count)}


def export(model, tokenizer, workdir: Path, cfg: SFTConfig) -> dict[str, Path]:
    """Writes <workdir>/export (a Hugging Face directory, adapters merged) and, under LoRA, <workdir>/adapter (PEFT);
    see models.export.export_policy."""
    from cudaperf_jax.models.export import export_policy
    from cudaperf_jax.models.loading import base_hf_id
    merged = workdir / "export" if cfg.export_merged or not cfg.lora.on else None
    return export_policy(model, merged, tokenizer=tokenizer, dtype=cfg.export_dtype,
                         adapter_dir=workdir / "adapter", adapter_dtype=cfg.adapter_dtype,
                         base_model_name_or_path=base_hf_id(cfg.model), replace=True)


def early_stop_step(rows: list[dict], patience: int, min_delta: float = 0.0) -> int | None:
    """The step whose validation stops the run: the `patience`-th validation in a row whose val_loss is not below
    the best so far (val_loss_initial included) by at least min_delta; None while the run goes on (or patience 0).
    A function of the metric rows alone, so a resumed run decides as the uninterrupted one did."""
    if patience <= 0:
        return None
    best, worse = None, 0
    for r in rows:
        for key in ("val_loss_initial", "val_loss"):
            if key not in r:
                continue
            v = float(r[key])
            if best is None or v < best - min_delta:
                best, worse = v, 0
            else:
                worse += 1
                if worse >= patience:
                    return int(r["step"])
    return None


def train(config, workdir: str | Path) -> dict:
    """Runs (or resumes) the SFT run of `config` (an SFTConfig, or a ConfigDict / dict converted by from_configdict)
    in `workdir`; returns the summary (also in summary.json). config.json records the resolved config."""
    cfg = typed(config)
    workdir = Path(workdir)
    run = open_run(workdir, cfg, name=RUN_NAME)
    try:
        return _train(cfg, run, workdir)
    finally:
        run.close()


def _train(cfg: SFTConfig, run, workdir: Path) -> dict:
    from flax import nnx

    from cudaperf_jax.models.loading import write_run_policy
    t_start = time.perf_counter()
    log = (lambda msg: print(f"[sft] {msg}", file=sys.stderr)) if cfg.progress else (lambda msg: None)
    mesh = mesh_of(cfg.mesh)
    model, tok = load_model(cfg, mesh)
    write_run_policy(workdir, model, tok, base=cfg.model, lora=cfg.lora)
    log(f"policy {cfg.model}: {model.cfg.model_type}, {model.cfg.num_params / 1e6:.1f}M parameters, "
        f"compute {cfg.dtype}, weights {model.embed[...].dtype}" + (f", LoRA {cfg.lora}" if cfg.lora.on else ""))
    data = build_data(cfg, model, tok, workdir)
    (train_rows, train_stats), (val_rows, val_stats) = data["train"], data["val"]
    log(f"train: {json.dumps(train_stats)}")
    log(f"val: {json.dumps(val_stats)}")

    graphdef, params, opt_state, rest, train_step, eval_step, schedule = build_step(cfg, model, mesh)
    del model
    log(f"attention: {cfg.attention.resolve().implementation} ({cfg.attention.implementation}); remat {cfg.remat}")
    state = run_state(params, opt_state, cfg.seed)
    log(f"checkpoint: {state_bytes(state) / 1e6:.1f} MB (what is trained, its Adam state, RNG, step)")
    restored = run.restore(state)
    state = restored if restored is not None else state
    start = run.restore_step()
    if start:
        log(f"resuming at step {start} of {cfg.steps}")

    stopped = early_stop_step(run.metrics(), cfg.early_stop_patience, cfg.early_stop_min_delta)
    if stopped is not None:
        log(f"stopped early at step {stopped} (val loss flat for {cfg.early_stop_patience} validations)")
    initial = {}
    if start == 0 and val_rows.rows:
        initial = {f"{k}_initial": v for k, v in evaluate(eval_step, state["params"], rest, val_rows, cfg,
                                                          mesh).items()}
    bar = tqdm(total=cfg.steps, initial=min(start, cfg.steps), desc="sft", unit="step", disable=not cfg.progress,
               dynamic_ncols=True)
    for s in range(start, cfg.steps if stopped is None else start):
        idx = packing.batch_rows(train_rows.rows, s, cfg.data.batch_rows, cfg.data.shuffle_seed)
        batch = train_rows.take(idx)
        t0 = time.perf_counter()
        rng, key = next_dropout_key(state["rng"], cfg.lora)
        params, opt_state, m = train_step(state["params"], state["opt_state"], rest,
                                          stack_micro_batches(batch, cfg.data.micro_batches), rng=key)
        m = jax.device_get(m)
        dt = time.perf_counter() - t0
        state = {"params": params, "opt_state": opt_state, "rng": rng, "step": jnp.int32(s)}
        m["tokens"] = m.pop("weight")
        row = {k: float(m[k]) for k in ("loss", "accuracy", "grad_norm", "tokens")}
        row.update(lr=float(schedule(s)), epoch=(s + 1) * cfg.data.batch_rows / train_rows.rows,
                   tokens_per_s=float((batch["segment_ids"] > 0).sum() / dt), step_s=dt)
        if s == 0:
            row.update(initial)
        if val_rows.rows and ((s + 1) % cfg.eval_every == 0 or s == cfg.steps - 1):
            row.update(evaluate(eval_step, state["params"], rest, val_rows, cfg, mesh))
        if "val_loss" in row and early_stop_step([*run.metrics(), {"step": s, **row}], cfg.early_stop_patience,
                                                 cfg.early_stop_min_delta) == s:
            stopped = s
        run.log(s, row)
        if (s + 1) % cfg.checkpoint_every == 0 or s == cfg.steps - 1 or stopped is not None:
            run.save(s, state)
        bar.update(1)
        bar.set_postfix(loss=f"{row['loss']:.3f}", **({"val": f"{row['val_loss']:.3f}"} if "val_loss" in row else {}))
        if stopped is not None:
            log(f"stopped early at step {s}: the val loss did not fall by {cfg.early_stop_min_delta} for "
                f"{cfg.early_stop_patience} validations")
            break
    bar.close()

    rows = run.metrics()
    png = report.plot_losses(rows, workdir / "loss.png")
    final = nnx.merge(graphdef, state["params"], rest)
    exported = export(final, tok, workdir, cfg) if cfg.export else {}
    summary = report.summarize(rows, {"train": train_stats, "val": val_stats}, {
        "workdir": str(workdir), "checkpoint_step": run.latest_checkpoint(),
        "checkpoint_mb": state_bytes(state) / 1e6,
        "export": str(exported["hf"]) if "hf" in exported else None,
        "adapter": str(exported["adapter"]) if "adapter" in exported else None, "loss_png": str(png) if png else None,
        "seconds_this_call": round(time.perf_counter() - t_start, 1), "resumed_at": start, "stopped_early_at": stopped})
    run.write_json("summary.json", summary)
    log("summary: " + json.dumps({k: v for k, v in summary.items() if k != "data"}))
    return summary
