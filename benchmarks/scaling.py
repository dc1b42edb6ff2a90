"""Scaling over the GPUs of one host: GRPO train-step throughput at a fixed per-device batch, sampler
throughput, and harness throughput with execution workers on every GPU.

    OUT=out python benchmarks/scaling.py [--gpus=1,2,4,8] [--model=qwen2.5-0.5b] [--per_device_batch=8]

For each N (<= visible GPUs): a (data=1, fsdp=N) mesh, parameters and optimizer state FSDP-sharded, the
batch over (data, fsdp); tokens/s of the jitted train step (median of timed steps after compile) and of
generation (batch 32*N, 128 new tokens). Scaling efficiency = throughput(N) / (N * throughput(1)).
Harness: HarnessPool(backend="cuda") on the smoke suite's implementations, candidates/minute with
workers on all GPUs. Prints a table, writes $OUT/scaling.json.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SHAPES = {
    "qwen2.5-0.5b": dict(  # noqa: C408 - keyword arguments, as in a HF config
                         model_type="qwen2", vocab_size=151936, hidden_size=896, intermediate_size=4864,
                         num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
                         max_position_embeddings=32768, rope_theta=1000000.0, tie_word_embeddings=True,
                         rms_norm_eps=1e-6, bos_token_id=151643, eos_token_id=151645),
    "tiny": dict(  # noqa: C408 - keyword arguments, as in a HF config
                 model_type="llama", vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024, bos_token_id=1,
                 eos_token_id=2),
}


def train_throughput(n, args):
    import jax
    import jax.numpy as jnp
    import numpy as np
    from flax import nnx

    from cudaperf_jax.models.config import ModelConfig
    from cudaperf_jax.models.decoder import Decoder
    from cudaperf_jax.models.sharding import make_mesh, shard_model
    from cudaperf_jax.rl.grpo import GRPOConfig
    from cudaperf_jax.rl.objective import grpo_objective
    from cudaperf_jax.training import (
        init_train_state,
        make_optimizer,
        make_train_step,
        stack,
    )
    cfg = ModelConfig.from_hf(SHAPES[args.model])
    mesh = make_mesh(data=1, fsdp=n, devices=jax.devices()[:n])
    model = Decoder(cfg, rngs=nnx.Rngs(0), dtype=jnp.bfloat16, param_dtype=jnp.float32)
    shard_model(model, mesh)
    grpo = GRPOConfig()
    opt, _ = make_optimizer(grpo.optim(), args.steps + 1)
    graphdef, params, opt_state, rest = init_train_state(model, opt, mesh=mesh)
    b, length = args.per_device_batch * n, args.seq_len
    rng = np.random.default_rng(0)
    tokens = rng.integers(3, cfg.vocab_size, (b, length)).astype(np.int32)
    batch = {"tokens": tokens, "positions": np.broadcast_to(np.arange(length, dtype=np.int32), (b, length)).copy(),
             "kv_mask": np.ones((b, length), bool), "loss_mask": np.ones((b, length - 1), np.float32),
             "old_logp": np.full((b, length - 1), -5.0, np.float32), "ref_logp": np.full((b, length - 1), -5.0, np.float32),
             "advantages": rng.normal(size=b).astype(np.float32)}
    batch = stack([batch])                       # one micro-batch: the training core's step, as RL and SFT run it
    step = make_train_step(graphdef, opt, grpo_objective(grpo), mesh=mesh)
    t0 = time.perf_counter()
    params, opt_state, m = step(params, opt_state, rest, batch)
    jax.block_until_ready(m["loss"])
    compile_s = time.perf_counter() - t0
    times = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        params, opt_state, m = step(params, opt_state, rest, batch)
        jax.block_until_ready(m["loss"])
        times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    return {"gpus": n, "batch": b, "seq_len": length, "step_s": med, "tokens_per_s": b * length / med,
            "compile_s": compile_s, "loss": float(m["loss"]), "params": cfg.num_params}


def generation_throughput(n, args):
    import jax
    import jax.numpy as jnp
    import numpy as np
    from flax import nnx

    from cudaperf_jax.generation.sampler import Sampler, SamplingParams
    from cudaperf_jax.models.config import ModelConfig
    from cudaperf_jax.models.decoder import Decoder
    from cudaperf_jax.models.sharding import make_mesh, shard_model
    cfg = ModelConfig.from_hf(SHAPES[args.model])
    mesh = make_mesh(data=n, fsdp=1, devices=jax.devices()[:n])
    model = Decoder(cfg, rngs=nnx.Rngs(0), dtype=jnp.bfloat16, param_dtype=jnp.bfloat16)
    shard_model(model, mesh)
    sampler = Sampler(model, None, mesh=mesh)
    b = 32 * n
    prompts = [list(np.random.default_rng(i).integers(3, cfg.vocab_size, 64)) for i in range(b)]
    params = SamplingParams(max_new_tokens=128, temperature=1.0, top_p=0.95, stop_token_ids=(-1,))
    sampler.generate(prompts, params, seed=0)
    t0 = time.perf_counter()
    out = sampler.generate(prompts, params, seed=1)
    dt = time.perf_counter() - t0
    return {"gpus": n, "batch": b, "new_tokens": int(out.lengths.sum()), "seconds": dt,
            "tokens_per_s": float(out.lengths.sum()) / dt}


def harness_throughput(args):
    from kernels_harness.run.pool import HarnessPool, gpu_count
    from kernels_harness.tasks.schema import load_task
    suite = Path(__file__).resolve().parents[1] / "experiments" / "suites" / "smoke"
    tasks = [load_task(p) for p in sorted(suite.glob("*.json"))]
    items = [(t, i.source) for t in tasks for i in t.implementations] * args.harness_repeat
    with HarnessPool(backend="cuda") as pool:
        pool.evaluate(items[:len(tasks)])  # warm the reference builds
        t0 = time.perf_counter()
        results = pool.evaluate(items)
        dt = time.perf_counter() - t0
    ok = sum(r.status == "ok" for r in results)
    names = [f"{t.id}/{i.name}" for t in tasks for i in t.implementations] * args.harness_repeat
    not_ok = sorted({(n, r.status, (r.error or r.compile_log)[:200]) for n, r in zip(names, results)
                     if r.status != "ok"})
    return {"gpus": gpu_count(), "candidates": len(items), "ok": ok, "seconds": dt,
            "candidates_per_min": 60 * len(items) / dt, "not_ok": not_ok}


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpus", default="1,2,4,8")
    ap.add_argument("--model", default="qwen2.5-0.5b", choices=sorted(SHAPES))
    ap.add_argument("--per_device_batch", type=int, default=8)
    ap.add_argument("--seq_len", type=int, default=512)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--harness_repeat", type=int, default=4)
    ap.add_argument("--skip", default="", help="comma list of train,generation,harness")
    args = ap.parse_args(argv)
    import jax
    visible = len(jax.devices())
    ns = [n for n in map(int, args.gpus.split(",")) if n <= visible]
    skip = set(filter(None, args.skip.split(",")))
    report = {"device": str(jax.devices()[0].device_kind), "visible": visible, "args": vars(args),
              "train": [], "generation": [], "harness": None}
    for n in ns:
        for kind, fn in (("train", train_throughput), ("generation", generation_throughput)):
            if kind in skip:
                continue
            try:
                report[kind].append(fn(n, args))
            except Exception as e:  # noqa: BLE001 - one failure must not stop the rest
                report[kind].append({"gpus": n, "error": f"{type(e).__name__}: {e}"[:500]})
    for kind in ("train", "generation"):
        base = next((r["tokens_per_s"] for r in report[kind] if r.get("gpus") == 1 and "tokens_per_s" in r), None)
        for r in report[kind]:
            if base and "tokens_per_s" in r:
                r["efficiency"] = r["tokens_per_s"] / (r["gpus"] * base)
    if "harness" not in skip:
        try:
            report["harness"] = harness_throughput(args)
        except Exception as e:  # noqa: BLE001
            report["harness"] = {"error": f"{type(e).__name__}: {e}"[:500]}
    out = Path(os.environ.get("OUT", "out"))
    out.mkdir(parents=True, exist_ok=True)
    (out / "scaling.json").write_text(json.dumps(report, indent=2))
    print(f"{'what':<12}{'GPUs':>5}{'tokens/s':>14}{'efficiency':>12}")
    for kind in ("train", "generation"):
        for r in report[kind]:
            print(f"{kind:<12}{r['gpus']:>5}{r.get('tokens_per_s', float('nan')):>14.0f}"
                  f"{r.get('efficiency', float('nan')):>12.2f}  {r.get('error', '')}")
    print("harness:", report["harness"])


if __name__ == "__main__":
    main()
