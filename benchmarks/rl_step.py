"""Where one RL step's time goes: generation, harness, reference pass, update, idle (cudaperf_jax.rl.trainer).

    python benchmarks/rl_step.py                                   # H200: SmolLM2-135M and a random Qwen2.5-0.5B shape
    python benchmarks/rl_step.py --models=tiny --backend=cpu --samples=2 --turns=2 --new_tokens=32 --tasks=1   # CPU

Per model: one warm-up step (compiles), then --steps measured steps of the real trainer (multi-turn rollouts on
the smoke suite, the harness pool in its own processes, GRPO update with the reference KL). Prints a table and
writes rl_step.json (+ rl_step.png) to $OUT or benchmarks/results/. "qwen0.5b" is Qwen2.5-0.5B's shape (896 wide,
24 layers, 14/2 heads, 4864 MLP, tied embeddings) with random weights and SmolLM2's tokenizer (its vocabulary,
49152, not Qwen's 151936: the Qwen tokenizer is not available offline). "tiny" is a 2-layer, 64-wide random model.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SHAPES = {"qwen0.5b": dict(model_type="qwen2", hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                           num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=32768,
                           rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=True),
          "tiny": dict(model_type="llama", hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=8192,
                       rope_theta=10000.0, rms_norm_eps=1e-6, tie_word_embeddings=True)}


def build_policy(name: str, dtype: str):
    from flax import nnx

    from cudaperf_jax.models.config import ModelConfig
    from cudaperf_jax.models.decoder import Decoder
    from cudaperf_jax.models.loading import DTYPES, load_policy, load_tokenizer
    if name == "smollm2":
        return load_policy("default", dtype=dtype)
    tok = load_tokenizer("default")
    cfg = ModelConfig.from_hf({**SHAPES[name], "vocab_size": len(tok), "bos_token_id": tok.bos_token_id,
                               "eos_token_id": tok.eos_token_id, "pad_token_id": tok.pad_token_id})
    return Decoder(cfg, rngs=nnx.Rngs(0), dtype=DTYPES[dtype], param_dtype=DTYPES[dtype]), tok


def _label(row: dict) -> str:
    return row["model"] + (" (warm-up)" if row["step"] == 0 else f" #{row['step']}")


def report(rows: list, out_dir: Path, meta: dict) -> None:
    """Prints the table and writes rl_step.json (+ .png); called after each model, so a run cut short keeps its rows."""
    hdr = f"{'model':<20} {'cands':>5} {'gen s':>7} {'harness s':>9} {'h.wait s':>8} {'ref s':>6} {'update s':>8} " \
          f"{'idle s':>6} {'step s':>7} {'tok/s':>8}"
    print(hdr)
    for r in rows:
        print(f"{_label(r):<20} {r['candidates']:>5} {r['generation_s']:>7.2f} {r['harness_s']:>9.2f} "
              f"{r['harness_wait_s']:>8.2f} {r['ref_s']:>6.2f} {r['update_s']:>8.2f} {r['idle_s']:>6.2f} "
              f"{r['step_s']:>7.2f} {r['tokens_per_s']:>8.0f}")
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
    except ImportError:
        pass
    print(f"wrote {out_dir / 'rl_step.json'}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="smollm2,qwen0.5b")
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--tasks", type=int, default=3)
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--turns", type=int, default=2)
    ap.add_argument("--new_tokens", type=int, default=384)
    ap.add_argument("--steps", type=int, default=1)
    ap.add_argument("--micro_batch", type=int, default=16)
    ap.add_argument("--dtype", default=None, help="default: bfloat16 on a GPU, float32 on the CPU")
    ap.add_argument("--memory_fraction", type=float, default=0.55)
    args = ap.parse_args()
    if args.memory_fraction:
        os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] = f"{args.memory_fraction:.3f}"   # before JAX starts
    import jax

    from cudaperf_jax.experiment import open_run
    from cudaperf_jax.experiment.config import from_configdict
    from cudaperf_jax.rl.config import RLConfig
    from cudaperf_jax.rl.trainer import Trainer
    from experiments.configs import rl_tiny
    from kernels_harness.run.pool import HarnessPool
    dtype = args.dtype or ("bfloat16" if jax.default_backend() == "gpu" else "float32")
    out_dir = Path(os.environ.get("OUT") or REPO / "benchmarks" / "results")
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    with HarnessPool(backend=args.backend, seed=0) as pool:
        for name in args.models.split(","):
            c = rl_tiny.get_config()
            c.dtype = dtype
            c.tasks.max_tasks = args.tasks
            c.tasks_per_step = args.tasks
            c.rollout.update(samples_per_task=args.samples, turns=args.turns, max_new_tokens=args.new_tokens)
            c.grpo.micro_batch = args.micro_batch
            c.prompt_bucket = 64
            t0 = time.perf_counter()
            policy = build_policy(name, dtype)
            load_s = time.perf_counter() - t0
            with tempfile.TemporaryDirectory() as wd:
                cfg = from_configdict(RLConfig, c)
                run = open_run(wd, cfg, name="rl_step")
                tr = Trainer(cfg, run, policy=policy)
                client = tr.client(pool)
                t0 = time.perf_counter()
                m = tr.step(0, client)   # the warm-up (jit compiles): its row is step 0
                warm_s = time.perf_counter() - t0
                for st in range(args.steps + 1):
                    m = m if st == 0 else tr.step(st, client)
                    rows.append({"model": name, "step": st, "load_s": load_s, "warmup_step_s": warm_s,
                                 "candidates": args.tasks * args.samples * args.turns, "backend": pool.backend,
                                 **{k[5:]: v for k, v in m.items() if k.startswith("time/")},
                                 "turn0/compiled": m["turn0/compiled"], "turn0/correct": m["turn0/correct"]})
                run.close()
            del tr, policy
            report(rows, out_dir, {"device": str(jax.devices()[0]), "args": vars(args), "dtype": dtype})


if __name__ == "__main__":
    main()
