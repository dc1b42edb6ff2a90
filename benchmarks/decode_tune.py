"""Tilings of the fused decode kernels chosen in place: the real sampler's batch-1 step time per candidate.

    OUT=out python benchmarks/decode_tune.py [--model=qwen2.5-1.5b-random] [--table_out=PATH]

Timing kernels alone (benchmarks/decode_fused.py) misses how they interact in a step (a producer's split
sets its consumer's prologue work, L2 contents carry over), so this script changes one kernel's tiling at a
time (CANDIDATES), compiles the sampler with it, times --new_tokens decode steps (best of --repeats), keeps
every change that beat the baseline by more than --min_gain, times the combination, and writes the winning
records (CUDAPERF_FUSED_TABLE format) to --table_out when the combination is the fastest. Prints a table
and writes $OUT/decode_tune.json.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jax
import numpy as np

from benchmarks.generation import param_bytes, random_model

# (kind, K, N) -> tilings to try for the Qwen2.5-1.5B shapes; attention records are ("attend", Dh, group).
# The set measured on 2026-12-02 (none beat the defaults; benchmarks/results/decode_tune_h200_1p5b.json) is
# replaced by one aimed at wave quantisation: the default gate_up tiling makes 1,120 programs for ~924
# resident slots (a second, short wave) and down's 336 programs leave SMs unevenly loaded.
CANDIDATES = {
    ("norm", 1536, 17920): [{"block_n": 128, "split_k": 6, "block_k": 32, "num_warps": 4, "num_stages": 4},
                            {"block_n": 256, "split_k": 12, "block_k": 32, "num_warps": 4, "num_stages": 3},
                            {"block_n": 64, "split_k": 3, "block_k": 64, "num_warps": 4, "num_stages": 4}],
    ("swiglu", 8960, 1536): [{"block_n": 64, "split_k": 28, "block_k": 64, "num_warps": 4, "num_stages": 3},
                             {"block_n": 32, "split_k": 40, "block_k": 32, "num_warps": 4, "num_stages": 4},
                             {"block_n": 64, "split_k": 20, "block_k": 64, "num_warps": 4, "num_stages": 3},
                             {"block_n": 16, "split_k": 1, "block_k": 128, "num_warps": 4, "num_stages": 4}],
    ("attn", 1536, 1536): [{"block_n": 64, "split_k": 6, "block_k": 128, "num_warps": 4, "num_stages": 3},
                           {"block_n": 32, "split_k": 12, "block_k": 128, "num_warps": 4, "num_stages": 3},
                           # no split-K: the residual add moves into the epilogue and a finish kernel goes
                           {"block_n": 16, "split_k": 1, "block_k": 128, "num_warps": 4, "num_stages": 4},
                           {"block_n": 32, "split_k": 1, "block_k": 128, "num_warps": 4, "num_stages": 4}],
    ("norm", 1536, 2048): [{"block_n": 64, "split_k": 6, "block_k": 128, "num_warps": 4, "num_stages": 3},
                           {"block_n": 32, "split_k": 12, "block_k": 64, "num_warps": 4, "num_stages": 3}],
    ("attend", 128, 6): [{"block_s": 128, "splits": 4, "num_warps": 8, "num_stages": 2},
                         {"block_s": 64, "splits": 8, "num_warps": 4, "num_stages": 2}],
}


def step_ms(model, records, args) -> float:
    """Best-of-repeats decode step (ms) of the sampler with the fused path on and `records` as its table."""
    from cudaperf_jax.generation.sampler import Sampler, SamplingParams
    from cudaperf_jax.models import decode_fused as df
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(records, f)
    os.environ["CUDAPERF_FUSED_TABLE"] = f.name
    df._tuned.cache_clear()
    jax.clear_caches()
    sampler = Sampler(model, prompt_bucket=args.prompt_len, pad_id=0)
    toks = np.random.RandomState(1).randint(3, model.cfg.vocab_size, (1, args.prompt_len)).astype(np.int32)
    mask = np.ones_like(toks, bool)
    params = SamplingParams(max_new_tokens=args.new_tokens, temperature=1.0, top_p=0.9, top_k=50, stop_token_ids=())
    keys = jax.random.split(jax.random.PRNGKey(0), 1)
    jax.block_until_ready(sampler.generate_tokens(toks, mask, params, keys))
    best = float("inf")
    for _ in range(args.repeats):
        tm = {}
        jax.block_until_ready(sampler.generate_tokens(toks, mask, params, keys, tm))
        best = min(best, tm["decode_s"])
    return 1e3 * best / (args.new_tokens - 1)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="qwen2.5-1.5b-random", choices=("qwen2.5-1.5b-random", "smollm2-135m", "tiny"))
    ap.add_argument("--prompt_len", type=int, default=128)
    ap.add_argument("--new_tokens", type=int, default=96)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--min_gain", type=float, default=0.005, help="fraction of the baseline step a change must save")
    ap.add_argument("--table_out", default="")
    ap.add_argument("--candidates", default="", help="JSON file {\"kind K N\": [config, ...]} instead of CANDIDATES")
    args = ap.parse_args(argv)
    os.environ["CUDAPERF_DECODE_FUSED"] = "on" if jax.default_backend() == "gpu" else "interpret"
    model = random_model(args.model)
    cands = CANDIDATES
    if args.candidates:
        cands = {tuple(int(p) if p.isdigit() else p for p in k.split()): v
                 for k, v in json.loads(Path(args.candidates).read_text()).items()}
    out = Path(os.environ.get("OUT", "out"))
    out.mkdir(parents=True, exist_ok=True)
    res = {"device": str(jax.devices()[0]), "model": args.model, "args": vars(args), "rows": []}

    def run(name, records):
        t0 = time.perf_counter()
        try:
            ms = step_ms(model, records, args)
        except Exception as e:  # noqa: BLE001
            ms, err = float("nan"), f"{type(e).__name__}: {str(e)[:300]}"
        else:
            err = None
        row = {"name": name, "records": records, "step_ms": ms, "error": err}
        res["rows"].append(row)
        (out / "decode_tune.json").write_text(json.dumps(res, indent=1))
        tb = param_bytes(model) / ms / 1e9 if np.isfinite(ms) else float("nan")
        print(f"{name:40s} {ms:7.3f} ms/step ({tb:.2f} TB/s of weights) {err or ''} ({time.perf_counter() - t0:.0f} s)",
              flush=True)
        return ms

    base = run("baseline (defaults)", [])
    winners = {}
    for (kind, k, n), configs in cands.items():
        best = (base * (1 - args.min_gain), None)
        for c in configs:
            rec = {"kind": kind, "K": k, "N": n, "config": c}
            ms = run(f"{kind} {k}x{n} {sorted(c.values())}", [rec])
            if ms < best[0]:
                best = (ms, rec)
        if best[1] is not None:
            winners[(kind, k, n)] = best[1]
    final = list(winners.values())
    best_ms = base
    if len(final) > 1:
        best_ms = run("combined winners", final)
    elif final:
        best_ms = min(r["step_ms"] for r in res["rows"] if r["records"] == final)
    res["baseline_ms"], res["best_ms"], res["table"] = base, best_ms, final if best_ms < base else []
    for r in res["table"]:
        r["measured"] = f"{jax.devices()[0].device_kind} {time.strftime('%Y-%m-%d')}, benchmarks/decode_tune.py (in-step)"
    (out / "decode_tune.json").write_text(json.dumps(res, indent=1))
    if args.table_out:
        Path(args.table_out).write_text(json.dumps(res["table"], indent=1))
    print(f"baseline {base:.3f} ms, chosen {best_ms:.3f} ms with {len(res['table'])} changed tilings")
    return res


if __name__ == "__main__":
    main()
