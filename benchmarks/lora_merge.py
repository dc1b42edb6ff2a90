"""LoRA on the GPU: adapter sizes, the cost of merging adapters into the sampler's weights, merged-vs-unmerged logits,
and decoding from merged weights after updates with no recompilation (decode kernels on).

    OUT=out python benchmarks/lora_merge.py                                   # Qwen2.5-1.5B-shaped, random, bf16
    python benchmarks/lora_merge.py --model=tiny --new_tokens=4 --repeats=1   # CPU smoke

For each target set (rank --rank): a random Decoder (bf16 storage and compute on a GPU) with adapters whose B is
random (std 0.02, A as PEFT initialises it); `lora.merge` timed (median of --repeats after a warm-up); logits of a
--prompt_len prompt with adapters (unmerged) against the merged model, and against the float32 reference of the same
weights; a Sampler built on `lora.merged_model`, greedy decoding of --new_tokens tokens for each --batches, then
--updates rounds of new adapters -> merge -> update_weights -> decode, counting the sampler's and merge's compiled
programs (must not grow) and checking that the kernels did not fall back to XLA. Prints a table, writes
$OUT/lora_merge.json.
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

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.generation import MODEL_SPECS, log, random_model


def _random_adapters(adapters, seed: int):
    """B ~ N(0, 0.02), A kept (a trained adapter's scale); the same structure as `adapters`."""
    from flax import nnx
    flat = nnx.to_flat_state(adapters)
    keys = jax.random.split(jax.random.key(seed), len(flat))
    new = [(p, v.replace(0.02 * jax.random.normal(k, v.shape, v.dtype)) if p[-1] == "lora_b" else v)
           for (p, v), k in zip(flat, keys)]
    return nnx.from_flat_state(new)


def _timed(fn, repeats: int) -> float:
    jax.block_until_ready(fn())
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def run_targets(args, targets: str) -> dict:
    from flax import nnx

    from cudaperf_jax.generation import sampler as sampler_mod
    from cudaperf_jax.generation.sampler import Sampler, SamplingParams
    from cudaperf_jax.models import lora
    gpu = jax.default_backend() == "gpu"
    dtype = jnp.bfloat16 if gpu else jnp.float32
    cfg = lora.LoRAConfig(rank=args.rank, alpha=2.0 * args.rank, targets=targets)
    model = lora.add_adapters(random_model(args.model, dtype), cfg, nnx.Rngs(1))
    graphdef, adapters, rest = nnx.split(model, lora.ADAPTERS, ...)
    adapters = _random_adapters(adapters, 0)
    n = lora.num_adapter_params(model.cfg, cfg)
    res = {"targets": targets, "rank": args.rank, "adapter_params": n, "adapter_mb_f32": 4 * n / 1e6,
           "adapter_adam_mb_f32": 12 * n / 1e6, "merge_ms": 1e3 * _timed(lambda: lora.merge(graphdef, adapters, rest),
                                                                         args.repeats)}
    toks = jnp.asarray(np.random.RandomState(0).randint(3, model.cfg.vocab_size, (1, args.prompt_len)), jnp.int32)
    fwd = jax.jit(lambda g, *s, t: nnx.merge(g, *s)(t), static_argnums=0)
    unmerged = np.asarray(fwd(graphdef, adapters, rest, t=toks))
    merged_state = lora.merge(graphdef, adapters, rest)
    base_graph = nnx.graphdef(lora.base_model(model))
    merged = np.asarray(fwd(base_graph, merged_state, t=toks))
    f32 = jax.tree.map(lambda x: x.astype(jnp.float32), rest)
    f32_graph = nnx.graphdef(nnx.eval_shape(lambda: lora.add_adapters(random_model(args.model, jnp.float32), cfg,
                                                                       nnx.Rngs(1))))
    reference = np.asarray(fwd(f32_graph, adapters, f32, t=toks))
    res.update(logits_max_abs=float(np.abs(unmerged).max()), merged_vs_unmerged=float(np.abs(merged - unmerged).max()),
               unmerged_vs_f32=float(np.abs(unmerged - reference).max()),
               merged_vs_f32=float(np.abs(merged - reference).max()))
    sampler = Sampler(nnx.merge(base_graph, merged_state), prompt_bucket=args.prompt_len, pad_id=0)
    kernels = sampler.kernels
    params = SamplingParams(max_new_tokens=args.new_tokens, temperature=0.0, stop_token_ids=())
    res["batches"] = []
    for b in args.batches:
        prompts = np.random.RandomState(b).randint(3, model.cfg.vocab_size, (b, args.prompt_len)).astype(np.int32)
        mask = np.ones_like(prompts, bool)
        keys = jax.random.split(jax.random.PRNGKey(0), b)
        jax.block_until_ready(sampler.generate_tokens(prompts, mask, params, keys))
        compiled = (sampler_mod._prefill._cache_size(), sampler_mod._decode._cache_size(), lora.fold._cache_size())
        decode_s, merge_update_s = [], []
        for u in range(args.updates):
            adapters = _random_adapters(adapters, 10 * b + u + 1)
            t0 = time.perf_counter()
            sampler.update_weights(jax.block_until_ready(lora.merge(graphdef, adapters, rest)))
            merge_update_s.append(time.perf_counter() - t0)
            tm = {}
            jax.block_until_ready(sampler.generate_tokens(prompts, mask, params, keys, tm))
            decode_s.append(tm["decode_s"])
        after = (sampler_mod._prefill._cache_size(), sampler_mod._decode._cache_size(), lora.fold._cache_size())
        res["batches"].append({
            "batch": b, "kernels": sampler.kernels.resolve(b).path, "fell_back": sampler.kernels != kernels,
            "recompiled": after != compiled, "programs": list(after),
            "merge_and_update_ms": 1e3 * statistics.median(merge_update_s),
            "decode_tok_s": b * (args.new_tokens - 1) / statistics.median(decode_s)})
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="qwen2.5-1.5b-random", choices=sorted(MODEL_SPECS))
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--targets", default="q,k,v,o;q,k,v,o,gate,up,down", help="target sets, ';'-separated")
    ap.add_argument("--batches", default="1,8", type=lambda s: [int(x) for x in s.split(",")])
    ap.add_argument("--prompt_len", type=int, default=64)
    ap.add_argument("--new_tokens", type=int, default=64)
    ap.add_argument("--updates", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    out = Path(os.environ.get("OUT", "out"))
    out.mkdir(parents=True, exist_ok=True)
    log(f"device {jax.devices()[0].device_kind}, model {args.model}, rank {args.rank}")
    results = []
    for targets in args.targets.split(";"):
        log(f"targets {targets}")
        results.append(run_targets(args, targets))
    (out / "lora_merge.json").write_text(json.dumps({"device": jax.devices()[0].device_kind, "model": args.model,
                                                     "results": results}, indent=2))
    print(f"\n{'targets':<22}{'params':>11}{'MB f32':>8}{'+Adam MB':>9}{'merge ms':>9}{'|logit|':>8}{'m-u':>9}"
          f"{'u-f32':>9}{'m-f32':>9}  batch: kernels tok/s merge+update ms recompiled")
    for r in results:
        runs = "  ".join(f"{b['batch']}: {b['kernels']}{' (FELL BACK)' if b['fell_back'] else ''} "
                         f"{b['decode_tok_s']:.0f} {b['merge_and_update_ms']:.1f} {b['recompiled']}"
                         for b in r["batches"])
        print(f"{r['targets']:<22}{r['adapter_params']:>11,}{r['adapter_mb_f32']:>8.1f}{r['adapter_adam_mb_f32']:>9.1f}"
              f"{r['merge_ms']:>9.2f}{r['logits_max_abs']:>8.2f}{r['merged_vs_unmerged']:>9.1e}"
              f"{r['unmerged_vs_f32']:>9.1e}{r['merged_vs_f32']:>9.1e}  {runs}")
    print(f"wrote {out / 'lora_merge.json'}")
    if any(b["recompiled"] or b["fell_back"] for r in results for b in r["batches"]):
        sys.exit("a sampler program was recompiled after a weight update, or the decode kernels fell back to XLA")


if __name__ == "__main__":
    main()
