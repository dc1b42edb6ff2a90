"""Tilings of the fused decode kernels chosen in place: the real sampler's batch-1 step time per candidate.

    OUT=out python benchmarks/decode_tune.py [--model=qwen2.5-1.5b-random] [--table_out=PATH]

Timing kernels alone (benchmarks/decode_fused.py) misses how they interact in a step (a producer's split
sets its consumer's prologue work, L2 contents carry over), so this script searches coordinate by
coordinate: for each table key in CANDIDATES order it compiles the sampler with the best table so far plus
one candidate tiling for that key, times --new_tokens decode steps (best of --repeats), and keeps the
candidate when it beats the best step by more than --min_gain. A key the current table does not use is
skipped (down is looked up as "plain" when gate_up's tiling has no split-K and applies SwiGLU itself, else
as "swiglu"). After every improvement the best table so far (CUDAPERF_FUSED_TABLE format) goes to
--table_out, so a run cut short still leaves its result. Prints a table and writes $OUT/decode_tune.json.
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


def _c(bn, split, bk, stages=4, warps=4):
    return {"block_n": bn, "split_k": split, "block_k": bk, "num_warps": warps, "num_stages": stages}


# (kind, K, N) -> tilings to try for the Qwen2.5-1.5B shapes, in search order; attention records are
# ("attend", Dh, group). Measured on the H200 on 2026-12-02 (benchmarks/results/decode_tune_h200_1p5b*.json):
# the first set, single split-K changes, never beat the defaults; of the epilogue tilings (no split-K) gate_up
# applying SwiGLU itself made the step 2.38-2.56 ms against 1.644, o adding the residual 1.91-2.00, down
# 3.64; o at 64 x 6 x 128 (1.644 -> 1.621 ms) and gate_up at 256 x 8 x 32 (paired 1.541 -> 1.528 ms) won and
# ship in decode_fused_tuned.json. The epilogue tilings stay here for other shapes and GPUs.
CANDIDATES = {
    ("norm", 1536, 17920): [_c(64, 4, 64, 4), _c(256, 8, 32, 3), _c(128, 4, 64, 3), _c(16, 1, 128)],
    ("plain", 8960, 1536): [_c(64, 28, 64, 3), _c(32, 20, 64), _c(128, 28, 64, 3, 8)],
    ("swiglu", 8960, 1536): [_c(64, 28, 64, 3), _c(128, 28, 64, 3, 8), _c(32, 20, 64)],
    ("attn", 1536, 1536): [_c(32, 6, 128, 4), _c(128, 12, 64, 3)],
    ("norm", 1536, 2048): [_c(128, 12, 64, 3), _c(64, 6, 128, 3), _c(256, 24, 32, 3)],
    ("attend", 128, 6): [{"block_s": 64, "splits": 8, "num_warps": 4, "num_stages": 2},
                         {"block_s": 32, "splits": 8, "num_warps": 4, "num_stages": 2}],
}


def _write(records) -> str:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(records, f)
    return f.name


def _stamp(records):
    stamp = f"{jax.devices()[0].device_kind} {time.strftime('%Y-%m-%d')}, benchmarks/decode_tune.py (in-step)"
    return [{**r, "measured": stamp} for r in records]


def step_ms(model, records, args) -> float:
    """Best-of-repeats decode step (ms) of the sampler with the fused path on and `records` as its table."""
    from cudaperf_jax.generation.sampler import Sampler, SamplingParams
    from cudaperf_jax.models import decode_fused as df
    os.environ["CUDAPERF_FUSED_TABLE"] = _write(records)
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

    from cudaperf_jax.models import decode_fused as df

    def keys_used(records):
        os.environ["CUDAPERF_FUSED_TABLE"] = _write(records)
        df._tuned.cache_clear()
        return set(df.layer_keys(model.cfg))

    base = best_ms = run("baseline (defaults)", [])
    best = {}   # key -> record
    for key, configs in cands.items():
        for c in configs:
            if key not in keys_used(list(best.values())):
                print(f"{' '.join(map(str, key))}: not used by the current table; skipped", flush=True)
                break
            rec = {"kind": key[0], "K": key[1], "N": key[2], "config": c}
            trial = {**best, key: rec}
            ms = run(f"{' '.join(map(str, key))} {sorted(c.items())}", list(trial.values()))
            if ms < best_ms * (1 - args.min_gain):
                best_ms, best = ms, trial
                if args.table_out:
                    Path(args.table_out).write_text(json.dumps(_stamp(list(best.values())), indent=1))
    res["baseline_ms"], res["best_ms"], res["table"] = base, best_ms, _stamp(list(best.values()))
    (out / "decode_tune.json").write_text(json.dumps(res, indent=1))
    if args.table_out:
        Path(args.table_out).write_text(json.dumps(res["table"], indent=1))
    print(f"baseline {base:.3f} ms, chosen {best_ms:.3f} ms with {len(res['table'])} tuned tilings")
    return res


if __name__ == "__main__":
    main()
