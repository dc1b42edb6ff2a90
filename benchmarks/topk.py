"""Top-k over a vocabulary row on the GPU: lax.top_k against the screened versions in
cudaperf_jax.generation.sampling.top_k ("chunks", "maxes", and "cuda" - the CUDA chunk-maxima radix selection of
cudaperf_jax/models/cuda/topk_kernel.cuh - where the CUDA kernels build), for the sampler's top-k 50 over Qwen2.5's
151,936 entries at batch 1 (and 32). Prints a table and writes $OUT/topk.json.

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
            f = jax.jit(lambda x, m=method: jax.lax.top_k(x, 50) if m == "lax" else top_k(x, 50, m))
            same = bool(np.array_equal(np.asarray(f(x)[0]), want))
            us = timed(f, x, reps=50, rounds=5) * 1e6
            rows.append({"batch": b, "method": method, "us": us, "same_values": same})
            print(f"batch {b:3d} {method:7s} {us:8.1f} us  same values: {same}", flush=True)
    (out / "topk.json").write_text(json.dumps({"device": str(jax.devices()[0]), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
