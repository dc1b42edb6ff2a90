"""What the method's chain runs (experiments/method.py): its stages in order, each one's command, what it needs, when
it is done, and the evaluation settings, for one policy model and one size.

    plan = Plan.of("qwen2.5-coder-1.5b", "full")     # or a HF directory / .gguf file; size "dev": a CPU smoke run
    for st in plan.stages(): st.name, st.kind, st.needs, st.command(plan, repo, minutes_left)

Every command runs with the chain's ROOT as its working directory and names paths relative to it (tasks/, base/,
runs/, cells/), so the run directories, their config.json and the evaluation cells' keys do not depend on where ROOT
is: `restore` can seed a ROOT anywhere. Stages:

    tasks            build_dataset --validate_sample=-1 (machine-local: rebuilt on each machine, a few seconds)
    base-T           the policy model as a Hugging Face directory (bfloat16 on a GPU): loads in seconds where the
                     GGUF dequantises in ~70 s; machine-local
    zero_shot-T      the zero-shot ladder's cells (benchmarks/zero_shot.py) of the model itself, by its name: the
                     ladder's own cells, reused when `restore` is given its cells.tgz
    sft-T            SFT (experiments/configs/method_sft.py), run directory runs/sft-T
    ranker           the pairwise ranker of the full reward (train split only), runs/ranker
    rl_full_sS-T     RL on the full reward, seed S (experiments/configs/method_rl.py), runs/rl_full_sS-T
    rl_abl_s0-T      RL without the structural and ranker terms (correct,speed,penalty), same budget and seed
    eval_<policy>    the policy through the same ladder cells: KernelBench level 1, the test split, val

T is the model's tag (1.5b, 0.5b, or the file's name). Evaluations use the RL's number of turns.
"""
from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path

from cudaperf_jax.eval.suites import model_label
from cudaperf_jax.prompts import DEFAULT as DEFAULT_PROMPT

SIZES = ("full", "dev")
TAGS = {"qwen2.5-coder-1.5b": "1.5b", "qwen2.5-coder-0.5b": "0.5b"}
RL_RUNS = (("rl_full_s0", "correct,speed,structure,ranker,penalty", 0),
           ("rl_abl_s0", "correct,speed,penalty", 0),
           ("rl_full_s1", "correct,speed,structure,ranker,penalty", 1))
# Order: what the goals compare first (zero-shot, SFT, RL full seed 0, its ablation), the second seed last.
ORDER = ("tasks", "base", "zero_shot", "sft", "eval_sft", "ranker", "rl_full_s0", "eval_rl_full_s0", "rl_abl_s0",
         "eval_rl_abl_s0", "rl_full_s1", "eval_rl_full_s1")


class PlanError(ValueError):
    """A chain setting that cannot be used; the message says what to pass."""


def model_tag(model: str) -> str:
    """The short name of a policy model in stage names: 1.5b / 0.5b for the registered Qwen models, else its file or
    directory name."""
    if model in TAGS:
        return TAGS[model]
    p = Path(model)
    name = p.stem if p.suffix == ".gguf" else p.name
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-") or "model"


@dataclasses.dataclass(frozen=True)
class EvalSettings:
    """The evaluation of every policy of the chain: benchmarks/zero_shot.py's cells (the zero-shot ladder), so the
    zero-shot stage is the ladder itself and every other policy is measured exactly like it."""
    suites: tuple[str, ...] = ("kernelbench", "test", "val")
    kernelbench_tasks: int = 100          # all of level 1
    test_tasks: int = 96                  # the test split (families never trained on), family-balanced
    val_tasks: int = 48                   # a fixed family-balanced subset of val
    samples: int = 4
    turns: int = 2                        # the RL's rollout turns (experiments/configs/method_rl.py)
    temperature: float = 0.2
    top_p: float = 0.95
    max_new_tokens: int = 1024
    max_prompt_tokens: int = 4096
    prompt: str = DEFAULT_PROMPT          # the prompt of SFT and RL
    gen_batch: int = 16                   # the ladder's default (80 GB H100 beside the harness)
    chunk_tasks: int = 16                 # a cell's unit of work never lost; the ladder's (zero_shot.CHUNK_TASKS):
                                          # it is in a cell's key (part j samples with seed + 7919 j), so the
                                          # ladder's restored cells are this chain's zero-shot cells only if equal
    backend: str = "auto"
    workers: int = 0
    seed: int = 0

    def ladder_args(self, suites: tuple[str, ...] | None = None) -> list[str]:
        """benchmarks/zero_shot.py's arguments for these settings (every field that makes a cell's key)."""
        return [f"--suites={','.join(suites or self.suites)}", f"--prompts={self.prompt}",
                f"--kernelbench_tasks={self.kernelbench_tasks}", f"--test_tasks={self.test_tasks}",
                f"--val_tasks={self.val_tasks}", f"--samples={self.samples}", f"--turns={self.turns}",
                f"--temperature={self.temperature}", f"--top_p={self.top_p}",
                f"--max_new_tokens={self.max_new_tokens}", f"--max_prompt_tokens={self.max_prompt_tokens}",
                f"--gen_batch={self.gen_batch}", f"--chunk_tasks={self.chunk_tasks}", f"--backend={self.backend}",
                f"--workers={self.workers}", f"--seed={self.seed}"]


DEV_EVAL = EvalSettings(kernelbench_tasks=1, test_tasks=1, val_tasks=1, samples=2, max_new_tokens=16, gen_batch=0,
                        chunk_tasks=1, backend="cpu", workers=1)


@dataclasses.dataclass(frozen=True)
class Stage:
    """One stage: `kind` (tasks | base | ranker | sft | rl | eval), what it needs finished first, whether it is
    machine-local (never packed: rebuilt on each machine), the policy whose run directory it writes (training) or
    evaluates (eval), and the seconds it needs left to be worth starting."""
    name: str
    kind: str
    needs: tuple[str, ...] = ()
    local: bool = False
    policy: str = ""
    min_seconds: float = 0.0
    terms: str = ""
    seed: int = 0


@dataclasses.dataclass(frozen=True)
class Plan:
    """The chain of one model at one size; `stages()` in the order they run."""
    model: str
    size: str
    tag: str
    evals: EvalSettings
    base_dtype: str

    @classmethod
    def of(cls, model: str, size: str = "full") -> Plan:
        if size not in SIZES:
            raise PlanError(f"--size {size!r}: choose one of {', '.join(SIZES)}")
        return cls(model=model, size=size, tag=model_tag(model), evals=EvalSettings() if size == "full" else DEV_EVAL,
                   base_dtype="bfloat16" if size == "full" else "float32")

    def to_json(self) -> dict:
        return {"model": self.model, "size": self.size, "tag": self.tag, "base_dtype": self.base_dtype,
                "evals": dataclasses.asdict(self.evals)}

    # ---- names -------------------------------------------------------------------------------------
    def policies(self) -> list[str]:
        """The trained policies (run directories under runs/, one chain file each), SFT first; the ranker too."""
        return [f"sft-{self.tag}", "ranker", *(f"{name}-{self.tag}" for name, _, _ in RL_RUNS)]

    def eval_model(self, policy: str) -> str:
        """The model argument (relative to ROOT) that evaluates `policy`: the model itself for zero_shot-T, else the
        base with the SFT adapter (and the RL adapter) applied on top."""
        sft = f"base/{self.tag}+runs/sft-{self.tag}/adapter"
        if policy == f"zero_shot-{self.tag}":
            return self.model
        return sft if policy == f"sft-{self.tag}" else f"{sft}+runs/{policy}/adapter"

    def cell_label(self, policy: str) -> str:
        """The ladder's cell name of a policy (zero-shot: the ladder's own, from the model's name)."""
        if policy == f"zero_shot-{self.tag}":
            return model_label(self.model)
        return policy

    def stages(self) -> list[Stage]:
        t, full = self.tag, self.size == "full"
        train_s, eval_s = (240.0, 150.0) if full else (0.0, 0.0)
        out = {"tasks": Stage("tasks", "tasks", local=True),
               "base": Stage(f"base-{t}", "base", local=True, min_seconds=120.0 if full else 0.0),
               "zero_shot": Stage(f"eval_zero_shot-{t}", "eval", ("tasks",), policy=f"zero_shot-{t}",
                                  min_seconds=eval_s),
               "sft": Stage(f"sft-{t}", "sft", (f"base-{t}",), policy=f"sft-{t}", min_seconds=train_s),
               "eval_sft": Stage(f"eval_sft-{t}", "eval", ("tasks", f"base-{t}", f"sft-{t}"), policy=f"sft-{t}",
                                 min_seconds=eval_s),
               "ranker": Stage("ranker", "ranker", policy="ranker", min_seconds=180.0 if full else 0.0)}
        for name, terms, seed in RL_RUNS:
            needs = ("tasks", f"base-{t}", f"sft-{t}") + (("ranker",) if "ranker" in terms else ())
            out[name] = Stage(f"{name}-{t}", "rl", needs, policy=f"{name}-{t}", min_seconds=train_s, terms=terms,
                              seed=seed)
            out[f"eval_{name}"] = Stage(f"eval_{name}-{t}", "eval", ("tasks", f"base-{t}", f"sft-{t}", f"{name}-{t}"),
                                        policy=f"{name}-{t}", min_seconds=eval_s)
        return [out[k] for k in ORDER]

    def select(self, names: list[str]) -> list[Stage]:
        """The stages named (with or without the model tag), in chain order; PlanError names an unknown one."""
        stages = self.stages()
        by = {s.name: s for s in stages} | {s.name.removesuffix(f"-{self.tag}"): s for s in stages}
        by["zero_shot"] = by[f"eval_zero_shot-{self.tag}"]
        bad = [n for n in names if n not in by]
        if bad:
            raise PlanError(f"unknown stage(s) {', '.join(bad)}; the stages are "
                            f"{', '.join(s.name.removesuffix('-' + self.tag) for s in stages)}")
        chosen = {by[n].name for n in names}
        return [s for s in stages if s.name in chosen]

    # ---- commands ----------------------------------------------------------------------------------
    def command(self, st: Stage, repo: Path, minutes_left: float, suites: tuple[str, ...] | None = None) -> list[str]:
        """The argv of a stage, run from ROOT. minutes_left: the ladder stops between parts before it (the driver
        kills every stage at the budget anyway); suites: evaluate only these now."""
        py, size, cache = sys.executable, self.size, "--compilation_cache=.jax_cache"
        if st.kind == "tasks":
            return [py, "-m", "experiments.build_dataset", "--out=tasks", "--validate_sample=-1", cache]
        if st.kind == "base":
            return [py, "-m", "experiments.export", f"--model={self.model}", f"--out=base/{self.tag}",
                    f"--dtype={self.base_dtype}"]
        if st.kind == "ranker":
            variant = "" if size == "full" else ":small"
            args = ["--config.compare_features_only=False"]
            if size == "dev":
                args += ["--config.steps=20", "--config.families=elementwise,reduction", "--config.limit_per_family=20",
                         "--config.log_every=5", "--config.checkpoint_every=10"]
            return [py, "-m", "experiments.train_ranker", f"--config={repo}/experiments/configs/ranker.py{variant}",
                    *args, "--workdir=runs/ranker", cache]
        if st.kind == "sft":
            return [py, "-m", "experiments.train_sft", f"--config={repo}/experiments/configs/method_sft.py:{size}",
                    f"--config.model=base/{self.tag}", f"--workdir=runs/{st.policy}", cache]
        if st.kind == "rl":
            ranker = [] if "ranker" in st.terms else ["--config.reward.ranker_path="]
            return [py, "-m", "experiments.train_rl", f"--config={repo}/experiments/configs/method_rl.py:{size}",
                    f"--config.model=base/{self.tag}+runs/sft-{self.tag}/adapter", f"--config.seed={st.seed}",
                    f"--config.reward.terms={st.terms}", *ranker, f"--workdir=runs/{st.policy}", cache]
        if st.kind == "eval":
            label = self.cell_label(st.policy)
            return [py, str(repo / "benchmarks" / "zero_shot.py"), f"--models={self.eval_model(st.policy)}",
                    f"--labels={label}", "--tasks=tasks", *self.evals.ladder_args(suites), "--work=cells",
                    f"--out=ladder/{label}", f"--max_minutes={max(minutes_left, 0.05):.2f}", cache]
        raise PlanError(f"unknown stage kind {st.kind!r}")

    def cell_dirs(self, st: Stage, root: Path, suites: tuple[str, ...] | None = None) -> list[Path]:
        """The cell directories an eval stage fills."""
        label = self.cell_label(st.policy)
        return [root / "cells" / f"{label}__{self.evals.prompt}__{s}" for s in (suites or self.evals.suites)]
