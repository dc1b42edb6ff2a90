"""The method chain's Markdown: the results summary (experiments/method_report.py) and the adapters' README
(experiments/method.py publish)."""
from __future__ import annotations

import json
from pathlib import Path

from experiments.method_plan import Plan
from experiments.method_report import HEAD, METRICS, SUITE_NAMES, limiting


def _ci(d: dict, metric: str, signed: bool = False) -> str:
    if d.get("measured") is False:
        return "not timed"
    if metric == "geomean_speedup" and not signed:
        return "-" if not d["value"] else f"{d['value']:.2f}x [{d['low']:.2f}, {d['high']:.2f}]"
    f = "+.2f" if signed else ".2f"
    return f"{d['value']:{f}} [{d['low']:{f}}, {d['high']:{f}}]"


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head), *("| " + " | ".join(r) + " |" for r in rows)]


def summary_markdown(results: dict, plan: Plan, pngs: list[str]) -> str:
    e = plan.evals
    lines = [f"# The method on {plan.model} (issue 45): zero-shot, SFT, RL", "",
             (f"Written {results['written']} UTC by `python experiments/method.py report` (size {plan.size}). Each "
             f"policy answers {e.samples} samples per problem at temperature {e.temperature} (top_p {e.top_p}) over "
             f"{e.turns} turns (turn t+1 sees the harness feedback on turn t), prompt `{e.prompt}`, at most "
             f"{e.max_new_tokens} new tokens; suites: KernelBench level 1 ({e.kernelbench_tasks}), the test split "
             f"({e.test_tasks}, families never trained on), val ({e.val_tasks}), the same problems for every policy "
             "(benchmarks/zero_shot.py cells). A value is the share of ALL the suite's problems (KernelBench's "
             "fast_p) for each problem's best sample, each sample's answer at that turn; geomean: speedup over "
             "correct answers; [low, high]: 95% bootstrap interval over problems (2,000 resamples). A cell marked "
             "partial covers the problems done so far."), "", "## Goals (KernelBench level 1, last turn)", ""]
    lines += _table(["goal", "status", "seed 0", "seed 1"],
                    [[g["goal"], f"**{g['status']}**", str(g["per_seed"].get("s0", "-")),
                      str(g["per_seed"].get("s1", "-"))] for g in results["goals"]])
    for suite in e.suites:
        cells = [c for c in results["cells"] if c["suite"] == suite]
        if not cells:
            continue
        rows = []
        for c in cells:
            for r in c["per_turn"]:
                note = "" if c["complete"] else f"partial {c['tasks_done']}/{c['n_tasks']}"
                rows.append([c["role"], str(r["turn"]), *(_ci(r[m], m) for m in METRICS), note])
        lines += ["", f"## {SUITE_NAMES.get(suite, suite)}", ""]
        lines += _table(["policy", "turn", *(HEAD[m] for m in METRICS), "cell"], rows)
    if results["gaps"]:
        lines += ["", ("## Paired gaps at the last turn (a - b over the same problems; interval excluding 0: a real "
                  "difference)"), ""]
        lines += _table(["suite", "gap", *(HEAD[m] for m in METRICS)],
                        [[g["suite"], g["what"], *(_ci(g[m], m, signed=True) for m in METRICS)]
                         for g in results["gaps"]])
    lines += ["", "## Where the answers of the last turn are lost", "",
              ("format: cut at the token budget or failing on the solution ABI (no code, export, signature); compile: "
              "other compile errors; correctness: wrong results, crashes, timeouts, hacks; speed: correct but not "
              "faster than eager. Shares of all the turn's answers."), ""]
    rows = []
    for c in results["cells"]:
        f = c["funnel"][-1]
        rows.append([c["suite"], c["role"], str(f["answers"]),
                     *(f"{f[b]:.0%}" for b in ("format", "compile", "correctness", "unchecked", "speed", "fast")),
                     limiting(f)])
    lines += _table(["suite", "policy", "answers", "format", "compile", "correctness", "unchecked", "speed", "fast",
                     "most lost at"], rows)
    if results["rl"]:
        lines += ["", "## RL runs", ""]
        lines += _table(["run", "terms", "steps", "reward (first 10 -> last 10 steps)", "correct per turn",
                         "equal-reward groups (last 10)", "KL (last 10)"],
                        [[k, str(r["terms"]), f"{r['steps_done']}/{r['steps']}",
                          f"{r['reward_first10']:.3f} -> {r['reward_last10']:.3f}",
                          " / ".join(f"{a:.2f} -> {b:.2f}" for a, b in zip(r["correct_first10"], r["correct_last10"])),
                          f"{r['equal_share_last10']:.0%}", f"{r['kl_last10']:.4f}"] for k, r in results["rl"].items()])
    s = results["sft"]
    if s:
        fmt = lambda v: "-" if v is None else f"{v:.3f}"
        lines += ["", "## SFT", "", f"{s['steps_done']} steps ({fmt(s['epochs'])} epochs), val loss "
                  f"{fmt(s['val_loss_initial'])} -> best {fmt(s['val_loss_best'])} -> last {fmt(s['val_loss_last'])}"
                  + (f"; stopped early at step {s['stopped_early_at']} (the val loss flattened)"
                     if s.get("stopped_early_at") is not None else "") + "."]
    if pngs:
        lines += ["", "Plots: " + ", ".join(f"`{p}`" for p in pngs) + "."]
    return "\n".join(lines) + "\n"


def _adapter_row(d: Path) -> list[str]:
    cfg = json.loads((d / "adapter_config.json").read_text())
    size = sum(f.stat().st_size for f in d.iterdir())
    return [f"`{d.name}`", str(cfg["r"]), ",".join(cfg["target_modules"]), f"{size / 1e6:.1f} MB"]


def adapters_markdown(root: Path, plan: Plan, written: list[Path]) -> str:
    e, model = plan.evals, plan.model
    what = {f"sft-{plan.tag}": "SFT", f"rl_full_s0-{plan.tag}": "SFT + RL on the full reward, seed 0",
            f"rl_full_s1-{plan.tag}": "SFT + RL on the full reward, seed 1",
            f"rl_abl_s0-{plan.tag}": "SFT + RL without the structural and ranker terms, seed 0"}
    rows = [[*_adapter_row(d)[:1], what.get(d.name, d.name), *_adapter_row(d)[1:]] for d in written]
    name = written[0].name if written else f"sft-{plan.tag}"
    from cudaperf_jax import assets
    where = (f"the registered model, `python -m cudaperf_jax.assets fetch {model}`: its GGUF dequantised, which is "
             "what they were trained on" if assets.is_model_name(model) else "the model they were trained on")
    lines = [f"# Adapters of the method's chain on {model} (issue 45)", "",
             (f"LoRA adapters in PEFT's format (adapter_config.json + adapter_model.safetensors, float32) for `{model}` "
             f"({where}). Each one is the whole policy on that base: an RL adapter, trained on the SFT "
             "policy, is stored combined with the SFT adapter under it (rank r_sft + r_rl, "
             "cudaperf_jax.models.peft_io.combine_peft_dirs; the chain evaluated them applied one after the other, "
             "which rounds the merged bfloat16 weights once more). Written by `python experiments/method.py publish`."),
             "", *_table(["adapter", "policy", "rank", "targets", "size"], rows), "",
             ("Evaluate one as the chain did (the same cells, settings and seeds as the results table; needs the task "
             "dataset `python -m experiments.build_dataset --out=data/tasks --validate_sample=-1`):"), "", "```bash",
             (f"python benchmarks/zero_shot.py --models {model}+adapters/{name} --labels {name} "
             f"--tasks data/tasks {' '.join(e.ladder_args())} --out runs/eval-{name}"), "```", "",
             ("or with experiments.evaluate on KernelBench level 1 (one run's sampling seed, so samples differ from "
             "the table's; the metrics are the same):"), "", "```bash",
             (f"python -m experiments.evaluate --config.model={model}+adapters/{name} "
             "--config.suite=data/kernelbench/level1 --config.dtype=bfloat16 "
             f"--config.rollout.samples_per_task={e.samples} --config.rollout.turns={e.turns} "
             f"--config.rollout.temperature={e.temperature} --config.rollout.top_p={e.top_p} "
             f"--config.rollout.prompt={e.prompt} --config.rollout.max_new_tokens={e.max_new_tokens} "
             f"--config.rollout.max_prompt_tokens={e.max_prompt_tokens} --config.rollout.gen_batch={e.gen_batch} "
             f"--config.pass_k='{tuple(sorted({1, 2, e.samples}))}' --workdir=runs/eval-{name}"), "```", ""]
    return "\n".join(lines)
