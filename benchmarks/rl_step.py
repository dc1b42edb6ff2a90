"""Where one RL step's time and memory go: generation, harness, reference pass, update, idle (cudaperf_jax.rl.trainer).

    python benchmarks/rl_step.py                                   # H200: SmolLM2-135M and a random Qwen2.5-0.5B shape
    python benchmarks/rl_step.py --models=tiny --backend=cpu --samples=2 --turns=2 --new_tokens=32 --tasks=1   # CPU
    python benchmarks/rl_step.py --model=default --lora_rank=4 --backend=cpu --samples=2 --new_tokens=16 \
        --tasks=1                                      # real SmolLM2 weights by name, CPU: ~10 min (compiles)

The 7B scale check (Qwen2.5-7B's shape, random bf16 weights, rank-16 adapters on q,k,v,o, 8 tasks x 8 samples x 2
turns of up to ~3k tokens, the harness beside it on the same GPU):

    OUT=out python benchmarks/rl_step.py --shape=qwen2.5-7b --tokenizer=qwen2.5-coder-1.5b --lora_rank=16 \
        --lora_targets=q,k,v,o --tasks=8 --samples=8 --turns=2 --new_tokens=1024 --prompt=worked_example \
        --micro_batch=2 --gen_batch=4 --memory_fraction=0.6 --compilation_cache=/tmp/jaxcache --rewarm

Its memory, estimated from shapes (`memory_estimate`, in the JSON): the bf16 base 15.2 GB; the sampler's merged
q,k,v,o kernels 1.6 GB (as much again while lora.merge replaces them); adapters + Adam's moments + gradient sums 0.16 GB;
a sampler call at most 21.6 GB (KV cache + float32 prefill scores of 4 sequences at 4,096-token prompts, or 16 at
2,048); the update of a micro-batch of 2 sequences of 3,072 tokens ~9.9 GB (4: ~19.8 GB, still under the sampler's):
a peak of ~40 GB, inside --memory_fraction=0.6 of 80 GB (48 GB), ~32 GB left to the harness's processes
(--gen_batch=2: ~30 GB). A full fine-tune of the same shape would need ~82 GB. The command's three steps (warm-up,
one measured, the re-warm-up) may take longer than 10 minutes on an H100: --steps=0 leaves out the measured one.

The real Qwen2.5-Coder-1.5B (issue 44: a compiled step under 20 s with generation >= 60% of it, a second run's
warm-up under 60 s): rank-16 adapters on q,k,v,o, 8 tasks x 8 samples x 2 turns of up to 1,024 new tokens,
worked_example prompts (~2.4k tokens; turn 1 ~3.5k), the update's and reference pass's attention the Pallas flash
kernel (--attention), the harness beside it on the same H100. Two calls on one machine, carry [".whl"], the GGUF in
the cache (the second call's warm-up reads the first's persistent cache; --gen_batch=8 if a sampler call runs out
of memory):

    pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
    export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1 TF_CPP_MIN_LOG_LEVEL=3
    python3 benchmarks/rl_step.py --model=qwen2.5-coder-1.5b --lora_rank=16 --lora_targets=q,k,v,o --tasks=8 \
        --samples=8 --turns=2 --new_tokens=1024 --prompt=worked_example --micro_batch=16 --gen_batch=16 \
        --memory_fraction=0.6 --est_seq_len=5120 --compilation_cache=/tmp/jaxcache --steps=0
    # call 1 (~5-8 min): the cold warm-up, compiling into /tmp/jaxcache; call 2: the same with --steps=1 --rewarm:
    # a second run's warm-up (cache warm), one compiled step, a re-warm-up in the same process

Estimated (memory_estimate, --est_seq_len=5120): base 3.1 GB, a sampler call of 16 sequences at 4k-token prompts
34.5 GB (XLA's float32 prefill scores dominate: the cache path keeps XLA's attention), the update's micro-batch of
16 sequences of 5k tokens 23 GB with the flash kernel and remat (XLA's attention: 84 GB; it needs --micro_batch=4
or less); --no_remat (RLConfig.remat=False) drops the recompute but keeps every layer's activations: 184 GB at
--micro_batch=16, 23 GB at --micro_batch=2.

Per model: a warm-up step (compiles), then --steps measured steps of the real trainer (multi-turn rollouts on the
smoke suite, the harness pool in its own processes, GRPO update with the reference KL: per-layer remat and the LM
head's log-softmax in 256-position chunks, rl.objective). Each row has the phase seconds, the device's peak memory
so far (jax memory_stats: peak_bytes_in_use) and its limit. --compilation_cache DIR turns on JAX's persistent cache
(every program stored): the warm-up row of a first run compiles into DIR, that of a second run with the same DIR
reads it; --rewarm adds a row after jax.clear_caches() - a warm-up from the persistent cache in the same process
(from nothing with --compilation_cache=off). Prints a table and writes rl_step.json (+ rl_step.png) to $OUT or
benchmarks/results/, with a memory estimate per model (`estimate`).

Shapes (random weights; SmolLM2's tokenizer by default, whose 49,152 ids are a subset of a larger model vocabulary, so
sampled ids beyond it decode to nothing; --tokenizer=qwen2.5-coder-1.5b gives the Qwen vocabulary where that model's
file is in the cache, as on the GPU machine after its transfer, which has no network for SmolLM2's): "qwen0.5b" is Qwen2.5-0.5B's (896 wide,
24 layers, 14/2 heads, 4864 MLP, tied embeddings, the tokenizer's vocabulary), "qwen2.5-1.5b" Qwen2.5-Coder-1.5B's
(1536, 28 layers, 12/2 heads, 8960, vocabulary 151,936, tied), "qwen2.5-7b" Qwen2.5-7B's (3584, 28 layers, 28/4
heads, head dim 128, 18944, vocabulary 152,064, untied), "tiny" a 2-layer, 64-wide model.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

_QWEN = {"model_type": "qwen2", "max_position_embeddings": 32768, "rope_theta": 1000000.0, "rms_norm_eps": 1e-6}
SHAPES = {"qwen0.5b": {**_QWEN, "hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24,
                       "num_attention_heads": 14, "num_key_value_heads": 2, "tie_word_embeddings": True},
          "qwen2.5-1.5b": {**_QWEN, "hidden_size": 1536, "intermediate_size": 8960, "num_hidden_layers": 28,
                           "num_attention_heads": 12, "num_key_value_heads": 2, "tie_word_embeddings": True,
                           "vocab_size": 151936},
          "qwen2.5-7b": {**_QWEN, "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
                         "num_attention_heads": 28, "num_key_value_heads": 4, "head_dim": 128,
                         "tie_word_embeddings": False, "vocab_size": 152064},
          "tiny": {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                   "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 8192,
                   "rope_theta": 10000.0, "rms_norm_eps": 1e-6, "tie_word_embeddings": True}}


def build_policy(name: str, dtype: str, tokenizer: str = "default"):
    from flax import nnx

    from cudaperf_jax.models.config import ModelConfig
    from cudaperf_jax.models.decoder import Decoder
    from cudaperf_jax.models.loading import DTYPES, load_policy, load_tokenizer
    if name == "smollm2":
        return load_policy("default", dtype=dtype)
    tok = load_tokenizer(tokenizer)
    cfg = ModelConfig.from_hf({"vocab_size": len(tok), **SHAPES[name], "bos_token_id": tok.bos_token_id,
                               "eos_token_id": tok.eos_token_id, "pad_token_id": tok.pad_token_id})
    return Decoder(cfg, rngs=nnx.Rngs(0), dtype=DTYPES[dtype], param_dtype=DTYPES[dtype]), tok


def _label(row: dict) -> str:
    cache = {"cold": ", cache cold", "warm": ", cache warm"}.get(row.get("persistent_cache", "off"), "")
    return row["model"][:14] + (f" (rewarm{cache})" if row.get("rewarm") else f" (warm-up{cache})"
                                if row["step"] == 0 else f" #{row['step']}")


def memory_estimate(cfg, lora, *, dtype_bytes: int, seqs: int, gen_batch: int, micro_batch: int, new_tokens: int,
                    seq_len: int, fused: bool = False, remat: bool = True) -> dict:
    """GB of the main buffers of one RL step, from shapes alone (cudaperf_jax.models.lora, rl.rollout, rl.objective):
    the base (frozen or trained) weights; the sampler's merged kernels (LoRA: new arrays for the targeted kernels
    only, plus as much again while lora.merge replaces them); the trained state (adapters + Adam's moments + gradient
    sums, or 3 more copies of the weights at rank 0); one sampler call's KV cache and prefill attention (float32
    scores, masked scores, bf16 probabilities: 10 bytes a score; rollout.chunk_size keeps calls of gen_batch sequences
    at 4,096-token prompts, up to 8x as many at shorter ones); and the update's live activations for a micro-batch of
    seq_len-token sequences (per-layer remat: each layer's input kept; one layer's attention and MLP recomputed with
    their gradients; a 256-position chunk of the LM head; without `remat` every layer's residuals). The update's
    attention: XLA's keeps float32 scores [B, H, L, L] (scores, their gradient, the probabilities); a fused kernel
    (`fused`: pallas, cudnn) none. The sampler's prefill always uses XLA's (the cache path)."""
    from cudaperf_jax.models.lora import adapter_shapes, num_adapter_params
    from cudaperf_jax.rl.rollout import GEN_BATCH_AT, chunk_size
    d, f, v, n_layers = cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size, cfg.num_layers
    h, hkv, hd = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
    base = cfg.num_params * dtype_bytes
    targets = set(adapter_shapes(cfg, lora.names)) if lora.on else set()
    kernels = {"qkv": (d * (h + 2 * hkv) * hd, {"q", "k", "v"}), "o": (h * hd * d, {"o"}),
               "gate_up": (2 * d * f, {"gate", "up"}), "down": (f * d, {"down"})}
    merged = sum(n for n, t in kernels.values() if t & targets) * n_layers * dtype_bytes
    trained = 4 * 4 * num_adapter_params(cfg, lora) if lora.on else 3 * base
    prompt = max(seq_len - new_tokens, 1)
    calls = [(min(seqs, chunk_size(gen_batch, p) if gen_batch else seqs), p) for p in (prompt, GEN_BATCH_AT)]
    per_token = n_layers * 2 * hkv * hd * dtype_bytes
    generation = max(b * (p + new_tokens) * per_token + b * h * p * p * 10 for b, p in calls)
    scores = 0 if fused else 3 * h * seq_len * seq_len * 4                             # one layer's scores
    layer = 6 * seq_len * f * dtype_bytes + scores                                     # its MLP, + grads
    if remat:   # each layer's input kept, one layer recomputed at a time
        update = micro_batch * (seq_len * d * dtype_bytes * n_layers + layer + 3 * 256 * v * 4)
    else:       # every layer's residuals: norms' inputs, q/k/v, attention out, gate/up/their product (+ scores)
        kept = seq_len * dtype_bytes * (4 * d + 2 * (h + hkv) * hd + 3 * f) + scores // 3
        update = micro_batch * (kept * n_layers + layer + 3 * 256 * v * 4)
    out = {"base_weights": base, "sampler_merged_kernels": 2 * merged, "trained_state": trained,
           "generation": generation, "update_activations": update}
    out = {k: round(x / 1e9, 2) for k, x in out.items()}
    out["peak_estimate"] = round((base + 2 * merged + trained + max(generation, update)) / 1e9, 1)
    return out


def report(rows: list, out_dir: Path, meta: dict) -> None:
    """Prints the table and writes rl_step.json (+ .png); called after each model, so a run cut short keeps its rows."""
    hdr = f"{'model':<32} {'cands':>5} {'gen s':>7} {'harness s':>9} {'h.wait s':>8} {'ref s':>6} {'update s':>8} " \
          f"{'idle s':>6} {'step s':>7} {'gen %':>6} {'tok/s':>8} {'peak GB':>8}"
    print(hdr)
    for r in rows:
        peak = f"{r['peak_gb']:>8.1f}" if r.get("peak_gb") is not None else f"{'-':>8}"
        print(f"{_label(r):<32} {r['candidates']:>5} {r['generation_s']:>7.2f} {r['harness_s']:>9.2f} "
              f"{r['harness_wait_s']:>8.2f} {r['ref_s']:>6.2f} {r['update_s']:>8.2f} {r['idle_s']:>6.2f} "
              f"{r['step_s']:>7.2f} {100 * r.get('generation_share', 0):>6.1f} {r['tokens_per_s']:>8.0f} {peak}")
    meta = {**meta, "rows": rows, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    (out_dir / "rl_step.json").write_text(json.dumps(meta, indent=2))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(6, 3))
        parts = ["generation_s", "harness_wait_s", "ref_s", "update_s", "idle_s"]
        left = [0.0] * len(rows)
        for p in parts:
            vals = [r[p] for r in rows]
            ax.barh([_label(r) for r in rows], vals, left=left, label=p[:-2])
            left = [a + b for a, b in zip(left, vals)]
        ax.set_xlabel("seconds of one RL step")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out_dir / "rl_step.png", dpi=120)
        plt.close(fig)
    except ImportError:
        pass
    print(f"wrote {out_dir / 'rl_step.json'}", flush=True)


def memory_gb(device) -> dict:
    """Peak and current bytes of the device (jax memory_stats; None on a backend without them), in GB."""
    stats = device.memory_stats() or {}
    names = {"peak_gb": "peak_bytes_in_use", "in_use_gb": "bytes_in_use", "limit_gb": "bytes_limit"}
    return {k: round(stats[v] / 1e9, 2) if v in stats else None for k, v in names.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="smollm2,qwen0.5b", help=f"comma-separated: smollm2, {', '.join(SHAPES)}")
    ap.add_argument("--shape", default="", choices=["", *SHAPES], help="one named random-weights shape (replaces "
                    "--models)")
    ap.add_argument("--tokenizer", default="default", help="the random shapes' tokenizer: a registered model name "
                    "or path (default: SmolLM2's; qwen2.5-coder-1.5b gives the shapes their own vocabulary where that "
                    "model's file is in the cache, e.g. on a machine without network)")
    ap.add_argument("--model", default="", help="real weights (replaces --models and --shape): a registered model "
                    "name (qwen2.5-coder-1.5b, ...), a .gguf file or a Hugging Face directory, loaded by the trainer")
    ap.add_argument("--attention", default="auto", help="the update's and reference pass's attention "
                    "(models.attention: auto, pallas, cudnn, xla)")
    ap.add_argument("--no_remat", action="store_true", help="the update keeps every layer's activations "
                    "(RLConfig.remat=False; fewer FLOPs, more memory: pair with a small --micro_batch)")
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--tasks", type=int, default=3)
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--turns", type=int, default=2)
    ap.add_argument("--new_tokens", type=int, default=384)
    ap.add_argument("--prompt", default="plain", help="the rollout's prompt variant (worked_example: ~2k tokens)")
    ap.add_argument("--max_prompt_tokens", type=int, default=4096)
    ap.add_argument("--steps", type=int, default=1)
    ap.add_argument("--micro_batch", type=int, default=16)
    ap.add_argument("--gen_batch", type=int, default=0, help="rollout.gen_batch: sequences per sampler call at "
                    "4,096-token prompts (0: a whole turn at once)")
    ap.add_argument("--lora_rank", type=int, default=0, help="0: a full fine-tune")
    ap.add_argument("--lora_alpha", type=float, default=0.0, help="default: 2 x rank")
    ap.add_argument("--lora_targets", default="q,k,v,o")
    ap.add_argument("--dtype", default=None, help="default: bfloat16 on a GPU, float32 on the CPU")
    ap.add_argument("--memory_fraction", type=float, default=0.55)
    ap.add_argument("--call_timeout_s", type=float, default=None,
                    help="the harness's limit on one call of a candidate (default: RLConfig.harness.call_timeout_s)")
    ap.add_argument("--job_timeout_s", type=float, default=None,
                    help="the harness's limit on one candidate in all (default: RLConfig.harness.job_timeout_s)")
    ap.add_argument("--est_seq_len", type=int, default=3072, help="the longest sequence (prompt + completion) for "
                    "the memory estimate")
    ap.add_argument("--compilation_cache", default="off", help="a directory for JAX's persistent compilation cache "
                    "(every program stored), or off")
    ap.add_argument("--rewarm", action="store_true", help="after the steps, jax.clear_caches() and one more step: "
                    "its compiles come from the persistent cache (or from nothing with --compilation_cache=off)")
    args = ap.parse_args()
    if args.memory_fraction:
        os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] = f"{args.memory_fraction:.3f}"   # before JAX starts
    from experiments.launch import compilation_cache
    cache = compilation_cache(args.compilation_cache, min_compile_s=0.0)
    cached_before = len(list(Path(cache).iterdir())) if cache else 0
    import jax

    from cudaperf_jax.experiment import open_run
    from cudaperf_jax.experiment.config import from_configdict
    from cudaperf_jax.models.lora import LoRAConfig
    from cudaperf_jax.rl.config import RLConfig
    from cudaperf_jax.rl.trainer import Trainer
    from experiments.configs import rl_tiny
    from kernels_harness.run.pool import HarnessPool
    dtype = args.dtype or ("bfloat16" if jax.default_backend() == "gpu" else "float32")
    lora = LoRAConfig(rank=args.lora_rank, alpha=args.lora_alpha or 2.0 * max(args.lora_rank, 1),
                      targets=args.lora_targets)
    out_dir = Path(os.environ.get("OUT") or REPO / "benchmarks" / "results")
    out_dir.mkdir(parents=True, exist_ok=True)
    device = jax.devices()[0]
    rows, estimates = [], {}
    meta = {"device": str(device), "args": vars(args), "dtype": dtype, "lora": vars(lora) if lora.on else None,
            "compilation_cache": cache, "cache_entries_before": cached_before, "estimate": estimates}
    from cudaperf_jax.rl.config import HarnessConfig
    given = {k: getattr(args, k) for k in ("call_timeout_s", "job_timeout_s") if getattr(args, k) is not None}
    harness = HarnessConfig(backend=args.backend, **given)
    meta["harness"] = dataclasses.asdict(harness)
    with HarnessPool(**harness.pool_kwargs()) as pool:
        for name in ([args.model] if args.model else [args.shape] if args.shape else args.models.split(",")):
            c = rl_tiny.get_config()
            c.dtype = dtype
            c.tasks.max_tasks = args.tasks
            c.tasks_per_step = args.tasks
            c.rollout.update(samples_per_task=args.samples, turns=args.turns, max_new_tokens=args.new_tokens,
                             prompt=args.prompt, max_prompt_tokens=args.max_prompt_tokens, gen_batch=args.gen_batch)
            c.grpo.micro_batch = args.micro_batch
            c.prompt_bucket = 64
            c.lora.update(rank=lora.rank, alpha=lora.alpha, targets=lora.targets)
            c.attention.implementation = args.attention
            c.remat = not args.no_remat
            t0 = time.perf_counter()
            # real weights: the trainer loads c.model
            policy = None if args.model else build_policy(name, dtype, args.tokenizer)
            if args.model:
                c.model = args.model
            with tempfile.TemporaryDirectory() as wd:
                cfg = from_configdict(RLConfig, c)
                run = open_run(wd, cfg, name="rl_step")
                tr = Trainer(cfg, run, policy=policy)
                load_s = time.perf_counter() - t0
                meta["attention"] = cfg.attention.resolve().implementation
                estimates[name] = memory_estimate(
                    tr.sampler.cfg, lora, dtype_bytes=2 if dtype == "bfloat16" else 4, seqs=args.tasks * args.samples,
                    gen_batch=args.gen_batch, micro_batch=args.micro_batch, new_tokens=args.new_tokens,
                    seq_len=args.est_seq_len, fused=cfg.attention.resolve().fused, remat=cfg.remat)
                client = tr.client(pool)
                steps = list(range(args.steps + 1)) + ([args.steps + 1] if args.rewarm else [])
                for st in steps:
                    rewarm = args.rewarm and st == steps[-1]
                    if rewarm:
                        jax.clear_caches()
                    t0 = time.perf_counter()
                    m = tr.step(st, client)   # step 0 is the warm-up (jit compiles)
                    gen_share = m["time/generation_s"] / max(m["time/step_s"], 1e-9)
                    warm = "off" if not cache else "warm" if (cached_before or rewarm) else "cold"
                    rows.append({"model": Path(name).name, "step": st, "rewarm": rewarm, "load_s": load_s,
                                 "persistent_cache": warm,
                                 "generation_share": round(gen_share, 3),
                                 "wall_s": time.perf_counter() - t0, "lora_rank": lora.rank,
                                 "candidates": args.tasks * args.samples * args.turns, "backend": pool.backend,
                                 **{k[5:]: v for k, v in m.items() if k.startswith("time/")}, **memory_gb(device),
                                 "turn0/compiled": m["turn0/compiled"], "turn0/correct": m["turn0/correct"],
                                 "completion_tokens": sum(m[f"turn{t}/completion_tokens"] for t in range(args.turns))})
                    report(rows, out_dir, meta)
                run.close()
            del tr, policy
            jax.clear_caches()   # the next model compiles its own programs (and frees this one's)
    print("memory estimate (GB): " + json.dumps(estimates))


if __name__ == "__main__":
    main()
