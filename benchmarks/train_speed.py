"""SFT tokens/s on one GPU: our training core against transformers + PEFT, with the same model, LoRA, rows and tokens.

Ours: cudaperf_jax.sft.train's own pieces (load_model, build_data, build_step: training.with_adapters,
make_optimizer, init_train_state, make_train_step with sft.step.token_nll_loss), bf16 compute over a bf16 frozen
base, float32 adapters; one row per `--ours` entry ATTENTION[:noremat][:FIELD=INT...] (models.attention: auto,
pallas, cudnn or xla; remat per layer unless :noremat; FIELD=INT sets an AttentionConfig field, e.g.
pallas:block_bwd=32:num_warps=8). Theirs (benchmarks/train_speed_hf.py): AutoModelForCausalLM.from_pretrained(dir,
gguf_file=..., dtype=bfloat16) of the same GGUF, peft.get_peft_model with the same LoraConfig, torch AdamW after
clipping at 1.0 (as ours), attn_implementation="sdpa" (the kernel it runs, from the profiler, in the row), gradient
checkpointing off (sdpa) and on (sdpa:ckpt), torch.compile with --torch_compile (sdpa:compile).

The tokens: the first step's rows of our SFT data (worked_example prompts of the train split packed by sft.packing,
from --data_tasks tasks), kept in OUT/batch_<model>_<shape>_<prompt>.npz, which the HF worker reads; transformers
sees the packing through position_ids (its packed-sequence mask: attention stays inside an example, as our segment
ids keep it). Each row: compile (ours ahead of time; theirs the first step), --warmup steps, --steps timed steps,
the median; tokens/s counts real tokens (padding excluded), as sft.train's tokens_per_s. Memory: theirs
torch.cuda.max_memory_allocated of the row; ours the compiled step's memory_analysis (prog GB: arguments + outputs -
aliased + temporaries) and the process's peak so far (JAX keeps no per-row peak).

Each framework runs in its own process (ours first: it builds the tokens), one after the other. Rows accumulate in
OUT/train_speed.json across commands (a rerun of the same framework, shape, targets and config replaces its row), so
the work splits over several device calls; each call prints the table of all rows so far, the ratio of the best rows
per shape (goal, issue 44: ours >= 1.5x transformers + PEFT) and redraws OUT/train_speed.png.

GPU commands, one H100, carry [".whl"] (peft, gguf, tree-sitter(-cuda), ml-collections, tensorboardX), the 1.5B
GGUF in the cache; in the order to run them (each ~3-7 min: loading the GGUF ~1 min a process, a JAX row's
compile ~1-2 min):

    pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
    export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1 TF_CPP_MIN_LOG_LEVEL=3
    python3 -m pytest -q -p no:cacheprovider -m gpu tests/cudaperf_jax/models/test_attention.py   # ~1 min, first
    python3 benchmarks/train_speed.py --shape 6x3072 --only jax --ours pallas,pallas:noremat --out $OUT
    python3 benchmarks/train_speed.py --shape 6x3072 --only hf --out $OUT                    # sdpa, sdpa:ckpt
    python3 benchmarks/train_speed.py --shape 6x3072 --only jax --ours cudnn,cudnn:noremat --out $OUT
    python3 benchmarks/train_speed.py --shape 6x3072 --only jax --ours xla,pallas:block_bwd=32 --out $OUT
    python3 benchmarks/train_speed.py --shape 2x2048 --ours pallas,pallas:noremat --out $OUT  # both frameworks
    python3 benchmarks/train_speed.py --shape 2x2048 --only hf --hf sdpa --torch_compile --out $OUT
    python3 benchmarks/train_speed.py --shape 6x3072 --targets all --ours pallas:noremat --out $OUT

(each command repeats the export line's environment; $OUT/train_speed.json collects them all). The GPU tests
compare the compiled pallas and cudnn kernels with plain JAX in bf16 (values and gradients, Qwen2.5-1.5B's heads):
jax's own suite skips the Pallas mha backward on sm80+ ("precision issues after CUDA 12.8.1") and cuDNN fused
attention on CUDA 13 ("cuDNN creates no execution plans"), so a failure there decides the default
(models.attention.GPU_DEFAULT; "xla" if neither passes) before any timing does.

CPU smoke (a random 2-layer model, float32, XLA and the Pallas interpreter; transformers on the CPU; ~2 min):
    python benchmarks/train_speed.py --model tiny --shape 2x1024 --prompt plain --ours xla,pallas --steps 2 \
        --warmup 1 --data_tasks 8 --out /tmp/train_speed
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

TARGETS = {"qkvo": "q,k,v,o", "all": "q,k,v,o,gate,up,down"}


def parse_shape(text: str) -> tuple[int, int]:
    try:
        rows, seq = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise SystemExit(f"--shape {text!r}: write ROWSxTOKENS, e.g. 6x3072") from None
    return rows, seq


def batch_path(args, out: Path) -> Path:
    """Where the rows of this model, shape and prompt are kept (the HF worker's tokens)."""
    return out / f"batch_{Path(args.model).name.replace('.gguf', '')}_{args.shape}_{args.prompt}.npz"


def row_key(r: dict) -> str:
    return f"{r['framework']}|{r['shape']}|{r['targets']}|{r['config']}"


# ---- ours ---------------------------------------------------------------------------------------------------------
def parse_ours(spec: str) -> tuple[str, bool, dict]:
    """(attention implementation, remat, AttentionConfig overrides) of an --ours entry such as
    pallas:noremat:block_bwd=32:num_warps=8."""
    name, *parts = spec.split(":")
    tuning = {}
    for p in parts:
        if p != "noremat":
            key, sep, value = p.partition("=")
            if not sep or not value.isdigit():
                raise SystemExit(f"--ours entry {spec!r}: write ATTENTION[:noremat][:FIELD=INT...], e.g. "
                                 "pallas:noremat:block_bwd=32")
            tuning[key] = int(value)
    return name, "noremat" not in parts, tuning


def sft_config(args, attention: str = "auto", remat: bool = True, tuning: dict | None = None):
    """The SFTConfig of a row: the run's production config with the benchmark's model, shape, LoRA and attention
    (tuning: AttentionConfig fields, e.g. block_bwd)."""
    from cudaperf_jax.models.attention import AttentionConfig
    from cudaperf_jax.models.lora import LoRAConfig
    from cudaperf_jax.sft.config import DataConfig, SFTConfig
    from cudaperf_jax.training import OptimConfig
    rows, seq = parse_shape(args.shape)
    dtype = "bfloat16" if args.device == "gpu" else "float32"
    return SFTConfig(model=args.model, dtype=dtype, steps=1000, remat=remat, progress=False,
                     attention=AttentionConfig(implementation=attention, interpret=args.device != "gpu",
                                               **(tuning or {})),
                     lora=LoRAConfig(rank=args.rank, alpha=args.alpha, targets=TARGETS[args.targets]),
                     optim=OptimConfig(learning_rate=5e-5, warmup_steps=0),
                     data=DataConfig(seq_len=seq, batch_rows=rows, max_train_tasks=args.data_tasks, max_val_tasks=1,
                                     prompt=args.prompt))


def load_ours(args, cfg):
    """(Decoder, tokenizer): --model tiny is a 2-layer random model (CPU smoke), else sft.train.load_model."""
    if args.model != "tiny":
        from cudaperf_jax.sft.train import load_model
        return load_model(cfg)
    from flax import nnx

    from benchmarks.rl_step import SHAPES
    from cudaperf_jax.models.config import ModelConfig
    from cudaperf_jax.models.decoder import Decoder
    from cudaperf_jax.models.loading import load_tokenizer
    tok = load_tokenizer("default")
    mc = ModelConfig.from_hf({"vocab_size": len(tok), **SHAPES["tiny"], "eos_token_id": tok.eos_token_id})
    return Decoder(mc, rngs=nnx.Rngs(0)), tok


def batch_of(args, cfg, model, tok, out: Path) -> dict:
    """The first step's packed rows of our SFT data for cfg (built in a scratch run directory), cached at
    batch_path (also the HF worker's tokens)."""
    import tempfile

    import numpy as np

    from cudaperf_jax.sft import packing
    from cudaperf_jax.sft.train import build_data
    path = batch_path(args, out)
    if path.is_file():
        with np.load(path) as z:
            return {k: z[k] for k in packing.FIELDS}
    with tempfile.TemporaryDirectory() as wd:
        train, stats = build_data(cfg, model, tok, Path(wd))["train"]
    idx = packing.batch_rows(train.rows, 0, cfg.data.batch_rows, cfg.data.shuffle_seed)
    if train.rows < cfg.data.batch_rows:
        raise SystemExit(f"only {train.rows} packed rows from {args.data_tasks} tasks; raise --data_tasks")
    batch = train.take(idx)
    np.savez(path, **batch)
    print(f"[jax] data: {json.dumps(stats)}", flush=True)
    return batch


def run_ours(args, out: Path) -> list[dict]:
    import jax
    from flax import nnx

    from cudaperf_jax.sft.train import build_step
    from cudaperf_jax.training import stack_micro_batches
    cfg = sft_config(args)
    t0 = time.perf_counter()
    base, tok = load_ours(args, cfg)
    load_s = time.perf_counter() - t0
    batch = batch_of(args, cfg, base, tok, out)
    real = int((batch["segment_ids"] > 0).sum())
    stacked = {k: jax.device_put(v) for k, v in stack_micro_batches(batch, 1).items()}
    dev = jax.devices()[0]
    rows = []
    for spec in args.ours.split(","):
        attention, remat, tuning = parse_ours(spec)
        row = {"framework": "ours", "shape": args.shape, "targets": args.targets, "config": spec,
               "attention": attention, "remat": remat, "tokens": real, "padded_tokens": int(batch["tokens"].size),
               "load_s": round(load_s, 1), "device": str(dev)}
        try:
            rcfg = sft_config(args, attention, remat, tuning)
            row["attention_resolved"] = rcfg.attention.resolve().implementation
            step = build_step(rcfg, nnx.clone(base))
            t0 = time.perf_counter()
            compiled = step.train_step.lower(step.params, step.opt_state, step.rest, stacked).compile()
            row["compile_s"] = round(time.perf_counter() - t0, 1)
            mem = compiled.memory_analysis()
            if mem is not None:
                row["program_gb"] = round((mem.argument_size_in_bytes + mem.output_size_in_bytes
                                           - mem.alias_size_in_bytes + mem.temp_size_in_bytes) / 1e9, 2)
                row["temp_gb"] = round(mem.temp_size_in_bytes / 1e9, 2)
            params, opt_state = step.params, step.opt_state
            times = []
            for i in range(args.warmup + args.steps):
                t0 = time.perf_counter()
                params, opt_state, m = compiled(params, opt_state, step.rest, stacked)
                loss = float(jax.device_get(m["loss"]))
                if i >= args.warmup:
                    times.append(time.perf_counter() - t0)
            row.update(_timing(times, real, batch["tokens"].size), loss=loss)
            row["peak_gb"] = _jax_peak_gb(dev)
            del params, opt_state, step, compiled
        except Exception as e:  # noqa: BLE001 - out of memory, a kernel that does not build: recorded, next row
            row["error"] = f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"
        print(f"[jax] {json.dumps(row)}", flush=True)
        rows.append(row)
    return rows


def _timing(times: list[float], real: int, padded: int) -> dict:
    import statistics
    med = statistics.median(times)
    return {"step_s": round(med, 4), "step_s_all": [round(t, 4) for t in times],
            "tokens_per_s": round(real / med, 1), "padded_tokens_per_s": round(padded / med, 1)}


def _jax_peak_gb(dev) -> float | None:
    stats = dev.memory_stats() or {}
    return round(stats["peak_bytes_in_use"] / 1e9, 2) if "peak_bytes_in_use" in stats else None


# ---- the parent: workers, table, JSON, PNG ----------------------------------------------------------------------
def worker(args, which: str, out: Path) -> list[dict]:
    """Runs one framework's rows of this shape in a child process; its rows (a failed child: one error row)."""
    result = out / f".rows_{which}_{args.shape}.json"
    result.unlink(missing_ok=True)
    cmd = [sys.executable, str(Path(__file__)), *sys.argv[1:], "--worker", which, "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO)] + [p for p in [os.environ.get("PYTHONPATH")] if p])}
    if which == "jax":   # before JAX starts: room for a step without remat (the HF worker runs after it exits)
        env.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.92")
    rc = subprocess.run(cmd, env=env, check=False).returncode
    if result.is_file():
        return json.loads(result.read_text())
    return [{"framework": "ours" if which == "jax" else "hf", "shape": args.shape, "targets": args.targets,
             "config": "(worker)", "error": f"worker exited with code {rc} before writing its rows"}]


def merge(out: Path, new: list[dict]) -> dict:
    path = out / "train_speed.json"
    old = json.loads(path.read_text()) if path.is_file() else {"rows": []}
    rows = {row_key(r): r for r in old["rows"]}
    rows.update({row_key(r): r for r in new})
    doc = {"rows": list(rows.values()), "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "goal": "ours / transformers+PEFT tokens/s >= 1.5 (best row of each, per shape and targets)"}
    doc["ratios"] = ratios(doc["rows"])
    path.write_text(json.dumps(doc, indent=2))
    return doc


def ratios(rows: list[dict]) -> dict:
    """{shape|targets: {ours_best, hf_best, ratio}} over the rows that ran."""
    best: dict = {}
    for r in rows:
        if r.get("tokens_per_s"):
            k = f"{r['shape']}|{r['targets']}"
            b = best.setdefault(k, {})
            if r["tokens_per_s"] > b.get(r["framework"], [0, ""])[0]:
                b[r["framework"]] = [r["tokens_per_s"], r["config"]]
    out = {}
    for k, b in best.items():
        o, h = b.get("ours"), b.get("hf")
        out[k] = {"ours_best": o, "hf_best": h, "ratio": round(o[0] / h[0], 2) if o and h else None}
    return out


def table(doc: dict) -> str:
    lines = [(f"{'fw':<5} {'shape':<7} {'tgt':<5} {'config':<28} {'kernel':<10} {'compile s':>9} {'step s':>8} "
              f"{'tok/s':>9} {'peak GB':>8} {'prog GB':>8}")]
    for r in sorted(doc["rows"], key=lambda r: (r["shape"], r["targets"], r["framework"], r["config"])):
        kern = r.get("attention_resolved") or r.get("sdpa_kernel") or ""
        if "error" in r:
            lines.append(f"{r['framework']:<5} {r['shape']:<7} {r['targets']:<5} {r['config']:<28} {kern:<10} "
                         f"error: {r['error'][:80]}")
            continue
        lines.append(f"{r['framework']:<5} {r['shape']:<7} {r['targets']:<5} {r['config']:<28} {kern[:10]:<10} "
                     f"{_cell(r, 'compile_s', '.1f'):>9} {_cell(r, 'step_s', '.3f'):>8} "
                     f"{_cell(r, 'tokens_per_s', '.0f'):>9} {_cell(r, 'peak_gb', '.1f'):>8} "
                     f"{_cell(r, 'program_gb', '.1f'):>8}")
    for k, v in doc["ratios"].items():
        lines.append(f"{k}: ours {v['ours_best']} / transformers+PEFT {v['hf_best']} = {v['ratio']}")
    return "\n".join(lines)


def _cell(r: dict, key: str, fmt: str) -> str:
    return format(r[key], fmt) if r.get(key) is not None else "-"


def plot(doc: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = sorted((r for r in doc["rows"] if r.get("tokens_per_s")),
                  key=lambda r: (r["shape"], r["targets"], r["framework"], r["config"]))
    if not rows:
        return
    fig, axes = plt.subplots(1, 2, figsize=(11, 0.35 * len(rows) + 1.5), sharey=True)
    labels = [f"{r['shape']} {r['targets']} {r['framework']} {r['config']}" for r in rows]
    colors = ["tab:blue" if r["framework"] == "ours" else "tab:orange" for r in rows]
    axes[0].barh(labels, [r["tokens_per_s"] for r in rows], color=colors)
    axes[0].set_xlabel("SFT tokens/s (real tokens, median step)")
    axes[1].barh(labels, [(r.get("program_gb") if r["framework"] == "ours" else r.get("peak_gb")) or 0
                          for r in rows], color=colors)
    axes[1].set_xlabel("GPU memory, GB (ours: the step program's; theirs: peak allocated)")
    axes[0].invert_yaxis()
    fig.suptitle("ours (blue) vs transformers + PEFT (orange), LoRA, bf16")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="qwen2.5-coder-1.5b", help="a registered model name or a .gguf path "
                    "(tiny: a random 2-layer model, CPU smoke)")
    ap.add_argument("--shape", default="6x3072", help="ROWSxTOKENS: packed rows per step x tokens per row")
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--alpha", type=float, default=32.0)
    ap.add_argument("--targets", default="qkvo", choices=sorted(TARGETS))
    ap.add_argument("--ours", default="pallas,pallas:noremat,cudnn", help="our rows: ATTENTION[:noremat], "
                    "ATTENTION in auto, pallas, cudnn, xla")
    ap.add_argument("--hf", default="sdpa,sdpa:ckpt", help="transformers rows: sdpa[:ckpt]")
    ap.add_argument("--torch_compile", action="store_true", help="also a torch.compile row (sdpa, no checkpointing)")
    ap.add_argument("--only", default="both", choices=["both", "jax", "hf"])
    ap.add_argument("--steps", type=int, default=8, help="timed steps per row (the median is reported)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps per row after compiling")
    ap.add_argument("--data_tasks", type=int, default=48, help="train tasks whose examples are packed")
    ap.add_argument("--prompt", default="worked_example", help="the SFT prompt variant (plain: short prompts)")
    ap.add_argument("--out", default=os.environ.get("OUT") or str(REPO / "benchmarks" / "results"))
    ap.add_argument("--worker", default="", choices=["", "jax", "hf"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    parse_shape(args.shape)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.worker:
        from experiments.launch import user_errors
        args.device = _device(args.worker)
        try:
            if args.worker == "jax":
                rows = run_ours(args, out)
            else:
                from benchmarks.train_speed_hf import run_hf
                rows = run_hf(args, out)
        except user_errors() as e:
            raise SystemExit(f"{args.worker}: {e}") from None
        (out / f".rows_{args.worker}_{args.shape}.json").write_text(json.dumps(rows))
        return
    new = []
    for which in (["jax", "hf"] if args.only == "both" else [args.only]):
        new += worker(args, which, out)
    doc = merge(out, new)
    print(table(doc))
    plot(doc, out / "train_speed.png")
    print(f"wrote {out / 'train_speed.json'} and train_speed.png", flush=True)


def _device(which: str) -> str:
    if which == "jax":
        import jax
        return "gpu" if jax.default_backend() == "gpu" else "cpu"
    import torch
    return "gpu" if torch.cuda.is_available() else "cpu"


if __name__ == "__main__":
    main()
