"""What the decode progress bar costs: the sampler's decode with progress off and on, in turns, same process.

    OUT=out python3 benchmarks/progress_cost.py                        # GPU: Qwen2.5-0.5B- and 1.5B-shaped, bf16
    .venv/bin/python benchmarks/progress_cost.py --models=smol --batch=4 --new_tokens=64 --repeats=3   # CPU

Random weights of the named shapes (nothing downloaded), random prompts of --prompt_len tokens, --new_tokens sampled
tokens with no stop token (every step runs), temperature 1. Each repeat times a call without progress and one with
(`progress=` a label: a jax.debug.callback every `--every` steps drives a tqdm bar); the best of --repeats per mode
(after one warm-up call each, which compiles) gives ms per decode step. Also checks that the tokens are the same.
Prints a table and writes $OUT/progress_cost.json (default benchmarks/results/).
"""
from __future__ import annotations

import argparse
import io
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jax
import numpy as np
from flax import nnx

from cudaperf_jax.generation import progress as progress_lib
from cudaperf_jax.generation.sampler import Sampler, SamplingParams
from cudaperf_jax.models.config import ModelConfig
from cudaperf_jax.models.decoder import Decoder

QWEN = {"model_type": "qwen2", "vocab_size": 151936, "num_key_value_heads": 2, "max_position_embeddings": 32768,
        "rope_theta": 1000000.0, "rms_norm_eps": 1e-6, "tie_word_embeddings": True, "bos_token_id": 151643,
        "eos_token_id": 151645, "pad_token_id": 151643, "use_sliding_window": False}
SHAPES = {
    "qwen05": {**QWEN, "hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24,
               "num_attention_heads": 14, "head_dim": 64},
    "qwen15": {**QWEN, "hidden_size": 1536, "intermediate_size": 8960, "num_hidden_layers": 28,
               "num_attention_heads": 12, "head_dim": 128},
    "smol": {"model_type": "llama", "vocab_size": 49152, "hidden_size": 576, "intermediate_size": 1536,
             "num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3, "head_dim": 64,
             "max_position_embeddings": 8192, "rope_theta": 100000.0, "rms_norm_eps": 1e-5, "tie_word_embeddings": True,
             "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 2},
}


def measure(name: str, args) -> dict:
    dtype = jax.numpy.bfloat16 if args.dtype == "bfloat16" else jax.numpy.float32
    cfg = ModelConfig.from_hf(SHAPES[name])
    model = Decoder(cfg, rngs=nnx.Rngs(0), dtype=dtype, param_dtype=dtype)
    sampler = Sampler(model, progress_every=args.every)
    rng = np.random.default_rng(0)
    toks = rng.integers(3, cfg.vocab_size - 1, (args.batch, args.prompt_len)).astype(np.int32)
    mask = np.ones_like(toks, bool)
    keys = jax.random.split(jax.random.PRNGKey(0), args.batch)
    params = SamplingParams(max_new_tokens=args.new_tokens, temperature=1.0, stop_token_ids=())
    sink = io.StringIO()   # the bar's text goes here, not to the terminal: its drawing is part of the cost
    real_init = progress_lib.DecodeProgress.__init__

    def quiet_init(self, label, max_steps, batch, *, file=None, leave=False):
        real_init(self, label, max_steps, batch, file=sink, leave=leave)
    progress_lib.DecodeProgress.__init__ = quiet_init

    def run(progress):
        t0 = time.perf_counter()
        out = sampler.generate_tokens(toks, mask, params, keys, progress=progress)
        out = jax.device_get(out)
        return time.perf_counter() - t0, out

    times = {"off": [], "on": []}
    outs = {}
    for mode in ("off", "on"):   # warm-up: compiles
        outs[mode] = run(None if mode == "off" else "bench")[1]
    for _ in range(args.repeats):
        for mode in ("off", "on"):
            times[mode].append(run(None if mode == "off" else "bench")[0])
    progress_lib.DecodeProgress.__init__ = real_init
    same = all(np.array_equal(a, b) for a, b in zip(outs["off"], outs["on"]))
    off, on = min(times["off"]), min(times["on"])
    return {"model": name, "batch": args.batch, "new_tokens": args.new_tokens, "every": args.every,
            "ms_per_step_off": 1e3 * off / args.new_tokens, "ms_per_step_on": 1e3 * on / args.new_tokens,
            "overhead_pct": 100.0 * (on - off) / off, "same_tokens": bool(same), "times_s": times,
            "device": jax.devices()[0].device_kind}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="qwen05,qwen15")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--prompt_len", type=int, default=256)
    ap.add_argument("--new_tokens", type=int, default=512)
    ap.add_argument("--every", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--dtype", default="bfloat16" if jax.default_backend() == "gpu" else "float32")
    ap.add_argument("--out", default=os.environ.get("OUT", "benchmarks/results"))
    args = ap.parse_args()
    rows = [measure(m, args) for m in args.models.split(",") if m]
    print(f"\n{'model':<8} {'batch':>5} {'steps':>6} {'every':>5} {'ms/step off':>11} {'ms/step on':>10} "
          f"{'overhead':>8} {'same tokens':>11}  device")
    for r in rows:
        print(f"{r['model']:<8} {r['batch']:>5} {r['new_tokens']:>6} {r['every']:>5} {r['ms_per_step_off']:>11.3f} "
              f"{r['ms_per_step_on']:>10.3f} {r['overhead_pct']:>7.1f}% {r['same_tokens']!s:>11}  {r['device']}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "progress_cost.json").write_text(json.dumps(rows, indent=1))
    print(f"wrote {out / 'progress_cost.json'}")


if __name__ == "__main__":
    main()
