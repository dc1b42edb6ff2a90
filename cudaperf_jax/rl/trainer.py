"""The RL loop: multi-turn rollouts judged by the harness, unified reward, GRPO across turns, Orbax checkpoints.

    summary = train(config, workdir)     # config: an ml_collections ConfigDict as experiments/configs/rl.py builds

One step: the next `tasks_per_step` tasks of a seeded permutation of the task list (the data position is the
step number); `rollout` over `rollout.turns` turns (the reference policy's log-probs of turn t are computed
while the harness judges turn t); returns discounted over turns and advantages normalised per task and turn
(grpo.multi_turn_advantages); a GRPO update over micro-batches with gradient accumulation (a token mean over the
whole step); the sampler takes the new weights. Every `save_every` steps the run directory checkpoints params,
optimizer state, RNG key and step, so a run killed at any point resumes to the same metrics (keys under
`time/` are wall-clock and differ).
"""
from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from cudaperf_jax.models.config import ConfigError
from cudaperf_jax.rewards.unified import TERMS, RewardConfig, UnifiedReward
from cudaperf_jax.rl import grpo
from cudaperf_jax.rl.batch import micro_batches
from cudaperf_jax.rl.rollout import RolloutConfig, rollout
from cudaperf_jax.rl.train_step import sequence_logprobs, split_model


def load_tasks(c) -> list:
    """The training tasks: `tasks.suite` (a directory of task JSON files) or `tasks.dataset` (a built dataset,
    filtered by `tasks.split`), at most `tasks.max_tasks` (0: all)."""
    from kernels_harness.tasks.errors import TaskError
    from kernels_harness.tasks.schema import load_task
    repo = Path(__file__).resolve().parents[2]
    if c.dataset:
        from kernels_harness.datasets import shards
        tasks = list(shards.load(c.dataset, split=c.split or None))
    else:
        root = Path(c.suite)
        root = root if root.is_absolute() else repo / root
        files = sorted(root.glob("*.json"))
        if not files:
            raise FileNotFoundError(f"no task files (*.json) in {root}; point --config.tasks.suite at a directory")
        tasks = [load_task(f) for f in files]
        if c.split:
            tasks = [t for t in tasks if getattr(t, "split", None) in (None, "", c.split)]
    if c.max_tasks:
        tasks = tasks[:c.max_tasks]
    if not tasks:
        raise TaskError(f"no tasks selected (split {c.split!r}); check --config.tasks")
    return tasks


class RLConfigError(ConfigError):
    """A field of the RL config that cannot be used; the message names it and what to pass (a ConfigError, so
    experiments.launch reports it in one line)."""


def validate(c) -> None:
    """Checks the fields of an RL run's config (experiments/configs/rl.py) before anything is loaded; raises
    RLConfigError in one sentence."""
    def need(ok, msg):
        if not ok:
            raise RLConfigError(msg)

    def whole(v, low):
        return isinstance(v, int) and not isinstance(v, bool) and v >= low

    def real(v):
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    try:
        need(whole(c.steps, 1) and whole(c.tasks_per_step, 1) and whole(c.save_every, 1) and whole(c.prompt_bucket, 1),
             "steps, tasks_per_step, save_every and prompt_bucket must be integers >= 1")
        g = c.grpo
        need(real(g.lr) and g.lr > 0, f"grpo.lr={g.lr!r}: must be a positive number")
        need(whole(g.micro_batch, 1) and whole(g.epochs, 1), "grpo.micro_batch and grpo.epochs must be integers >= 1")
        need(all(real(g[k]) and g[k] >= 0 for k in ("weight_decay", "max_grad_norm", "clip_eps_high", "kl_beta")),
             "grpo.weight_decay, max_grad_norm, clip_eps_high and kl_beta must be numbers >= 0")
        need(real(g.gamma) and 0 <= g.gamma <= 1, f"grpo.gamma={g.gamma!r}: must be in [0, 1]")
        need(g.loss in grpo.POLICY_LOSSES, f"grpo.loss={g.loss!r}: choose one of {sorted(grpo.POLICY_LOSSES)}")
        need(g.advantage in grpo.ADVANTAGES, f"grpo.advantage={g.advantage!r}: choose one of {sorted(grpo.ADVANTAGES)}")
        for section, build in (("rollout", lambda: rollout_config(c.rollout)), ("grpo", lambda: loss_config(c.grpo)),
                               ("reward", lambda: RewardConfig.from_config(c.reward))):
            try:
                build()
            except (ValueError, TypeError, KeyError, AttributeError) as e:
                raise RLConfigError(f"config.{section}: {' '.join(str(e).split())[:200]}") from None
    except (TypeError, KeyError, AttributeError) as e:  # a comparison with a string, a missing section
        raise RLConfigError(f"the RL config is not usable ({type(e).__name__}: {' '.join(str(e).split())[:160]}); "
                            "start from experiments/configs/rl.py") from None


def rollout_config(c) -> RolloutConfig:
    return RolloutConfig(**{f.name: c[f.name] for f in dataclasses.fields(RolloutConfig) if f.name in c})


def loss_config(c) -> grpo.LossConfig:
    return grpo.LossConfig(clip_eps=c.clip_eps, clip_eps_high=c.clip_eps_high if c.clip_eps_high > 0 else None,
                           kl_beta=c.kl_beta, aggregation="token_mean")


def make_update(graphdef, others, optimizer, loss_name: str, lcfg: grpo.LossConfig):
    """(grad_fn, apply_fn): grad_fn(params, mb, scale) -> (grads, aux) of scale * the micro-batch's token-mean
    loss; apply_fn(params, opt_state, grads) -> (params, opt_state, grad_norm), state donated."""
    loss_fn = grpo.POLICY_LOSSES[loss_name]

    @jax.jit
    def grad_fn(params, mb, scale):
        def objective(p):
            model = nnx.merge(graphdef, p, others)
            logp = sequence_logprobs(model, mb["tokens"], mb["positions"], mb["kv_mask"])
            value, aux = loss_fn(logp, mb["old_logp"], mb["ref_logp"], mb["advantages"], mb["loss_mask"], lcfg)
            return value * scale, aux
        (value, aux), grads = jax.value_and_grad(objective, has_aux=True)(params)
        return grads, {"loss": value, **aux}

    @jax.jit
    def logp_fn(params, tokens, positions, kv_mask):
        return sequence_logprobs(nnx.merge(graphdef, params, others), tokens, positions, kv_mask)

    def apply(params, opt_state, grads):
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, optax.global_norm(grads)

    return grad_fn, jax.jit(apply, donate_argnums=(0, 1)), logp_fn


def _turn_metrics(ro, names) -> dict:
    m = {}
    for t in range(ro.cfg.turns):
        cs = ro.turn(t)
        rs = [c.result for c in cs]
        m[f"turn{t}/compiled"] = float(np.mean([r.compiled for r in rs]))
        m[f"turn{t}/correct"] = float(np.mean([r.status == "ok" and bool(r.correct) for r in rs]))
        sp = [r.speedup for r in rs if r.status == "ok" and r.speedup]
        m[f"turn{t}/speedup_geomean"] = float(np.exp(np.mean(np.log(sp)))) if sp else 0.0
        m[f"turn{t}/fast_1"] = float(np.mean([r.status == "ok" and (r.speedup or 0) > 1 for r in rs]))
        for j, nm in enumerate(names):
            m[f"turn{t}/reward/{nm}"] = float(np.mean([c.rewards[j] for c in cs]))
        m[f"turn{t}/completion_tokens"] = float(np.mean([len(c.completion_ids) for c in cs]))
        m[f"turn{t}/truncated"] = float(np.mean([not c.stopped for c in cs]))  # cut at max_new_tokens
    return m


class Trainer:
    """State and pieces of one RL run; `train` drives it."""

    def __init__(self, config, run, policy=None):
        """policy: an already built (Decoder, tokenizer) instead of loading config.model (benchmarks)."""
        from cudaperf_jax.generation.sampler import Sampler
        from cudaperf_jax.models.loading import load_policy
        c = config
        self.c, self.run = c, run
        self.tasks = load_tasks(c.tasks)
        self.rcfg = rollout_config(c.rollout)
        self.reward = UnifiedReward(RewardConfig.from_config(c.reward))
        model, tok = policy if policy is not None else load_policy(c.model, dtype=c.dtype, progress=False)
        from cudaperf_jax.kernels import DecodeKernels
        self.sampler = Sampler(model, tok, prompt_bucket=c.prompt_bucket,
                               kernels=DecodeKernels.from_config(c.get("decode_kernels")))
        self.graphdef, params, self.others = split_model(model)
        lcfg = loss_config(c.grpo)
        self.use_ref = lcfg.kl_beta > 0
        self.ref_params = jax.tree.map(jnp.copy, params) if self.use_ref else None
        tx = [optax.clip_by_global_norm(c.grpo.max_grad_norm)] if c.grpo.max_grad_norm > 0 else []
        self.optimizer = optax.chain(*tx, optax.adamw(c.grpo.lr, weight_decay=c.grpo.weight_decay))
        self.grad_fn, self.apply_fn, self.logp_fn = make_update(self.graphdef, self.others, self.optimizer,
                                                                c.grpo.loss, lcfg)
        self.state = {"params": params, "opt_state": self.optimizer.init(params),
                      "rng": jax.random.key_data(jax.random.PRNGKey(c.seed)), "step": jnp.int32(-1)}

    def tasks_of(self, step: int) -> list:
        """The data position is the step: tasks_per_step tasks of a per-epoch seeded permutation."""
        n, per = len(self.tasks), self.c.tasks_per_step
        out = []
        for j in range(step * per, (step + 1) * per):
            epoch, i = divmod(j, n)
            order = np.random.default_rng([self.c.seed, epoch]).permutation(n)
            out.append(self.tasks[order[i]])
        return out

    def _ref_hook(self, turn, cands):
        """Reference log-probs of a turn's candidates, computed while the harness judges them."""
        for mb in micro_batches(cands, np.zeros(len(cands)), self.sampler.pad_id, self.c.grpo.micro_batch,
                                self.c.prompt_bucket):
            lp = np.asarray(self.logp_fn(self.ref_params, mb["tokens"], mb["positions"], mb["kv_mask"]))
            for row, (ci, w) in enumerate(zip(mb["index"], mb["weight"])):
                if w > 0:
                    m = mb["loss_mask"][row] > 0
                    cands[ci].ref_logprobs = lp[row][m].astype(np.float32)

    def step(self, step: int, pool) -> dict:
        c = self.c
        t_start = time.perf_counter()
        params = self.state["params"]
        self.sampler.update_weights(nnx.merge(self.graphdef, params, self.others))
        key = jax.random.fold_in(jax.random.wrap_key_data(self.state["rng"]), step)
        seed = int(jax.random.randint(key, (), 0, 2**31 - 1))
        tasks = self.tasks_of(step)
        ro = rollout(self.sampler, pool, tasks, self.rcfg, seed, reward=self.reward,
                     on_generated=self._ref_hook if self.use_ref else None,
                     log=lambda line: print(f"[rl] step {step} {line}", flush=True))
        rewards = ro.rewards("total")
        judged = ro.judged()
        returns, adv, equal = grpo.multi_turn_advantages(rewards, c.grpo.gamma, c.grpo.advantage, judged)
        adv = np.asarray(adv).reshape(-1)          # candidates are in (turn, task, sample) order
        t0 = time.perf_counter()
        mbs = micro_batches(ro.candidates, adv, self.sampler.pad_id, c.grpo.micro_batch, c.prompt_bucket)
        total_tokens = float(sum(mb["loss_mask"].sum() for mb in mbs))
        aux_sum: dict = {}
        for _ in range(c.grpo.epochs):
            grads = None
            for mb in mbs:
                scale = float(mb["loss_mask"].sum()) / max(total_tokens, 1.0)
                g, aux = self.grad_fn(params, mb, jnp.float32(scale))
                grads = g if grads is None else jax.tree.map(jnp.add, grads, g)
                for k_, v in aux.items():   # token-weighted means of the diagnostics
                    aux_sum[k_] = aux_sum.get(k_, 0.0) + float(v) * (1.0 if k_ == "loss" else scale) / c.grpo.epochs
            params, opt_state, gnorm = self.apply_fn(params, self.state["opt_state"], grads)
            self.state["params"], self.state["opt_state"] = params, opt_state
        jax.block_until_ready(params)
        update_s = time.perf_counter() - t0
        self.state["step"] = jnp.int32(step)
        total_s = time.perf_counter() - t_start
        m = {"reward/total": float(rewards.mean()), "return/turn0": float(np.asarray(returns)[0].mean()),
             "equal_groups": equal, "groups": int(rewards.shape[0] * rewards.shape[1]),
             "unchecked": int((~judged).sum()),
             "grad_norm": float(gnorm), **{k_: v for k_, v in aux_sum.items()},
             "tasks": ",".join(t.id for t in tasks), **_turn_metrics(ro, ro.reward_names)}
        for t_ in TERMS:
            m[f"reward/{t_}"] = float(ro.rewards(t_).mean())
        for k_, v in self.reward.notes([cand.result for cand in ro.candidates]).items():
            m[f"notes/{k_}"] = v
        sec = ro.seconds
        m.update({"time/generation_s": sec["generation"], "time/harness_s": sec["harness"],
                  "time/harness_wait_s": sec["harness_wait"], "time/ref_s": sec["hook"], "time/update_s": update_s,
                  "time/step_s": total_s, "time/tokens_per_s": ro.generated_tokens / max(sec["generation"], 1e-9),
                  "time/idle_s": max(0.0, total_s - sec["generation"] - sec["harness_wait"] - sec["hook"] - update_s)})
        return m


def train(config, workdir) -> dict:
    """Runs (or resumes) the RL run of `config` in `workdir`; returns the summary (also summary.json)."""
    from tqdm import tqdm

    from cudaperf_jax.experiment import open_run
    from kernels_harness.run.pool import HarnessPool
    validate(config)
    run = open_run(workdir, config, name="train_rl")
    tr = Trainer(config, run)
    restored = run.restore(tr.state)  # first: a damaged newest checkpoint is set aside, the one before used
    if restored is not None:
        tr.state = dict(restored)
    start = run.restore_step()
    c = config
    rows = []
    with HarnessPool(backend=c.harness.backend, workers=c.harness.workers or None,
                     compile_workers=c.harness.compile_workers or None, seed=c.harness.seed) as pool:
        bar = tqdm(range(start, c.steps), desc="rl steps", initial=start, total=c.steps)
        for step in bar:
            m = tr.step(step, pool)
            run.log(step, m)
            rows.append(m)
            bar.set_postfix(reward=f"{m['reward/total']:.3f}", correct=f"{m['turn0/correct']:.2f}")
            if (step + 1) % c.save_every == 0 or step + 1 == c.steps:
                run.save(step, tr.state)
        bar.close()
    if c.get("export_policy", True):   # WORKDIR/policy: a Hugging Face directory (experiments.evaluate loads it)
        from cudaperf_jax.models.hf_io import save_hf_dir
        save_hf_dir(nnx.merge(tr.graphdef, tr.state["params"], tr.others), Path(workdir) / "policy",
                    tokenizer=tr.sampler.tokenizer, dtype="float32")
    metrics = run.metrics()
    summary = {"steps": c.steps, "resumed_at": start, "final": metrics[-1] if metrics else {}}
    run.write_json("summary.json", summary)
    plot_metrics(metrics, c.rollout.turns, Path(workdir) / "rl_curves.png")
    run.close()
    return summary


def plot_metrics(metrics: list[dict], turns: int, path: Path) -> None:
    """Reward and correctness per step and per turn, as a PNG."""
    if not metrics:
        return
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
    steps = [m["step"] for m in metrics]
    for t in range(turns):
        axes[0].plot(steps, [m.get(f"turn{t}/reward/total", np.nan) for m in metrics], marker="o", label=f"turn {t}")
        axes[1].plot(steps, [m.get(f"turn{t}/correct", np.nan) for m in metrics], marker="o", label=f"turn {t}")
    axes[0].set_title("mean reward")
    axes[1].set_title("fraction correct")
    for ax in axes:
        ax.set_xlabel("RL step")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def trained_policy(config, workdir):
    """(Decoder, tokenizer) of the run in `workdir`: config.model with the latest checkpoint's parameters."""
    from cudaperf_jax.experiment import open_run
    validate(config)
    run = open_run(workdir, config, name="train_rl")
    tr = Trainer(config, run)
    restored = run.restore(tr.state)
    run.close()
    if restored is None:
        raise FileNotFoundError(f"{workdir} holds no RL checkpoint; run experiments.train_rl into it first")
    return nnx.merge(tr.graphdef, restored["params"], tr.others), tr.sampler.tokenizer
