"""The main job on embedded defaults: the policy writes CUDA for a small task suite over refinement turns,
and the harness judges every candidate (correctness, speed on a GPU, structure).

    python -m experiments.demo [--config=experiments/configs/demo.py] [--config.field=value] [--workdir=DIR]

The method in miniature. Stages: (1) the suite's own implementations through the harness (a health check of
the backend); (2) zero-shot: the policy (`model`: SmolLM2-135M-Instruct by default, fetched once) on every task at
once (one sampler call per turn, with a progress bar; metrics per task, one step each; a run killed inside the stage
redoes it): `samples_per_task` candidates per task and turn, each turn seeing the harness feedback on its previous
answer; metrics.jsonl, candidates.jsonl, verdicts.png;
(3) SFT: `sft_steps` steps of cudaperf_jax.sft.train into WORKDIR/sft (skipped, and said so, where that package is
absent); (4) RL: `rl_steps` steps of multi-turn GRPO (cudaperf_jax.rl.trainer) into WORKDIR/rl (rl_curves.png:
reward, compiled and correct per step and turn); (5) evaluation of the start and the RL policy on held-out tasks
(the test split's families), per turn: eval.json, eval_candidates.jsonl, eval.png.
It ends with one table (every stage's rows with n, the candidates each covers) and the first correct kernel the
policy wrote, printed with its verdict and saved to WORKDIR/first_correct.cu; summary.json holds the numbers.
"""
from __future__ import annotations

import collections
import json
import sys
import time
from pathlib import Path

import numpy as np

from experiments import launch

launch.define_config("experiments/configs/demo.py")


def load_suite(path: str, max_tasks: int):
    from kernels_harness.tasks.schema import load_task
    root = Path(path)
    if not root.is_absolute():
        root = launch.REPO / root
    files = sorted(root.glob("*.json"))
    if not files:
        raise FileNotFoundError(f"no task files (*.json) in {root}; point --config.suite at a directory of tasks")
    return [load_task(f) for f in files][:max_tasks]


def check_references(pool, tasks, run) -> dict:
    """Runs each task's own implementations; returns {task_id/impl: status}."""
    items = [(t, impl.source) for t in tasks for impl in t.implementations]
    names = [f"{t.id}/{impl.name}" for t in tasks for impl in t.implementations]
    expected = [impl.expected for t in tasks for impl in t.implementations]
    t0 = time.perf_counter()
    results = pool.evaluate(items)
    rows = {}
    print(f"\n{'reference implementation':<44} {'status':<14} {'speedup':>8} {'structure':>9}", file=sys.stderr)
    for name, exp, r in zip(names, expected, results):
        sp = f"{r.speedup:.2f}" if r.speedup else "-"
        score = r.features.get("score") if r.features else None
        print(f"{name:<44} {r.status:<14} {sp:>8} {score if score is None else round(score, 3)!s:>9}",
              file=sys.stderr)
        rows[name] = {"status": r.status, "expected": exp, "speedup": r.speedup, "structure": score,
                      "error": r.error or (r.compile_log[:300] if not r.compiled else "")}
    bad = [n for n, e, r in zip(names, expected, results)
           if r.status != "unchecked" and (r.status == "ok") != (e == "correct")]
    print(f"references: {len(results) - len(bad)}/{len(results)} as expected in "
          f"{time.perf_counter() - t0:.1f} s" + (f"; unexpected: {bad}" if bad else ""), file=sys.stderr)
    run.write_json("references.json", rows)
    return rows


def candidate_record(task, turn, sample, text, source, r) -> dict:
    return {"task": task.id, "turn": turn, "sample": sample, "status": r.status, "compiled": r.compiled,
            "correct": r.correct, "speedup": r.speedup, "structure": (r.features or {}).get("score"),
            "feedback": r.feedback, "completion": text, "source": source, "seed": r.seed}


def step_metrics(records: list[dict], turns: int) -> dict:
    m = {}
    for turn in range(turns):
        rs = [r for r in records if r["turn"] == turn]
        if not rs:
            continue
        m[f"turn{turn}/compiled"] = float(np.mean([r["compiled"] for r in rs]))
        m[f"turn{turn}/correct"] = float(np.mean([r["correct"] for r in rs]))
        scores = [r["structure"] for r in rs if r["structure"] is not None]
        m[f"turn{turn}/structure"] = float(np.mean(scores)) if scores else 0.0
    m["correct_any"] = float(any(r["correct"] for r in records))
    speedups = [r["speedup"] for r in records if r["correct"] and r["speedup"]]
    m["best_speedup"] = float(max(speedups)) if speedups else 0.0
    return m


_COLORS = {"ok": "tab:green", "wrong": "tab:orange", "compile_error": "tab:red", "runtime_error": "tab:purple",
           "timeout": "tab:brown", "hack": "black", "unchecked": "tab:gray"}


def plot_statuses(records: list[dict], turns: int, path: Path):
    """The harness's verdicts on the zero-shot candidates, stacked per turn, each segment's count written on it."""
    from cudaperf_jax.experiment.plotting import empty_note, integer_ticks, pyplot
    from kernels_harness.result import STATUSES
    plt = pyplot()
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    labels = [f"turn {t}" for t in range(turns)]
    bottom = np.zeros(turns)
    for status in STATUSES:
        counts = np.array([sum(r["status"] == status and r["turn"] == t for r in records) for t in range(turns)])
        if counts.any():
            ax.bar(labels, counts, bottom=bottom, label=status, color=_COLORS.get(status, "tab:gray"))
            for x, (c, b) in enumerate(zip(counts, bottom)):
                if c:
                    ax.text(x, b + c / 2, str(int(c)), ha="center", va="center", fontsize=8, color="white")
            bottom += counts
    if not records:
        empty_note(ax, "no candidates (the zero-shot stage was off)")
    ax.set_ylabel("candidates")
    integer_ticks(ax, "y")
    per_turn = len(records) // max(turns, 1)
    ax.set_title(f"Harness verdicts of the policy's zero-shot candidates ({per_turn} per turn)", fontsize=9)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(config, workdir):
    from cudaperf_jax import prompts
    from cudaperf_jax.experiment import open_run
    from cudaperf_jax.generation.sampler import Sampler, SamplingParams
    from cudaperf_jax.models.loading import load_policy, resolve_path
    from kernels_harness.run.pool import HarnessPool

    run = open_run(workdir, config, name="demo")
    tasks = load_suite(config.suite, config.max_tasks)
    cand_path = Path(workdir) / "candidates.jsonl"
    done = run.restore_step()
    if cand_path.exists():  # keep the candidates of finished steps only
        keep = {t.id for t in tasks[:done]}
        lines = [ln for ln in cand_path.read_text().splitlines() if ln and json.loads(ln)["task"] in keep]
        cand_path.write_text("".join(ln + "\n" for ln in lines))
    print(f"[demo] {len(tasks)} tasks from {config.suite}; workdir {workdir}"
          + (f"; resuming at task {done}" if done else ""), file=sys.stderr)

    with HarnessPool(backend=config.backend, workers=config.workers, progress=True) as pool:
        backend = pool.backend
        print(f"[demo] harness backend: {backend}", file=sys.stderr)
        if config.check_references and not (Path(workdir) / "references.json").exists():
            check_references(pool, tasks, run)
        model_path = resolve_path(config.model)   # a registered name: its cached GGUF, fetched once
        config_model_path = str(model_path)
        t0 = time.perf_counter()
        model, tokenizer = load_policy(model_path, dtype=config.dtype, progress=True)
        sampler = Sampler(model, tokenizer)
        print(f"[demo] policy {Path(str(model_path)).name} loaded in {time.perf_counter() - t0:.1f} s",
              file=sys.stderr)
        params = SamplingParams(max_new_tokens=config.max_new_tokens, temperature=config.temperature,
                                top_p=config.top_p, top_k=config.top_k)
        todo = tasks[done:] if config.zero_shot else []
        n = config.samples_per_task
        owner = [t for t in todo for _ in range(n)]   # the task sample j answers
        history = [[] for _ in owner]
        records = {t.id: [] for t in todo}
        for turn in range(config.turns if todo else 0):
            # every task's samples in one sampler call: on 2 CPU cores a batch of 6 decodes about as fast as 2
            msgs = [prompts.messages(t, h, prompt=config.prompt) for t, h in zip(owner, history)]
            t0 = time.perf_counter()
            out = sampler.generate(msgs, params, seed=config.seed * 100003 + done * 101 + turn, chat=True,
                                   progress=f"zero-shot turn {turn}")
            gen_s = time.perf_counter() - t0
            sources = [prompts.extract_solution(t) for t in out.texts]
            results = pool.evaluate(list(zip(owner, sources)))
            for j, (text, src, r) in enumerate(zip(out.texts, sources, results)):
                records[owner[j].id].append(candidate_record(owner[j], turn, j % n, text, src, r))
                history[j].append((text, r.feedback or r.status, r.status))
            print(f"[demo] zero-shot turn {turn}: {len(todo)} tasks x {n} samples, {int(out.lengths.sum())} tokens "
                  f"in {gen_s:.1f} s; verdicts {collections.Counter(r.status for r in results).most_common()}",
                  file=sys.stderr)
        if todo:
            with open(cand_path, "a") as f:
                f.writelines(json.dumps(rec) + "\n" for task in todo for rec in records[task.id])
            for step, task in enumerate(todo, start=done):
                run.log(step, {"task": task.id, **step_metrics(records[task.id], config.turns)}, echo=True)
            run.save(len(tasks) - 1, {"step": np.int32(len(tasks) - 1)})

    from experiments import demo_stages
    policy = demo_stages.sft_stage(config, workdir, config_model_path)
    rl_summary = demo_stages.rl_stage(config, workdir, policy)
    evaluation = demo_stages.eval_stage(config, workdir, policy)

    records = [json.loads(ln) for ln in cand_path.read_text().splitlines() if ln] if cand_path.exists() else []
    summary = {"rl": rl_summary, "eval": evaluation, "tasks": len(tasks), "candidates": len(records),
               "statuses": dict(collections.Counter(r["status"] for r in records)),
               **{k: v for k, v in step_metrics(records, config.turns).items()}}
    plot_statuses(records, config.turns, Path(workdir) / "verdicts.png")
    finish(config, workdir, records, summary, backend)
    run.write_json("summary.json", summary)
    run.close()


def finish(config, workdir, records: list[dict], summary: dict, backend: str) -> None:
    """The last lines of the demo: the table of every stage's candidates and the first correct kernel."""
    from experiments import demo_report
    held = Path(workdir) / "eval_candidates.jsonl"
    held_out = [json.loads(ln) for ln in held.read_text().splitlines() if ln] if held.exists() else []
    rows = demo_report.table_rows(records, config.turns, summary["rl"],
                                 config.samples_per_task * config.rl_tasks_per_step, summary["eval"])
    print(f"\n[demo] results ({backend} backend; n: candidates a row covers; compiled and correct: fractions of "
          f"them; reward: the unified reward's mean)\n" + demo_report.format_table(rows), file=sys.stderr)
    first = demo_report.report_first_correct([("zero-shot", records), ("held-out evaluation", held_out)], workdir,
                                             backend)
    summary["first_correct"] = str(first) if first else None
    files = [n for n in ("candidates.jsonl", "eval_candidates.jsonl", "metrics.jsonl") if (Path(workdir) / n).exists()]
    pngs = [str(p.relative_to(workdir)) for p in sorted(Path(workdir).rglob("*.png"))]
    print(f"[demo] wrote {workdir}: summary.json, {', '.join(files)}; plots {', '.join(pngs)}", file=sys.stderr)


if __name__ == "__main__":
    launch.run(main, name="demo")
