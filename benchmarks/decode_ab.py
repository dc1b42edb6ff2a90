"""Decode kernel configs compared in one process: each variant's sampler programs compiled ahead of time with its
DecodeKernels (Sampler.compile_programs), then timed in interleaved rounds.

    OUT=out python benchmarks/decode_ab.py --variants "base: pallas:path=pallas tuned:tilings=/tmp/t.json" [--rounds 7]

A variant is NAME:field=value,field=value of cudaperf_jax.kernels.DecodeKernels (nothing after the colon: the
default config). On the H200 the batch-1 step
time of one process differs from another's by up to ~3% (2026-12-03: the same defaults gave 1.420-1.462 ms in five
processes), more than most single changes are worth; here every variant runs in the same process, round after round,
so they share whatever that process's placement costs. Prints the median and best step per variant and the median
per-round difference to the first variant, and writes $OUT/decode_ab.json (and decode_ab.png).
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
import numpy as np

from benchmarks.generation import kernels_from_spec, param_bytes, random_model


def parse_variants(spec: str) -> list[tuple[str, object]]:
    """[(name, DecodeKernels)] from 'name:field=v,field=v other: ...'."""
    out = []
    for item in spec.split():
        name, sep, fields = item.partition(":")
        if not sep or not name:
            raise ValueError(f"variant {item!r}: write NAME:field=value,field=value (or NAME: for the default config)")
        out.append((name, kernels_from_spec(fields)))
    if len({n for n, _ in out}) != len(out):
        raise ValueError("variant names must be distinct")
    return out


def summarize(names, times):
    """Per variant: median, best, and the median over rounds of (variant - first variant), in ms per step."""
    rows = []
    for name in names:
        t = times[name]
        diffs = [a - b for a, b in zip(t, times[names[0]])]
        rows.append({"name": name, "median_ms": statistics.median(t), "best_ms": min(t),
                     "median_diff_ms": statistics.median(diffs), "rounds_ms": t})
    return rows


def plot(rows, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(max(4, 1.2 * len(rows)), 3.5))
    for i, r in enumerate(rows):
        ax.scatter([i] * len(r["rounds_ms"]), r["rounds_ms"], s=12, alpha=0.6)
        ax.hlines(r["median_ms"], i - 0.3, i + 0.3, color="k")
    ax.set_xticks(range(len(rows)), [r["name"] for r in rows], rotation=30, ha="right")
    ax.set_ylabel("decode step (ms)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return str(path)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", required=True, help="NAME:field=v,field=v ... (whitespace-separated)")
    ap.add_argument("--model", default="qwen2.5-1.5b-random", choices=("qwen2.5-1.5b-random", "smollm2-135m", "tiny"))
    ap.add_argument("--prompt_len", type=int, default=128)
    ap.add_argument("--new_tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--greedy", action="store_true", help="temperature 0 (default: top-k 50, top-p 0.9)")
    args = ap.parse_args(argv)
    variants = parse_variants(args.variants)
    if args.rounds < 1 or args.new_tokens < 2:
        ap.error("--rounds must be >= 1 and --new_tokens >= 2")
    from cudaperf_jax.generation.sampler import Sampler, SamplingParams
    model = random_model(args.model)
    sampler = Sampler(model, prompt_bucket=args.prompt_len, pad_id=0)
    toks = np.random.RandomState(1).randint(3, model.cfg.vocab_size, (1, args.prompt_len)).astype(np.int32)
    mask = np.ones_like(toks, bool)
    params = (SamplingParams(max_new_tokens=args.new_tokens, temperature=0.0, stop_token_ids=()) if args.greedy else
              SamplingParams(max_new_tokens=args.new_tokens, temperature=1.0, top_p=0.9, top_k=50, stop_token_ids=()))
    keys = jax.random.split(jax.random.PRNGKey(0), 1)
    out = Path(os.environ.get("OUT", "out"))
    out.mkdir(parents=True, exist_ok=True)

    runs, errors = {}, {}
    for name, kc in variants:
        t0 = time.perf_counter()
        try:
            runs[name] = sampler.compile_programs(toks, mask, params, keys, kernels=kc)
            jax.block_until_ready(runs[name]())   # warm-up
        except Exception as e:  # noqa: BLE001 - a variant that does not build is reported, the others still run
            errors[name] = f"{type(e).__name__}: {str(e)[:300]}"
            runs.pop(name, None)
        print(f"compiled {name:24s} {time.perf_counter() - t0:5.1f} s {errors.get(name, '')}", flush=True)
    names = [n for n, _ in variants if n in runs]
    if not names:
        raise SystemExit("decode_ab: no variant compiled: " + "; ".join(f"{k}: {v}" for k, v in errors.items()))
    times = {n: [] for n in names}
    for r in range(args.rounds):
        order = names if r % 2 == 0 else names[::-1]   # alternate the order: no variant always runs first
        for n in order:
            tm = {}
            runs[n](tm)
            times[n].append(1e3 * tm["decode_s"] / (args.new_tokens - 1))
    rows = summarize(names, times)
    gb = param_bytes(model) / 1e9
    print(f"{'variant':24s} {'median ms':>9s} {'best ms':>8s} {'vs ' + names[0]:>14s} {'TB/s':>6s}")
    for row in rows:
        print(f"{row['name']:24s} {row['median_ms']:9.3f} {row['best_ms']:8.3f} {row['median_diff_ms'] * 1e3:+11.1f} us "
              f"{gb / row['median_ms']:6.2f}")
    res = {"device": str(jax.devices()[0]), "model": args.model, "args": vars(args),
           "variants": {n: runs[n].kernels.to_dict() if n in runs else kc.to_dict() for n, kc in variants},
           "errors": errors, "rows": rows,
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    res["plot"] = plot(rows, out / "decode_ab.png")
    (out / "decode_ab.json").write_text(json.dumps(res, indent=1))
    return res


if __name__ == "__main__":
    main()
