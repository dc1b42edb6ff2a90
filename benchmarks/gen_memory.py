"""Peak JAX memory of one sampler call of a randomly initialised Qwen2.5-1.5B (bf16) at long prompts, per batch size:
what sizes benchmarks/zero_shot.py's --gen_batch and --memory_fraction (the GPU is shared with the harness).

    python3 benchmarks/gen_memory.py --batches 16,32,48 --prompt 4096 --new 1024 --memory_fraction 0.5 --out $OUT

For each batch size (ascending; the peak only grows), a prefill of `--prompt` tokens and `--new` decoded tokens (a
random model never stops early: the longest decode) are run twice (compile, then timed); the device's peak bytes in
use after each size, the seconds, and out-of-memory failures go to gen_memory.json.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="qwen2.5-1.5b-random", help="a shape of benchmarks/generation.py")
    ap.add_argument("--batches", default="16,32,48")
    ap.add_argument("--prompt", type=int, default=4096)
    ap.add_argument("--new", type=int, default=1024)
    ap.add_argument("--memory_fraction", type=float, default=0.5)
    ap.add_argument("--out", default=os.environ.get("OUT") or "/tmp/gen_memory")
    a = ap.parse_args(argv)
    os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] = str(a.memory_fraction)
    import jax
    import jax.numpy as jnp
    import numpy as np
    from generation import random_model

    from cudaperf_jax.generation.sampler import Sampler, SamplingParams
    dev = jax.devices()[0]
    model = random_model(a.model, jnp.bfloat16)
    sampler = Sampler(model, None, pad_id=0)
    params = SamplingParams(max_new_tokens=a.new, temperature=0.2, top_p=0.95)
    rows = []
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    for b in [int(x) for x in a.batches.split(",")]:
        toks = np.random.default_rng(0).integers(3, min(150000, model.cfg.vocab_size), size=(b, a.prompt)).astype(np.int32)
        mask = np.ones_like(toks, bool)
        keys = jax.random.split(jax.random.PRNGKey(0), b)
        row = {"model": a.model, "batch": b, "prompt": a.prompt, "new": a.new}
        try:
            t0 = time.perf_counter()
            jax.block_until_ready(sampler.generate_tokens(toks, mask, params, keys))
            row["first_s"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            timings = {}
            jax.block_until_ready(sampler.generate_tokens(toks, mask, params, keys, timings=timings))
            row.update(seconds=time.perf_counter() - t0, **timings)
            row["ok"] = True
        except Exception as e:  # noqa: BLE001 - a failing row (out of memory) is recorded, the next runs
            row.update(ok=False, error=f"{type(e).__name__}: {str(e)[:300]}")
        stats = dev.memory_stats() or {}
        row.update(peak_gb=stats.get("peak_bytes_in_use", 0) / 1e9, limit_gb=stats.get("bytes_limit", 0) / 1e9)
        rows.append(row)
        print(json.dumps(row), flush=True)
        (out / "gen_memory.json").write_text(json.dumps({"device": str(dev), "memory_fraction": a.memory_fraction,
                                                         "rows": rows}, indent=1))
        if not row["ok"]:
            break
    return 0


if __name__ == "__main__":
    sys.exit(main())
