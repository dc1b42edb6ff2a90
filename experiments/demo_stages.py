"""The demo's training stages after the zero-shot run (experiments/demo.py): SFT, RL over 2 turns, held-out eval."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np


def sft_stage(config, workdir, model_path: str) -> str:
    """A few SFT steps into WORKDIR/sft; returns the policy path the RL stage starts from."""
    if not config.sft_steps:
        return model_path
    try:
        from cudaperf_jax.sft.train import train as sft_train
        from experiments.configs import sft_cpu as sft_configs
    except ImportError:
        print("[demo] SFT stage skipped: cudaperf_jax.sft is not in this checkout; RL starts from the base policy",
              file=sys.stderr)
        return model_path
    c = sft_configs.get_config()
    # the CPU-sized SFT config (a few short rows of a few tasks), whatever the backend: the demo is a miniature
    for k, v in {"model": model_path, "steps": config.sft_steps, "seed": config.seed, "dtype": config.dtype,
                 "eval_every": config.sft_steps, "checkpoint_every": config.sft_steps}.items():
        if k in c:
            c[k] = v
    c.data.seq_len = max(c.data.seq_len, config.max_prompt_tokens + config.max_new_tokens)   # a whole turn fits
    # rows past 1,024 tokens recompute activations in the backward pass: SmolLM2's step at 2,304 tokens without
    # passed 13 GB of host memory (2026-12-07)
    c.remat = c.remat or c.data.seq_len > 1024
    c.lora.rank = config.lora_rank
    c.export_merged = False   # with LoRA the adapter alone; the RL stage loads the SFT run from its checkpoint
    if config.lora_rank:   # adapters move only through A @ B: LoRA's usual rate is ~10x a full fine-tune's
        c.optim.learning_rate = 10 * c.optim.learning_rate
    out = Path(workdir) / "sft"
    sft_train(c, out)
    print(f"[demo] SFT: {config.sft_steps} steps into {out}", file=sys.stderr)
    return str(out)


def rl_config(config, policy: str):
    from experiments.configs import rl_tiny
    c = rl_tiny.get_config()
    c.model, c.dtype, c.seed = policy, config.dtype, config.seed
    c.steps, c.tasks_per_step, c.save_every = config.rl_steps, config.rl_tasks_per_step, 1
    c.tasks.update(suite=config.suite, dataset="", split="", max_tasks=config.max_tasks)
    c.rollout.update(samples_per_task=config.samples_per_task, turns=config.rl_turns,
                     max_new_tokens=config.max_new_tokens, max_prompt_tokens=config.max_prompt_tokens,
                     temperature=config.temperature, top_p=config.top_p, top_k=config.top_k, prompt=config.prompt)
    c.grpo.update(lr=config.rl_lr, micro_batch=config.samples_per_task * config.rl_turns, kl_beta=config.rl_kl_beta)
    c.harness.update(backend=config.backend, workers=config.workers, compile_workers=config.workers)
    c.lora.rank = config.lora_rank
    c.export_merged = False   # the adapter alone (PEFT, a few MB): the merged 0.5B would be 2 GB of float32
    return c


def rl_stage(config, workdir, policy: str) -> dict:
    if not config.rl_steps:
        return {}
    from cudaperf_jax.rl.trainer import train
    summary = train(rl_config(config, policy), Path(workdir) / "rl")
    print(f"[demo] RL: {config.rl_steps} step(s) over {config.rl_turns} turn(s) into {Path(workdir) / 'rl'} "
          "(rl_curves.png)", file=sys.stderr)
    return {k: v for k, v in summary["final"].items() if k.startswith(("turn", "reward/"))}


def held_out_tasks(config) -> list:
    """`eval_tasks` tasks of the test split's families (never trained on)."""
    from kernels_harness.datasets import registry
    fams = [f for f in config.eval_families.split(",") if f]
    return [t for t in registry.generate(families=fams, limit_per_family=8 * config.eval_tasks) if t.split == "test"]


def eval_stage(config, workdir, policy: str) -> dict:
    """Multi-turn rollouts of the base (SFT) policy and the RL policy on held-out tasks, per turn: eval.json
    ({"tasks", "per_turn": {"start/turn0": {n, compiled, correct, reward}, ...}}), eval_candidates.jsonl (every
    judged candidate, experiments.evaluate's record format plus "policy") and eval.png."""
    if not config.eval_tasks:
        return {}
    from cudaperf_jax.generation.sampler import Sampler
    from cudaperf_jax.models.loading import load_policy
    from cudaperf_jax.rewards.bridge import HarnessClient
    from cudaperf_jax.rewards.unified import RewardConfig, UnifiedReward
    from cudaperf_jax.rl.rollout import RolloutConfig, rollout
    from cudaperf_jax.rl.trainer import trained_policy
    from kernels_harness.run.pool import HarnessPool
    path = Path(workdir) / "eval.json"
    if path.exists():
        return json.loads(path.read_text())
    from cudaperf_jax.models.loading import load_tokenizer
    from cudaperf_jax.prompts import ChatTokens
    conv = ChatTokens(load_tokenizer(policy), prompt=config.prompt)
    tasks = [t for t in held_out_tasks(config) if len(conv.first_prompt(t)) <= config.max_prompt_tokens - 64]
    tasks = tasks[:config.eval_tasks]
    if not tasks:
        print("[demo] evaluation skipped: no held-out task's prompt fits max_prompt_tokens", file=sys.stderr)
        return {}
    rcfg = RolloutConfig(samples_per_task=config.samples_per_task, turns=config.turns,
                         max_new_tokens=config.max_new_tokens, max_prompt_tokens=config.max_prompt_tokens,
                         temperature=config.temperature, top_p=config.top_p, top_k=config.top_k, prompt=config.prompt)
    policies = {"start": lambda: load_policy(policy, dtype=config.dtype)}
    if config.rl_steps:
        policies["rl"] = lambda: trained_policy(rl_config(config, policy), Path(workdir) / "rl")
    from cudaperf_jax.eval.report import record
    reward = UnifiedReward(RewardConfig())
    table, records = {}, []
    with HarnessPool(backend=config.backend, workers=config.workers, seed=config.seed) as pool:
        for name, load in policies.items():
            model, tok = load()
            client = HarnessClient(pool, tasks, tok, reward, prompt=config.prompt)
            ro = rollout(Sampler(model, tok), client, tasks, rcfg, seed=config.seed + 7, progress=True,
                         log=lambda line, n=name: print(f"[demo] held-out {n} {line}", file=sys.stderr, flush=True))
            records += [{"policy": name, **record(tasks[c.task_index], c.turn, c.sample, c.result, text=c.text,
                                                  source=c.source, truncated=not c.stopped)} for c in ro.candidates]
            for t in range(rcfg.turns):
                rs = [c.result for c in ro.turn(t)]
                table[f"{name}/turn{t}"] = {
                    "n": len(rs), "compiled": float(np.mean([r.compiled for r in rs])),
                    "correct": float(np.mean([r.status == "ok" for r in rs])),
                    "reward": float(ro.rewards()[t].mean())}
    out = {"tasks": [t.id for t in tasks], "per_turn": table}
    with open(Path(workdir) / "eval_candidates.jsonl", "w") as f:   # before eval.json, which marks the stage done
        f.writelines(json.dumps(r) + "\n" for r in records)
    path.write_text(json.dumps(out, indent=2))
    _plot(table, Path(workdir) / "eval.png")
    return out


def _plot(table: dict, path: Path) -> None:
    """Held-out reward and fraction correct per policy and turn, each bar's value written (0 shows as 0.00)."""
    from cudaperf_jax.experiment.plotting import bars, empty_note, pyplot
    plt = pyplot()
    if plt is None:
        return
    fig, axes = plt.subplots(1, 2, figsize=(8.5, 3.4))
    names = list(table)
    n = sorted({v.get("n", 0) for v in table.values()})
    bars(axes[0], names, [v["reward"] for v in table.values()], ylabel="mean reward", fmt="{:.3f}")
    axes[0].set_title("held-out mean reward", fontsize=9)
    bars(axes[1], names, [v["correct"] for v in table.values()], ylabel="fraction correct", ylim=(0.0, 1.0),
         color="tab:green")
    axes[1].set_title("held-out fraction correct", fontsize=9)
    if not any(v["correct"] for v in table.values()):
        empty_note(axes[1], "no held-out candidate was correct")
    fig.suptitle(f"Held-out tasks: policy/turn, {'/'.join(map(str, n))} candidates per bar", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
