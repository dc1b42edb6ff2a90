"""Kernel-level profile of the sampler's decode loop: which kernels run per step, how long, and the gaps.

    OUT=out python benchmarks/decode_profile.py [--model=qwen2.5-1.5b-random] [--variants=xla,default,fused]
    python benchmarks/decode_profile.py --model=tiny --new_tokens=4 --prompt_len=8    # CPU smoke

Each variant (a set of the decode switches, see VARIANT_ENV) compiles the sampler, runs it once untimed,
then once more under `jax.profiler.trace`; the trace's device events of the decode program are read back
with `jax.profiler.ProfileData`. Per decode step it reports: the step time (untraced and traced), the
number of kernels, the time the device is busy (union of kernel intervals), the idle gaps between
kernels, and the kernels grouped by name (count and time per step). A step far above its busy time is
bound by launches; busy time far above bytes / bandwidth is bound by the kernels themselves.
Prints a table and writes $OUT/decode_profile.json.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import re
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jax
import numpy as np

from benchmarks.generation import environment, hbm_datasheet, param_bytes, random_model

# The decode switches per variant (cudaperf_jax/models/gemv.py, decode_fused.py); on a CPU the Pallas
# kernels run in their interpreter.
VARIANT_ENV = {
    "xla": {"CUDAPERF_DECODE_GEMV": "off", "CUDAPERF_DECODE_FUSED": "off"},
    "gemv": {"CUDAPERF_DECODE_FUSED": "off"},
    "default": {},
    "fused": {"CUDAPERF_DECODE_FUSED": "on"},
    "layer": {"CUDAPERF_CUDA_LAYER": "on"},       # each layer one persistent CUDA kernel (cuda_matvec.layer)
    "phases": {"CUDAPERF_CUDA_LAYER": "phases"},  # the same, one kernel per phase (a name per phase in the table)
    "kernels": {"CUDAPERF_CUDA_LAYER": "kernels"},  # seven standalone CUDA kernels per layer from one FFI call (PDL)
    "step": {"CUDAPERF_CUDA_LAYER": "step"},        # the same for every layer from one FFI call (auto's choice)
    "separate": {"CUDAPERF_CUDA_LAYER": "off"},     # the fused step's separate FFI and Pallas calls (the old default)
}
_LINES_SKIPPED = ("XLA Modules", "XLA Ops", "Steps", "Framework", "Source", "XLA TraceMe", "TensorFlow")


def variant_env(name: str) -> dict:
    env = dict(VARIANT_ENV[name])
    if jax.default_backend() != "gpu":
        env = {k: ("interpret" if v == "on" and k.startswith("CUDAPERF_DECODE") else v) for k, v in env.items()}
        if name != "xla":
            env["CUDAPERF_DECODE_GEMV"] = "interpret"
    return env


def device_events(xplane: str, module: str = "decode") -> tuple[list[tuple[str, str, float, float]], list[str]]:
    """[(kernel name, hlo op, start_ns, duration_ns)] of the device events whose HLO module name contains
    `module` (all device events when none carries a module), and the module names seen."""
    data = jax.profiler.ProfileData.from_file(xplane)
    gpu = [p for p in data.planes if p.name.startswith("/device:GPU")]
    planes = gpu or [p for p in data.planes if p.name == "/host:CPU"]
    events, modules = [], set()
    for plane in planes:
        for line in plane.lines:
            if any(line.name.startswith(s) for s in _LINES_SKIPPED):
                continue
            for e in line.events:
                stats = dict(e.stats)
                mod = str(stats.get("hlo_module", ""))
                if not gpu and not mod:
                    continue  # host threads: only XLA's own op events
                if mod:
                    modules.add(mod)
                events.append((e.name, str(stats.get("hlo_op", "")), mod, float(e.start_ns), float(e.duration_ns)))
    picked = [e for e in events if module in e[2]]
    return [(n, op, s, d) for n, op, _, s, d in (picked or events)], sorted(modules)


def _kernel_group(name: str) -> str:
    """A kernel's name without XLA's numeric suffixes (loop_add_fusion_12 -> loop_add_fusion)."""
    return re.sub(r"(_\d+)+$", "", re.sub(r"\.\d+", "", name))[:80]


def summarize(events, steps: int) -> dict:
    """Per-step kernel count, busy time, gaps and the kernels grouped by name, from device events."""
    if not events:
        return {"kernels": 0}
    ev = sorted(events, key=lambda e: e[2])
    busy, gaps, end = 0.0, [], ev[0][2]
    for _, _, s, d in ev:
        if s > end:
            gaps.append(s - end)
            busy += d
        else:
            busy += max(0.0, s + d - end)
        end = max(end, s + d)
    window = end - ev[0][2]
    groups = defaultdict(lambda: [0, 0.0])
    for n, _, _, d in ev:
        g = groups[_kernel_group(n)]
        g[0] += 1
        g[1] += d
    rows = sorted(({"kernel": k, "per_step": c / steps, "us_per_step": t / steps / 1e3, "mean_us": t / c / 1e3}
                   for k, (c, t) in groups.items()), key=lambda r: -r["us_per_step"])
    gaps_a = np.asarray(gaps or [0.0])
    return {"kernels": len(ev), "kernels_per_step": len(ev) / steps, "window_ms_per_step": window / steps / 1e6,
            "busy_ms_per_step": busy / steps / 1e6, "gap_ms_per_step": float(gaps_a.sum()) / steps / 1e6,
            "median_gap_us": float(np.median(gaps_a)) / 1e3, "p90_gap_us": float(np.percentile(gaps_a, 90)) / 1e3,
            "groups": rows}


def profile_variant(model, name: str, args, trace_root: str) -> dict:
    from cudaperf_jax.generation.sampler import Sampler, SamplingParams
    jax.clear_caches()
    env = variant_env(name)
    with environment(env):
        sampler = Sampler(model, prompt_bucket=args.prompt_len, pad_id=0)
        rng = np.random.RandomState(1)
        toks = rng.randint(3, model.cfg.vocab_size, (1, args.prompt_len)).astype(np.int32)
        mask = np.ones_like(toks, bool)
        params = SamplingParams(max_new_tokens=args.new_tokens, temperature=1.0, top_p=0.9, top_k=50, stop_token_ids=())
        keys = jax.random.split(jax.random.PRNGKey(0), 1)
        t0 = time.perf_counter()
        jax.block_until_ready(sampler.generate_tokens(toks, mask, params, keys))
        compile_s = time.perf_counter() - t0
        untraced = {}
        jax.block_until_ready(sampler.generate_tokens(toks, mask, params, keys, untraced))
        trace_dir = os.path.join(trace_root, name)
        traced = {}
        with jax.profiler.trace(trace_dir):
            jax.block_until_ready(sampler.generate_tokens(toks, mask, params, keys, traced))
    files = glob.glob(os.path.join(trace_dir, "**", "*.xplane.pb"), recursive=True)
    steps = max(args.new_tokens - 1, 1)
    events, modules = device_events(files[0]) if files else ([], [])
    res = {"variant": name, "env": env, "compile_s": compile_s, "modules": modules,
           "step_ms": 1e3 * untraced["decode_s"] / steps, "traced_step_ms": 1e3 * traced["decode_s"] / steps}
    res.update(summarize(events, steps))
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="qwen2.5-1.5b-random", choices=("qwen2.5-1.5b-random", "smollm2-135m", "tiny"))
    ap.add_argument("--variants", default="xla,gemv,fused")
    ap.add_argument("--prompt_len", type=int, default=128)
    ap.add_argument("--new_tokens", type=int, default=64)
    ap.add_argument("--top", type=int, default=25, help="kernel groups printed per variant")
    args = ap.parse_args(argv)
    model = random_model(args.model)
    out = Path(os.environ.get("OUT", "out"))
    out.mkdir(parents=True, exist_ok=True)
    wbytes = param_bytes(model)
    res = {"device": str(jax.devices()[0]), "model": args.model, "weight_bytes": wbytes, "args": vars(args), "rows": []}
    with tempfile.TemporaryDirectory() as trace_root:
        for name in args.variants.split(","):
            if name not in VARIANT_ENV:
                raise SystemExit(f"unknown variant {name!r}; choose from {', '.join(VARIANT_ENV)}")
            try:
                row = profile_variant(model, name, args, trace_root)
            except Exception as e:  # noqa: BLE001
                row = {"variant": name, "error": f"{type(e).__name__}: {str(e)[:400]}"}
            res["rows"].append(row)
            (out / "decode_profile.json").write_text(json.dumps(res, indent=1))
            if "error" in row:
                print(f"{name}: {row['error']}", flush=True)
                continue
            if not row.get("kernels"):
                print(f"{name}: step {row['step_ms']:.3f} ms, no device events in the trace (modules {row['modules']})")
                continue
            print(f"\n== {name} {row['env']}: step {row['step_ms']:.3f} ms untraced ({wbytes / row['step_ms'] / 1e9 / hbm_datasheet() * 1e12:.2f} "
                  f"of datasheet), {row['traced_step_ms']:.3f} traced; per step {row['kernels_per_step']:.1f} kernels, busy "
                  f"{row['busy_ms_per_step']:.3f} ms, gaps {row['gap_ms_per_step']:.3f} ms (median {row['median_gap_us']:.2f} us, "
                  f"p90 {row['p90_gap_us']:.2f} us); compile {row['compile_s']:.1f} s", flush=True)
            print(f"   {'kernel':60s} {'n/step':>7s} {'us/step':>8s} {'mean us':>8s}")
            for g in row["groups"][: args.top]:
                print(f"   {g['kernel']:60s} {g['per_step']:7.2f} {g['us_per_step']:8.1f} {g['mean_us']:8.2f}")
    return res


if __name__ == "__main__":
    main()
