"""Where a batch-1 decode step spends its time: the real sampler, with parts of the layer left out.

    OUT=out python benchmarks/decode_ablation.py [--model=qwen2.5-1.5b-random] [--new_tokens=256]
    python benchmarks/decode_ablation.py --model=tiny --new_tokens=8 --prompt_len=8      # CPU smoke

Variants (each compiled afresh; the step time is the sampler's decode phase over --new_tokens steps):
  full           the decoder and sampler as shipped (top-k 50, top-p 0.9)
  greedy         argmax instead of top-k/top-p sampling          -> cost of the sampling filters
  no_attn_core   q/k/v and o projections kept, RoPE, cache write and attention left out
  no_norms       RMSNorm replaced by the identity
  matvecs_only   greedy + no_attn_core + no_norms: projections, MLP, residuals and the LM head
  fused          the fused decode layers (cudaperf_jax/models/decode_fused.py, CUDAPERF_DECODE_FUSED=on; on
                 the CPU their interpreter); every other variant runs with them off, since the ablations
                 patch the XLA path's modules
Differences between rows bound the cost of the removed parts (H200.md: "time variants that leave one
stage out"). The ablations change the model's numbers, not its data movement in the projections; they
exist only in this benchmark. Prints a table and writes $OUT/decode_ablation.json.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jax

from benchmarks.generation import (  # noqa: F401 (TINY: tests)
    hbm_datasheet,
    TINY,
    bench_jax,
    environment,
    param_bytes,
    random_model,
)

VARIANTS = ("full", "greedy", "no_attn_core", "no_norms", "matvecs_only", "fused")


@contextlib.contextmanager
def ablated(no_attn_core: bool, no_norms: bool):
    """Temporarily replaces Attention.__call__ / RMSNorm.__call__ (restored on exit)."""
    from cudaperf_jax.models import decoder as dec
    from cudaperf_jax.models import gemv
    saved = (dec.Attention.__call__, dec.RMSNorm.__call__)

    def attn_projections_only(self, x, cos, sin, mask, cache_kv, cache_index, norm=None):
        y = gemv.matmul(x, self.qkv[...].astype(self.dtype), norm=norm)
        out = gemv.matmul(y[..., : self.h * self.hd], self.o[...].astype(self.dtype))
        return out, (cache_kv if cache_kv is not None else (None, None))

    try:
        if no_attn_core:
            dec.Attention.__call__ = attn_projections_only
        if no_norms:
            dec.RMSNorm.__call__ = lambda self, x: x
        yield
    finally:
        dec.Attention.__call__, dec.RMSNorm.__call__ = saved


def run_variant(model, name: str, args) -> dict:
    """generation.bench_jax at batch 1 (the same prompts, sampling and timing) under the variant's changes."""
    greedy = name in ("greedy", "matvecs_only")
    jax.clear_caches()  # the ablations change traced code that the jit caches would otherwise reuse
    on = "on" if jax.default_backend() == "gpu" else "interpret"
    env = {"CUDAPERF_DECODE_FUSED": on if name == "fused" else "off"}
    with ablated(name in ("no_attn_core", "matvecs_only"), name in ("no_norms", "matvecs_only")), environment(env):
        r = bench_jax(model, 1, SimpleNamespace(**vars(args), greedy=greedy))
    return {"variant": name, "step_ms": r["decode_step_ms"], "compile_s": r["compile_s"], "hbm_tb_s": r["hbm_tb_s"]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="qwen2.5-1.5b-random", choices=("qwen2.5-1.5b-random", "smollm2-135m", "tiny"))
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--prompt_len", type=int, default=128)
    ap.add_argument("--new_tokens", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args(argv)
    model = random_model(args.model)
    out = Path(os.environ.get("OUT", "out"))
    out.mkdir(parents=True, exist_ok=True)
    res = {"device": str(jax.devices()[0]), "model": args.model, "decode_gemv": os.environ.get("CUDAPERF_DECODE_GEMV", "auto"),
           "weight_bytes": param_bytes(model), "args": vars(args), "rows": []}
    for name in args.variants.split(","):
        if name not in VARIANTS:
            raise SystemExit(f"unknown variant {name!r}; choose from {', '.join(VARIANTS)}")
        try:
            row = run_variant(model, name, args)
        except Exception as e:  # noqa: BLE001
            row = {"variant": name, "error": f"{type(e).__name__}: {str(e)[:300]}"}
        res["rows"].append(row)
        (out / "decode_ablation.json").write_text(json.dumps(res, indent=1))
        print(f"{name:14s} " + (f"{row['step_ms']:8.3f} ms/step  weights+cache {row['hbm_tb_s']:.2f} TB/s "
                                f"({row['hbm_tb_s'] * 1e12 / hbm_datasheet():.2f} of datasheet)  compile {row['compile_s']:.1f} s"
                                if "step_ms" in row else row["error"]), flush=True)
    return res


if __name__ == "__main__":
    main()
