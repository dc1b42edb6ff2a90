"""PyTorch eager and torch.compile times of every KernelBench problem on a GPU, into the time store.

    python -m kernels_harness.datasets.kernelbench_times --suite data/kernelbench --out $OUT \
        --max_seconds 540 --gpus 8

Each problem is imported (kernels_harness.tasks.kernelbench; or read from --tasks, a directory of
imported task JSON files), and on every config its module is timed eagerly and, on the configs chosen
by --compile_configs (default: the file's own sizes, the ones KernelBench reports), after
torch.compile, with the harness's timing protocol (kernels_harness.run.timing.Timer: CUDA events on the
harness stream, L2 flushed before each repetition, device-wide sync, interleaved calls, median and
IQR). The compiled module's outputs are compared with eager's at the task's tolerance (`agrees`).
One worker process per GPU takes problems round-robin (shard k of n); every finished problem is
appended to $OUT/results.jsonl at once, so a re-run with the same $OUT resumes. At the end the store
($OUT/times: tensorstore zarr, implementations `torch_eager` (the baseline) and `torch_compile`) and
provenance.json are written (kernels_harness.datasets.times.load reads it).
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

IMPLS = ("torch_eager", "torch_compile")


def _tasks(args):
    from kernels_harness.tasks import kernelbench as kb
    from kernels_harness.tasks.schema import load_task
    if args.tasks:
        return [load_task(p) for p in sorted(Path(args.tasks).glob("*.json"))]
    return kb.import_dir(args.suite, skip_errors=True)


def measure_task(task, be, timer, compile_which: str, params: dict) -> dict:
    """One results.jsonl record: time_ms/iqr_ms/agrees [config][impl] (None where not measured)."""
    import torch

    from kernels_harness.run.protocol import _torch_eager_call
    from kernels_harness.tasks.schema import config_env
    rec = {"task": task.id, "family": task.family, "track": task.track, "split": task.split or "kernelbench",
           "impls": list(IMPLS), "strategies": [["pytorch_eager"], ["torch_compile"]],
           "expected": ["correct", "correct"], "baseline": 0,
           "configs": [c.get("name", str(i)) for i, c in enumerate(task.configs)],
           "level": task.extra.get("level"), "time_ms": [], "iqr_ms": [], "agrees": [], "errors": []}
    last = len(task.configs) - 1
    for ci, config in enumerate(task.configs):
        env = config_env(config)
        row_t, row_q, row_a = [None, None], [None, None], [None, None]
        try:
            calls = [_torch_eager_call(task, {}, env, be)]
            if compile_which == "all" or (compile_which == "largest" and ci == last):
                try:
                    calls.append(_torch_eager_call(task, {}, env, be, compiled=True))
                    row_a[1] = int(_agrees(task, config, be))
                except Exception as e:  # noqa: BLE001 - inductor fails on some modules: eager still counts
                    rec["errors"].append(f"config {ci}: torch.compile failed: {type(e).__name__}: {str(e)[:200]}")
                    torch._dynamo.reset()
            stats = timer.measure(calls, **params)
            for k, s in enumerate(stats):
                row_t[k], row_q[k] = s["median_ms"], s["iqr_ms"]
            row_a[0] = 1
        except Exception as e:  # noqa: BLE001 - e.g. out of memory on the largest config
            rec["errors"].append(f"config {ci}: {type(e).__name__}: {str(e)[:300]}")
            torch.cuda.empty_cache()
        rec["time_ms"].append(row_t)
        rec["iqr_ms"].append(row_q)
        rec["agrees"].append(row_a)
    torch._dynamo.reset()
    torch.cuda.empty_cache()
    return rec


def _agrees(task, config, be) -> bool:
    """torch.compile's outputs against eager's on the same seeded inputs, at the task's tolerance."""
    import torch

    from kernels_harness.run.references import torch_values
    vals = torch_values(task, config, 0, device="cuda")
    model, inputs = vals["__model__"], vals["__inputs__"]
    with torch.no_grad():
        want = model(*inputs)
        got = torch.compile(model)(*inputs)
    want = list(want) if isinstance(want, (tuple, list)) else [want]
    got = list(got) if isinstance(got, (tuple, list)) else [got]
    atol, rtol = task.tolerance_for("float32")
    return all(torch.allclose(g.float(), w.float(), atol=max(atol, 1e-3), rtol=max(rtol, 1e-3))
               for g, w in zip(got, want))


def worker(args) -> int:
    """Shard args.shard of args.shards on GPU args.gpu: measures its problems not yet in results.jsonl."""
    from kernels_harness.datasets.times import iter_results
    from kernels_harness.run.backends import CudaBackend
    from kernels_harness.run.device_kernels import make_flush
    from kernels_harness.run.references import _import_torch
    from kernels_harness.run.timing import Timer
    torch = _import_torch()
    out = Path(args.out)
    path = out / f"results.{args.shard}.jsonl"
    done = {r["task"] for p in out.glob("results*.jsonl") for r in iter_results(p)}
    tasks = [t for i, t in enumerate(_tasks(args)) if i % args.shards == args.shard and t.id not in done]
    be = CudaBackend(0)
    flush, _ = make_flush(be)
    timer = Timer(be, flush, join="device")  # the protocol the dataset's times were measured with
    params = {"budget_s": args.budget_s, "max_reps": args.max_reps, "min_iqr_ms": 0.0}  # the dataset's protocol
    print(f"[shard {args.shard}] {len(tasks)} problems to measure on {torch.cuda.get_device_name()}", flush=True)
    for k, task in enumerate(tasks):
        if time.time() > args.deadline:
            break
        t0 = time.time()
        try:
            rec = measure_task(task, be, timer, args.compile_configs, params)
        except Exception as e:  # noqa: BLE001
            rec = {"task": task.id, "family": task.family, "fatal": True,
                   "errors": [f"{type(e).__name__}: {e}", traceback.format_exc()[-400:]]}
        rec["wall_s"] = round(time.time() - t0, 2)
        with path.open("a") as f:
            f.write(json.dumps(rec) + "\n")
        print(f"[shard {args.shard}] {k + 1}/{len(tasks)} {task.id} {rec['wall_s']} s "
              f"{'; '.join(rec.get('errors', []))[:200]}", flush=True)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", default="data/kernelbench", help="a KernelBench-layout directory")
    ap.add_argument("--tasks", default="", help="a directory of imported task JSON files (instead of --suite)")
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    ap.add_argument("--max_seconds", type=float, default=540.0)
    ap.add_argument("--gpus", type=int, default=1, help="worker processes, one per GPU")
    ap.add_argument("--compile_configs", default="largest", choices=("largest", "all", "none"))
    ap.add_argument("--budget_s", type=float, default=0.25, help="timing budget per config (Timer.measure)")
    ap.add_argument("--max_reps", type=int, default=200)
    ap.add_argument("--shard", type=int, default=-1, help=argparse.SUPPRESS)
    ap.add_argument("--shards", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--deadline", type=float, default=0.0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.shard >= 0:
        return worker(args)
    t0 = time.time()
    started = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    deadline = t0 + args.max_seconds - 45  # leave time to write the store
    procs = []
    for g in range(args.gpus):
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(g))
        cmd = [sys.executable, "-m", "kernels_harness.datasets.kernelbench_times", "--suite", args.suite,
               "--tasks", args.tasks, "--out", str(out), "--compile_configs", args.compile_configs,
               "--budget_s", str(args.budget_s), "--max_reps", str(args.max_reps), "--shard", str(g),
               "--shards", str(args.gpus), "--deadline", str(deadline)]
        procs.append(subprocess.Popen(cmd, env=env))
    for p in procs:
        try:
            p.wait(timeout=max(1.0, deadline + 30 - time.time()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    write(out, argv or sys.argv[1:], started, time.time() - t0)
    return 0


def write(out: Path, argv, started: str, seconds: float) -> None:
    """Merges the shards' results into $OUT/times (the store) and prints a summary."""
    from kernels_harness.datasets import times as times_lib
    from kernels_harness.datasets.measure import provenance
    recs = {}
    for p in sorted(out.glob("results*.jsonl")):
        for r in times_lib.iter_results(p):
            if "time_ms" in r:
                recs[r["task"]] = r
    records = sorted(recs.values(), key=lambda r: r["task"])
    try:
        import cupy as cp
    except ImportError:
        cp = None
    prov = provenance(cp, list(argv), started, {"what": "KernelBench levels 1-3: PyTorch eager and torch.compile "
                                                "of each problem's module, harness timing protocol",
                                                "seconds": round(seconds, 1), "problems": len(records)})
    prov["command"] = "python -m kernels_harness.datasets.kernelbench_times " + " ".join(argv)
    try:
        import torch
        prov["torch"] = torch.__version__
    except ImportError:
        pass
    (out / "provenance.json").write_text(json.dumps(prov, indent=1))
    if records:
        times_lib.write_store(records, out / "times", prov)
    timed = sum(any(row[0] is not None for row in r["time_ms"]) for r in records)
    comp = sum(any(row[1] is not None for row in r["time_ms"]) for r in records)
    print(f"kernelbench times: {len(records)} problems recorded, {timed} with eager times, {comp} with "
          f"torch.compile times; store {out / 'times'}")


if __name__ == "__main__":
    raise SystemExit(main())
