"""Top-k over a vocabulary row on the GPU: lax.top_k against the screened versions in
cudaperf_jax.generation.sampling.top_k ("chunks", "maxes", and "cuda" - the CUDA chunk-maxima radix selection of
cudaperf_jax/models/cuda/topk_kernel.cuh - where the CUDA kernels build), for the sampler's top-k 50 over Qwen2.5's
151,936 entries at batch 1 (and 32). Prints a table and writes $OUT/topk.json.

Two timings per method: `us` - one jitted call after another (host dispatch included: on the H200 it dominated, e.g.
2026-12-03 the CUDA top-k read 57.9 us a call while it took 13 us a step inside the decode loop), and `in_graph_us` -
the difference between one program of CHAIN dependent top-k calls and one program of a single call, per call (the
kernels and the launch gaps inside one program, as in the sampler's decode loop).

    OUT=out python benchmarks/topk.py
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.decode_gemv import timed
from cudaperf_jax.generation.sampling import top_k

CHAIN = 17


def chained(fn, n: int):
    """A jitted function applying fn n times, each call's input depending on the previous call's output (no CSE)."""
    def run(x):
        acc = jnp.zeros((), x.dtype)
        for _ in range(n):
            vals = fn(x + acc)[0]
            acc = acc + 0.0 * vals[0, 0]
        return acc
    return jax.jit(run)


def main():
    out = Path(os.environ.get("OUT", "out"))
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    from cudaperf_jax.models import cuda_matvec
    methods = ("lax", "chunks", "maxes") + (("cuda",) if cuda_matvec.enabled() else ())
    for b in (1, 32):
        x = jax.random.normal(jax.random.key(b), (b, 151936), jnp.float32)
        want = np.asarray(jax.lax.top_k(x, 50)[0])
        for method in methods:
            def one(x, m=method):
                return jax.lax.top_k(x, 50) if m == "lax" else top_k(x, 50, m)
            f = jax.jit(one)
            same = bool(np.array_equal(np.asarray(f(x)[0]), want))
            us = timed(f, x, reps=50, rounds=5) * 1e6
            t_chain = timed(chained(one, CHAIN), x, reps=5, rounds=5)
            t_one = timed(chained(one, 1), x, reps=5, rounds=5)
            in_graph = (t_chain - t_one) / (CHAIN - 1) * 1e6
            rows.append({"batch": b, "method": method, "us": us, "in_graph_us": in_graph, "same_values": same})
            print(f"batch {b:3d} {method:7s} {us:8.1f} us a call, {in_graph:8.1f} us in a program  same values: {same}",
                  flush=True)
    (out / "topk.json").write_text(json.dumps({"device": str(jax.devices()[0]), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
