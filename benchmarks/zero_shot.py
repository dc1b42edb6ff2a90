"""The zero-shot ladder (issue 43): every model x prompt variant x suite, sampled and judged per turn.

Each cell (one model, one prompt of cudaperf_jax.prompts.PROMPTS, one suite) samples --samples answers per task at
--temperature over --turns turns (turn t+1 sees the harness feedback on turn t) and reports per turn: correct (best
of the samples), pass@1, fast_1 against PyTorch eager (KernelBench; dataset tasks: their CUDA baseline) and against
torch.compile, the geometric-mean speedup over correct, and the share of answers failing on the solution ABI by
category (cudaperf_jax/eval/abi.py); every `hack` verdict is listed with its rule and line, so honest code judged a
hack shows. Suites: `kernelbench` (the 100 level-1 problems), `test` (--test_tasks tasks of the dataset's test split,
family-balanced, the same for every cell), `val` (--val_tasks of the val split, likewise), `smoke`
(experiments/suites/smoke). A cell directory is named after the model (its file or directory name, or --labels).

It is resumable: a cell runs in parts of --chunk_tasks tasks, each written to WORK/<model>__<prompt>__<suite>/ when it
ends; a complete cell holds candidates.jsonl, eval.json and cell.json (benchmarks/zero_shot_cells.py). A rerun skips
complete cells and finished parts; --max_minutes stops between parts (a part starts only when its expected time, from
the parts done so far, still fits; one part always runs). Every run rewrites OUT/zero_shot.json, table.md,
zero_shot.png and cells.tgz (the cells and parts done so far). A model is loaded once for its cells;
generation runs in chunks of --gen_batch sequences; identical (task, source) answers are judged once (per part).

GPU (one H100; 80 GB shared by JAX, at --memory_fraction, and the harness's workers):
    python3 -m experiments.build_dataset --out=ROOT/tasks --validate_sample=-1
    python3 benchmarks/zero_shot.py --models qwen2.5-coder-1.5b,qwen2.5-coder-0.5b --tasks ROOT/tasks \
        --work ROOT/zero_shot --out $OUT --max_minutes 9        # again until it prints "all N cells done"
    # on a fresh machine: the same command with --resume_from DIR/cells.tgz (a previous run's OUT)
After a harness fix, `--rejudge` (no model is loaded) judges the stored answers of the cells again, on this
machine's backend (cpu: correctness only), and rewrites the tables.
CPU (a few minutes per cell of 3 smoke tasks with the 0.5B):
    python benchmarks/zero_shot.py --models /tmp/models/qwen05.gguf --suites smoke --smoke_tasks 3 --samples 1 \
        --turns 1 --backend cpu --out /tmp/zs
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tarfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import zero_shot_cells as cells_lib

SUITES = ("kernelbench", "test", "val", "smoke")
# Qwen2.5-1.5B, bf16, a 4,096-token prompt + 1,024 new tokens: 16 sequences peak at 38.1 GB of JAX's 42.5 GB at
# fraction 0.5 of an 80 GB H100 (32 run out: the prefill's fp32 scores [B, 12, P, P+N] alone are 30 GiB), leaving
# ~38 GB to the harness's workers (benchmarks/gen_memory.py; benchmarks/results/gen_memory_h100_2026-12-07)
GEN_BATCH = 16
MEMORY_FRACTION = 0.5
# tasks per part: 16 KernelBench tasks x 4 samples x 2 turns is ~100 distinct answers for the harness and two
# generation calls per turn, a few minutes on an H100 (each part prints its generation and harness seconds)
CHUNK_TASKS = 16


def parse(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", required=True, help="comma-separated policies: names load_policy knows, or paths")
    ap.add_argument("--labels", default="", help="comma-separated cell names, one per model (default: the model's "
                    "file or directory name)")
    ap.add_argument("--prompts", default="", help="comma-separated prompt variants (default: every registered one)")
    ap.add_argument("--suites", default="kernelbench,test", help=f"comma-separated, of {', '.join(SUITES)}")
    ap.add_argument("--kernelbench", default=str(REPO / "data/kernelbench/level1"))
    ap.add_argument("--kernelbench_cache", default=str(REPO / "data/kernelbench/tasks"))
    ap.add_argument("--kernelbench_tasks", type=int, default=100)
    ap.add_argument("--tasks", default="", help="a built dataset (python -m experiments.build_dataset) for `test`")
    ap.add_argument("--test_split", default="test")
    ap.add_argument("--test_tasks", type=int, default=96, help="family-balanced (select=spread)")
    ap.add_argument("--val_split", default="val")
    ap.add_argument("--val_tasks", type=int, default=48, help="family-balanced (select=spread)")
    ap.add_argument("--smoke", default=str(REPO / "experiments/suites/smoke"))
    ap.add_argument("--smoke_tasks", type=int, default=0, help="0: all")
    ap.add_argument("--samples", type=int, default=4)
    ap.add_argument("--turns", type=int, default=2)
    ap.add_argument("--temperature", type=float, default=0.2)
    ap.add_argument("--top_p", type=float, default=0.95)
    ap.add_argument("--top_k", type=int, default=0,
                    help="keep the k likeliest tokens before top_p (0: off, the ladder's protocol; 20 makes a CPU "
                         "decode step ~3x faster by not sorting the whole vocabulary)")
    ap.add_argument("--max_new_tokens", type=int, default=1024)
    ap.add_argument("--max_prompt_tokens", type=int, default=4096)
    ap.add_argument("--gen_batch", type=int, default=GEN_BATCH, help="sequences per sampler call (0: a whole turn)")
    ap.add_argument("--dtype", default="auto", help="auto: bfloat16 on a GPU, float32 on the CPU")
    ap.add_argument("--memory_fraction", type=float, default=None,
                    help=f"JAX's GPU memory fraction (default {MEMORY_FRACTION}, or XLA_PYTHON_CLIENT_MEM_FRACTION)")
    ap.add_argument("--backend", default="auto", help="harness backend: auto | cpu | cuda")
    ap.add_argument("--workers", type=int, default=0, help="harness execution workers (0: the pool's default)")
    ap.add_argument("--compile_workers", type=int, default=0, help="parallel nvcc builds (0: one per core)")
    ap.add_argument("--trials", type=int, default=2, help="correctness trials per config (fresh inputs each)")
    ap.add_argument("--call_timeout_s", type=float, default=None,
                    help="the longest one call of a candidate may take (default: EvalConfig's, with its reasoning)")
    ap.add_argument("--job_timeout_s", type=float, default=None,
                    help="the longest a candidate may take in all (default: EvalConfig's)")
    ap.add_argument("--timing", type=json.loads, default=None,
                    help='timing repetitions, JSON of kernels_harness.run.timing.TimingParams fields, e.g. '
                         '\'{"warmup": 1, "min_reps": 2, "budget_s": 0.02}\' (default: '
                         'cudaperf_jax.eval.config.EVAL_TIMING)')
    ap.add_argument("--device_budget", type=float, default=None,
                    help="share of the GPU memory left after JAX that the harness's jobs may reserve at once "
                         "(default: EvalConfig's; 0: no budget)")
    ap.add_argument("--no_torch_compile", action="store_true", help="do not time torch.compile (fast_1 compile)")
    ap.add_argument("--no_dedupe", action="store_true", help="judge repeated answers again")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=os.environ.get("OUT") or str(REPO / "benchmarks/results/zero_shot"))
    ap.add_argument("--work", default="", help="where the cells live (default OUT/cells)")
    ap.add_argument("--resume_from", default="", help="a cells.tgz of an earlier run (another machine)")
    ap.add_argument("--max_minutes", type=float, default=0.0, help="stop between parts past this (0: no limit)")
    ap.add_argument("--chunk_tasks", type=int, default=CHUNK_TASKS,
                    help="tasks per part of a cell (the unit a rerun never repeats; 0: the whole suite)")
    ap.add_argument("--compilation_cache", default="auto", help="JAX's persistent compilation cache: auto|off|DIR")
    ap.add_argument("--common", action="store_true",
                    help="no run: compare the cells (finished or not) on the tasks all cells of a suite have judged, "
                         "into OUT/common.md and common.json")
    ap.add_argument("--rejudge", action="store_true",
                    help="no generation: judge the answers of the cells (finished or not) again with the harness as "
                         "it is now, then write the tables (answers of a later turn still saw the old feedback)")
    ap.add_argument("--reclassify", action="store_true",
                    help="recompute the ABI categories of finished cells from their records (no model, no harness)")
    a = ap.parse_args(argv)
    a.models = [m for m in a.models.split(",") if m]
    a.suites = [s for s in a.suites.split(",") if s]
    bad = [s for s in a.suites if s not in SUITES]
    if bad or not a.suites or not a.models:
        ap.error(f"give --models and --suites from {', '.join(SUITES)} (got suites {a.suites})")
    if {"test", "val"} & set(a.suites) and not a.tasks:
        ap.error("the `test` and `val` suites need --tasks DIR, a dataset built by `python -m experiments.build_dataset "
                 "--out=DIR`; or leave them out of --suites")
    a.labels = [x for x in a.labels.split(",") if x]
    if a.labels and len(a.labels) != len(a.models):
        ap.error(f"give one label per model ({len(a.models)} models, {len(a.labels)} labels)")
    a.work = Path(a.work or Path(a.out) / "cells")
    from cudaperf_jax.eval.config import EvalConfig
    from kernels_harness.run.timing import TimingParams
    d = EvalConfig()
    a.call_timeout_s = d.call_timeout_s if a.call_timeout_s is None else a.call_timeout_s
    a.job_timeout_s = d.job_timeout_s if a.job_timeout_s is None else a.job_timeout_s
    a.device_budget = d.device_budget if a.device_budget is None else a.device_budget
    if not 0 <= a.device_budget <= 1:
        ap.error("give --device_budget between 0 and 1 (0: no budget)")
    try:
        a.timing = d.timing if a.timing is None else TimingParams(**a.timing)
    except (TypeError, ValueError) as e:
        ap.error(f"--timing: {e}; give a JSON object of TimingParams fields (warmup, min_reps, max_reps, budget_s, "
                 "target_rel_iqr, min_iqr_ms, max_s)")
    if not 0 < a.call_timeout_s <= a.job_timeout_s:
        ap.error("give 0 < --call_timeout_s <= --job_timeout_s")
    return a


def label(model: str) -> str:
    """A short file-name-safe name of a model argument (cudaperf_jax.eval.suites.model_label)."""
    from cudaperf_jax.eval.suites import model_label
    return model_label(model)


def load_suites(a) -> dict:
    """{suite: [Task]}: the tasks of each suite (the same for every model and prompt)."""
    from cudaperf_jax.eval.suites import load_suite
    out = {}
    for s in a.suites:
        if s == "kernelbench":
            out[s] = load_suite(a.kernelbench, max_tasks=a.kernelbench_tasks, kernelbench_cache=a.kernelbench_cache)
        elif s in ("test", "val"):
            split, n = (a.test_split, a.test_tasks) if s == "test" else (a.val_split, a.val_tasks)
            out[s] = load_suite(a.tasks, split=split, max_tasks=n, select="spread")
        else:
            out[s] = load_suite(a.smoke, max_tasks=a.smoke_tasks)
    return out


def prompt_fingerprint(prompt: str, tasks: list) -> str:
    """sha256 (16 hex digits) of the variant's text for these tasks: every first-turn prompt and, for the first task,
    the refinement prompt of every verdict. A cell's prompts changed by an edit of cudaperf_jax/prompts (a new
    skeleton line) change its key, so old parts are never mixed with new ones."""
    import hashlib

    from cudaperf_jax import prompts
    from kernels_harness.result import STATUSES
    texts = [prompts.task_prompt(t, prompt) for t in tasks]
    if tasks:
        texts += [prompts.feedback_prompt("FEEDBACK", tasks[0], status, prompt=prompt) for status in STATUSES]
    return hashlib.sha256("\0".join(texts).encode()).hexdigest()[:16]


def cell_key(a, model: str, prompt: str, suite: str, tasks: list) -> dict:
    """What makes a cell's results: compared on resume (a different one is refused, not mixed)."""
    return {"model": model, "prompt": prompt, "prompt_sha": prompt_fingerprint(prompt, tasks), "suite": suite,
            "tasks": [t.id for t in tasks], "seed": a.seed,
            "samples": a.samples, "turns": a.turns, "temperature": a.temperature, "top_p": a.top_p,
            "max_new_tokens": a.max_new_tokens, "max_prompt_tokens": a.max_prompt_tokens, "dtype": a.dtype,
            "chunk_tasks": a.chunk_tasks, **({"top_k": a.top_k} if a.top_k else {})}   # off: earlier cells' keys


def progress_line(i: int, n: int, cell: dict) -> str:
    from zero_shot_report import turns_text
    s, m = cell["eval"], cell["meta"]
    rows = s["per_turn"]
    return (f"[zero_shot] cell {i}/{n} {m['model_label']} {m['prompt']} {m['suite']}: correct {turns_text(rows, 'correct')}"
            f", pass@1 {turns_text(rows, 'pass@1')}, ABI fail {turns_text(rows, 'abi_failure')}, {s['candidates']} "
            f"answers ({m['deduplicated']} deduplicated), {m['seconds']['cell']:.0f} s")


def _free_device_memory() -> None:
    """Drops the last model's arrays and compiled programs before the next model is loaded."""
    import gc

    import jax
    gc.collect()
    jax.clear_caches()


def main(argv=None) -> int:
    a = parse(argv)
    frac = a.memory_fraction if a.memory_fraction is not None else float(
        os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION", MEMORY_FRACTION))
    os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] = str(frac)   # before JAX starts: its preallocation
    from experiments.launch import compilation_cache, user_errors
    try:
        return _run(a, frac, compilation_cache)
    except (*user_errors(), ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def _run(a, frac: float, compilation_cache) -> int:
    t_start = time.perf_counter()
    from cudaperf_jax import prompts
    prompt_names = [p for p in a.prompts.split(",") if p] or sorted(prompts.PROMPTS)
    for p in prompt_names:
        prompts.get(p)
    a.work.mkdir(parents=True, exist_ok=True)
    if a.resume_from:
        with tarfile.open(a.resume_from) as tar:
            names = [m for m in tar.getmembers() if m.isfile() and not (a.work / m.name).exists()]
            tar.extractall(a.work, members=names, filter="data")
        print(f"[zero_shot] {len(names)} files of earlier cells from {a.resume_from}", file=sys.stderr)
    suites = load_suites(a)
    for s, ts in suites.items():
        fams = {}
        for t in ts:
            fams[t.family or "?"] = fams.get(t.family or "?", 0) + 1
        print(f"[zero_shot] suite {s}: {len(ts)} tasks ({', '.join(f'{k} {v}' for k, v in sorted(fams.items()))})",
              file=sys.stderr)
    from kernels_harness.run.pool import HarnessPool, resolve_backend
    backend = resolve_backend(a.backend)
    if a.dtype == "auto":
        a.dtype = "bfloat16" if backend == "cuda" else "float32"
    labels = dict(zip(a.models, a.labels or [label(m) for m in a.models]))
    if len(set(labels.values())) < len(labels):
        raise ValueError(f"two models share a cell name ({', '.join(labels.values())}); give them distinct file or "
                         "directory names, or --labels")
    cells = [(m, p, s) for m in a.models for p in prompt_names for s in a.suites]
    dirs = {c: a.work / f"{labels[c[0]]}__{c[1]}__{c[2]}" for c in cells}
    keys = {c: cell_key(a, *c, suites[c[2]]) for c in cells}
    if a.common:
        return _common_report(a, cells, dirs, suites)
    done = {c: meta for c in cells if (meta := cells_lib.finished(dirs[c], keys[c])) is not None}
    todo = [c for c in cells if c not in done]
    settings = {k: getattr(a, k) for k in ("samples", "turns", "temperature", "top_p", "top_k", "max_new_tokens",
                                           "max_prompt_tokens", "gen_batch", "dtype", "seed", "trials", "workers",
                                           "compile_workers", "call_timeout_s", "job_timeout_s", "chunk_tasks",
                                           "device_budget")}
    settings["timing"] = a.timing.as_kwargs()
    settings.update(backend=backend, memory_fraction=frac, prompts=prompt_names, models=a.models, suites=a.suites,
                    dedupe=not a.no_dedupe, tasks={s: [t.id for t in ts] for s, ts in suites.items()})
    print(f"[zero_shot] {len(cells)} cells, {len(done)} finished earlier, {len(todo)} to run; JAX memory fraction "
          f"{frac}, generation in chunks of {a.gen_batch}", file=sys.stderr)
    if a.reclassify:
        for c in done:
            cells_lib.reclassify(dirs[c], suites[c[2]])
    ran, stopped = 0, False
    if a.rejudge:
        _rejudge(a, cells, dirs, suites, backend)
        todo = []
    if todo:
        from cudaperf_jax.models.hf_io import CheckpointError
        from cudaperf_jax.models.loading import resolve_path, split_adapter
        for m in dict.fromkeys(c[0] for c in todo):   # a missing model is reported before any cell runs
            while (parts := split_adapter(m)) is not None:   # BASE+ADAPTER: the adapter directories, then BASE
                if not parts[1].is_dir():
                    raise CheckpointError(f"no adapter directory at {parts[1]} (in --models {m}); BASE+ADAPTER needs "
                                          "a PEFT LoRA directory after each '+'")
                m = parts[0]
            resolve_path(m)
        compilation_cache(a.compilation_cache)
        secs = cells_lib.part_seconds(list(dirs.values()))
        deadline = t_start + 60 * a.max_minutes if a.max_minutes else None

        def fits(model: str, suite: str) -> bool:   # whether a part is expected to end in time; one always runs
            return not ran or deadline is None or time.perf_counter() + cells_lib.expected(secs, model, suite) <= deadline

        kw = _harness_kwargs(a, backend)
        import jax
        jax.devices()   # JAX takes its memory first: the harness's device budget is a share of what it leaves
        with HarnessPool(progress=True, **kw) as pool:
            for model in dict.fromkeys(c[0] for c in todo):
                mine = [c for c in todo if c[0] == model]
                if not fits(model, mine[0][2]):
                    stopped = True
                    break
                from experiments.policy_eval import load_sampler
                t0 = time.perf_counter()
                sampler = load_sampler(model, dtype=a.dtype)
                load_s = time.perf_counter() - t0
                print(f"[zero_shot] loaded {model} ({a.dtype}) in {load_s:.0f} s", file=sys.stderr)
                fresh = [True]   # the next part is the first since this load (it pays the compilations)
                for c in mine:
                    def on_part(j, n, seconds, c=c, fresh=fresh):
                        nonlocal ran, secs
                        ran += 1
                        fresh[0] = False
                        secs = cells_lib.part_seconds(list(dirs.values()))
                        print(f"[zero_shot] {dirs[c].name}: part {j + 1}/{n} in {seconds:.0f} s", file=sys.stderr)
                    complete = cells_lib.run_cell(sampler, pool, suites[c[2]], rollout_cfg(a, c[1]), keys[c], dirs[c],
                                                  chunk=a.chunk_tasks, seed=a.seed, dedupe=not a.no_dedupe,
                                                  may_start=lambda c=c: fits(c[0], c[2]), on_part=on_part,
                                                  cold=lambda fresh=fresh: fresh[0])
                    if not complete:
                        stopped = True
                        break
                    cell = cells_lib.load_cell(dirs[c])
                    done[c] = cell["meta"]
                    print(progress_line(cells.index(c) + 1, len(cells), cell), file=sys.stderr, flush=True)
                del sampler
                _free_device_memory()
                if stopped:
                    break
    return _report(a, cells, dirs, done, settings, ran, stopped, t_start)


def _harness_kwargs(a, backend: str) -> dict:
    from cudaperf_jax.eval.config import harness_kwargs
    return harness_kwargs(backend=backend, workers=a.workers, compile_workers=a.compile_workers, trials=a.trials,
                          call_timeout_s=a.call_timeout_s, job_timeout_s=a.job_timeout_s, timing=a.timing,
                          seed=a.seed, torch_compile=not a.no_torch_compile, device_budget=a.device_budget)


def _rejudge(a, cells, dirs, suites, backend: str) -> None:
    """--rejudge: every cell on disk judged again with this harness (benchmarks/zero_shot_cells.rejudge)."""
    from kernels_harness.run.pool import HarnessPool
    have = [c for c in cells if dirs[c].is_dir() and (any(dirs[c].glob("part_*.json"))
                                                     or (dirs[c] / "cell.json").exists())]
    if not have:
        raise ValueError(f"nothing to rejudge: no cell of these models, prompts and suites under {a.work}")
    with HarnessPool(progress=True, **_harness_kwargs(a, backend)) as pool:
        for c in have:
            n, changed = cells_lib.rejudge(dirs[c], suites[c[2]], pool)
            print(f"[zero_shot] {dirs[c].name}: {n} answers judged again on {backend}, {changed} verdicts changed",
                  file=sys.stderr, flush=True)


def _common_report(a, cells, dirs, suites) -> int:
    """--common: each suite's cells on the tasks they have all judged (a cut-off ladder still compares prompts);
    the sampling settings in the header are those of the first cell's key.json."""
    import zero_shot_report
    keys = [json.loads((dirs[c] / "key.json").read_text()) for c in cells if (dirs[c] / "key.json").exists()]
    if not keys:
        raise SystemExit(f"error: no cell of these models, prompts and suites under {a.work}; give the --work of a "
                         "ladder run (or --resume_from its cells.tgz)")
    settings = {k: keys[0].get(k, "?") for k in ("samples", "turns", "temperature", "top_p", "max_new_tokens")}
    settings["backend"] = keys[0].get("backend", "as run")
    rows, notes = [], []
    for s in dict.fromkeys(c[2] for c in cells):
        cells_s, common = cells_lib.common_cells([dirs[c] for c in cells if c[2] == s and dirs[c].is_dir()], suites[s])
        rows += [zero_shot_report.cell_row(c) for c in cells_s]
        notes.append(f"{s}: {len(common)} of {len(suites[s])} tasks judged by all {len(cells_s)} cells")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    text = zero_shot_report.markdown(rows, settings).replace(
        "# Zero-shot ladder", "# Zero-shot ladder on common tasks\n\n" + "; ".join(notes) + ".", 1)
    (out / "common.md").write_text(text)
    (out / "common.json").write_text(json.dumps({"settings": settings, "common": notes, "cells": rows}, indent=1,
                                                default=str))
    zero_shot_report.plot(rows, out / "common.png")
    print(text)
    print(f"[zero_shot] wrote common.md, common.json, common.png in {out}", file=sys.stderr)
    return 0


def rollout_cfg(a, prompt: str):
    from cudaperf_jax.rl.rollout import RolloutConfig
    return RolloutConfig(samples_per_task=a.samples, turns=a.turns, max_new_tokens=a.max_new_tokens,
                         max_prompt_tokens=a.max_prompt_tokens, temperature=a.temperature, top_p=a.top_p,
                         top_k=a.top_k, prompt=prompt, gen_batch=a.gen_batch)


def judged_backend(cells: list[dict], default: str) -> str:
    """The harness backends that judged these cells' answers (a re-judge's, else the run's), not this invocation's:
    a report written on the CPU of cells run on a GPU says cuda; `default` when no cell records one."""
    judged = sorted({c["meta"].get("rejudged_backend") or c["meta"].get("backend") or "" for c in cells} - {""})
    return ", ".join(judged) or default


def _report(a, cells, dirs, done, settings, ran, stopped, t_start) -> int:
    import zero_shot_report
    finished_cells = [cells_lib.load_cell(dirs[c]) for c in cells if c in done]
    pending = [dirs[c].name for c in cells if c not in done]
    out = Path(a.out)
    settings = {**settings, "backend": judged_backend(finished_cells, settings["backend"])}
    paths = zero_shot_report.write(finished_cells, settings, pending, out)
    with tarfile.open(out / "cells.tgz", "w:gz") as tar:   # complete cells and the finished parts of the others
        for c in cells:
            for f in sorted(dirs[c].glob("*.json*")) if dirs[c].is_dir() else []:
                tar.add(f, arcname=f"{dirs[c].name}/{f.name}")
    print((out / "table.md").read_text())
    mins = (time.perf_counter() - t_start) / 60
    if pending:
        why = f"--max_minutes {a.max_minutes:g} reached" if stopped else "not run"
        print(f"[zero_shot] ran {ran} part(s) in {mins:.1f} min; {len(pending)} of {len(cells)} cells left ({why}): run the "
              "same command again to continue", file=sys.stderr)
    else:
        print(f"[zero_shot] all {len(cells)} cells done ({ran} part(s) run now, {mins:.1f} min)", file=sys.stderr)
    print(f"[zero_shot] wrote {', '.join(p.name for p in paths)}, cells.tgz in {out}; cells in {a.work}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
