"""SFT examples: (the task's first-turn prompt, a verified implementation as the answer) in token ids.

    tasks = load_tasks(cfg.data, "train")
    times = load_times(cfg.data.times)
    examples, stats = build_examples(tasks, times, "fastest", encode_prompts, tokenizer, eos_id)

The prompt is exactly what the RL rollout's first turn feeds the sampler: `prompts.get(prompt).messages(task)`
through the tokenizer's chat template, encoded by `Sampler.encode(..., chat=True)` (the caller passes that
function as `encode_prompts`), so SFT prompts are token-identical to RL's. The answer is the implementation
in one ```cuda block (what `prompts.extract_solution` reads back) followed by the end-of-turn token.

Which implementation answers (`responses`), among those verified on the H200 (labelled correct, and
agreeing with the baseline's output on every measured config of data/times/h200):
  fastest      the one with the smallest geometric-mean time over the task's configs
  all_correct  every verified one (one example each)
  baseline     the task's baseline implementation (when verified)
Tasks without a verified implementation are skipped and counted.

Refinement examples (`refine` > 0, a fraction of the tasks): the second turn of the RL rollout, so that SFT does
not leave the refinement prompt out of distribution (on the H100 run of 2026-12-06 an SFT policy whose first
answers compiled 44% of the time compiled 3% at turn 1: it rewrote them from scratch). The prompt is
`prompts.get(prompt).messages(task, [(earlier answer, its feedback, its verdict)])`, the answer the same verified implementation as
above. The earlier answer is one of the task's labelled-wrong implementations (feedback: a wrong result) or a
slower verified one (feedback: correct, its H200 times against the baseline's, as kernels_harness.feedback words
them); where there is neither it is the answer itself, which then teaches to keep a correct, fastest answer.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from cudaperf_jax import prompts
from cudaperf_jax.sft.config import DataConfig, SFTConfigError
from kernels_harness.datasets import registry
from kernels_harness.datasets.times import MeasuredTimes
from kernels_harness.datasets.times import load as load_times_store
from kernels_harness.tasks.schema import Implementation, Task, describe_config

REPO = Path(__file__).resolve().parents[2]


class NoExamples(SFTConfigError):
    """The data selection gives no usable example; the message says what to change."""


@dataclasses.dataclass(frozen=True)
class Example:
    """One supervised example: prompt int32[P] (chat-templated), response int32[R] (answer + end token)."""
    task_id: str
    implementation: str
    prompt: np.ndarray
    response: np.ndarray

    def __len__(self) -> int:
        return len(self.prompt) + len(self.response)


def resolve(path: str) -> Path:
    """An absolute path as is; a relative one from the working directory if it exists there, else from the repo."""
    p = Path(path).expanduser()
    if p.is_absolute() or p.exists():
        return p
    return REPO / p


def load_times(path: str) -> MeasuredTimes:
    return load_times_store(resolve(path))


def load_tasks(data: DataConfig, split: str, limit: int = 0) -> list[Task]:
    """The dataset's tasks of `split` (train | val | test) for the configured tracks/families, in registry order."""
    tasks = [t for t in registry.generate(seed=data.dataset_seed, families=data.families or None,
                                          tracks=data.tracks) if t.split == split]
    return tasks[:limit] if limit else tasks


def answer_text(source: str) -> str:
    """The assistant answer for a solution: one ```cuda block (prompts.extract_solution returns `source`)."""
    return f"```cuda\n{source.strip()}\n```"


def task_rows(times: MeasuredTimes) -> dict[str, int]:
    """Task id -> row of the times arrays."""
    return {tid: k for k, tid in enumerate(times.index["task"])}


def verified_implementations(task: Task, times: MeasuredTimes, rows: dict[str, int] | None = None,
                             ) -> list[tuple[Implementation, float]]:
    """(implementation, geometric-mean H200 ms over the task's configs) for each verified implementation.

    rows: task_rows(times), computed once by callers that look up many tasks."""
    index = times.index
    row = (rows if rows is not None else task_rows(times)).get(task.id)
    if row is None:
        return []
    names = index["impls"][row]
    n_cfg = len(index["configs"][row])
    out = []
    for impl in task.implementations:
        if impl.expected != "correct" or impl.name not in names:
            continue
        i = names.index(impl.name)
        if index["expected"][row][i] != "correct":
            continue
        agrees = times.agrees[row, i, :n_cfg]
        ms = times.time_ms[row, i, :n_cfg]
        if not (agrees == 1).all() or not np.isfinite(ms).all() or (ms <= 0).any():
            continue
        out.append((impl, float(math.exp(np.mean(np.log(ms))))))
    return out


def pick_implementations(task: Task, times: MeasuredTimes, responses: str,
                         rows: dict[str, int] | None = None) -> list[Implementation]:
    """The answer implementation(s) of `task` for the `responses` mode (see the module docstring)."""
    ok = verified_implementations(task, times, rows)
    if responses == "all_correct":
        return [impl for impl, _ in ok]
    if responses == "baseline":
        return [impl for impl, _ in ok if impl.baseline][:1]
    if responses == "fastest":
        return [min(ok, key=lambda x: x[1])[0]] if ok else []
    raise ValueError(f"unknown responses mode {responses!r}")


def earlier_attempt(task: Task, answer: Implementation, times: MeasuredTimes, rng: np.random.Generator,
                    rows: dict[str, int] | None = None) -> tuple[Implementation, str, str]:
    """(an earlier answer to `task`, the harness-style feedback on it, its verdict) for a refinement example whose
    answer is `answer`: a labelled-wrong implementation or a slower verified one (picked at random), else `answer`
    itself."""
    from kernels_harness.feedback import make_feedback
    from kernels_harness.result import ConfigResult, EvalResult
    wrong = [i for i in task.implementations if i.expected == "wrong"]
    ok = {impl.name: impl for impl, _ in verified_implementations(task, times, rows)}
    slower = [i for n, i in ok.items() if n != answer.name]
    pool = [("wrong", i) for i in wrong] + [("ok", i) for i in slower]
    kind, prev = pool[int(rng.integers(len(pool)))] if pool else ("ok", answer)
    if kind == "wrong":
        c = int(rng.integers(len(task.configs)))
        out = task.outputs[0].name if task.outputs else "the output"
        res = EvalResult(task_id=task.id, backend="cuda", status="wrong", compiled=True,
                         error=f"config {c} ({describe_config(task.configs[c])}), trial 0: output {out!r} differs from "
                               "the reference")
        return prev, make_feedback(task, res), "wrong"
    row = (rows if rows is not None else task_rows(times))[task.id]
    names, n_cfg = times.index["impls"][row], len(times.index["configs"][row])
    base = times.index["baseline"][row]
    mine = times.time_ms[row, names.index(prev.name), :n_cfg]
    ref = times.time_ms[row, base, :n_cfg] if base is not None else [None] * n_cfg
    cfgs = [ConfigResult(index=k, config=dict(task.configs[k]), correct=True, time_ms=float(mine[k]),
                         baseline_ms=float(ref[k]) if ref[k] is not None and np.isfinite(ref[k]) else None)
            for k in range(min(n_cfg, len(task.configs)))]
    sp = [c.baseline_ms / c.time_ms for c in cfgs if c.baseline_ms]
    res = EvalResult(task_id=task.id, backend="cuda", status="ok", compiled=True, correct=True, configs=cfgs,
                     speedup=float(math.exp(np.mean(np.log(sp)))) if sp else None)
    return prev, make_feedback(task, res), "ok"


def build_examples(tasks: Sequence[Task], times: MeasuredTimes, responses: str,
                   encode_prompts: Callable[[list], list[list[int]]], tokenizer, eos_id: int,
                   refine: float = 0.0, seed: int = 0, prompt: str = prompts.DEFAULT) -> tuple[list[Example], dict]:
    """Examples for `tasks` and counts {tasks, examples, refinement, skipped_unverified, prompt_tokens,
    response_tokens}.

    encode_prompts: list of chat message lists -> token ids per prompt (the sampler's encode with chat=True).
    eos_id: the token that ends the answer (the one the sampler stops on).
    refine: the fraction of the picked (task, answer) pairs that also get a refinement example (module docstring),
    chosen with `seed`.
    prompt: the prompt variant (cudaperf_jax.prompts.PROMPTS) that poses the tasks, as in RL and evaluation.
    """
    if not 0.0 <= refine <= 1.0:
        raise SFTConfigError(f"data.refine={refine}: give a fraction between 0 and 1")
    rows = task_rows(times)
    picked = [(t, impl) for t in tasks for impl in pick_implementations(t, times, responses, rows)]
    skipped = len({t.id for t in tasks} - {t.id for t, _ in picked})
    rng = np.random.default_rng(seed)
    chosen = rng.random(len(picked)) < refine
    variant = prompts.get(prompt)
    convs = [(t, impl, variant.messages(t)) for t, impl in picked]
    for (t, impl), more in zip(picked, chosen):
        if more:
            prev, feedback, status = earlier_attempt(t, impl, times, rng, rows)
            convs.append((t, impl, variant.messages(t, [(answer_text(prev.source), feedback, status)])))
    encoded_prompts = encode_prompts([m for _, _, m in convs]) if convs else []
    answers = [answer_text(impl.source) for _, impl, _ in convs]
    encoded = tokenizer(answers, add_special_tokens=False)["input_ids"] if answers else []
    examples = [Example(t.id, impl.name, np.asarray(p, np.int32), np.asarray([*ids, eos_id], np.int32))
                for (t, impl, _), p, ids in zip(convs, encoded_prompts, encoded)]
    stats = {"tasks": len(tasks), "examples": len(examples), "refinement": int(chosen.sum()),
             "skipped_unverified": skipped,
             "prompt_tokens": int(sum(len(e.prompt) for e in examples)),
             "response_tokens": int(sum(len(e.response) for e in examples))}
    return examples, stats
