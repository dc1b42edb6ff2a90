"""The RL loop: multi-turn rollouts judged by the harness, unified reward, GRPO across turns, Orbax checkpoints.

    summary = train(cfg, workdir)     # cfg: an rl.config.RLConfig (a ConfigDict is converted by from_configdict)

One step: the next `tasks_per_step` tasks of a seeded permutation of the task list (the data position is the
step number); `rollout` over `rollout.turns` turns, every candidate judged and rewarded through one
rewards.bridge.HarnessClient (the reference policy's log-probs of turn t are computed while the harness judges turn
t); returns discounted over turns and advantages normalised per task and turn (grpo.multi_turn_advantages); the
update of the training core (training.step): each micro-batch accumulated at its own bucketed length into on-device
gradient sums, one optimizer update per epoch (a token mean over the whole step); the sampler takes the new weights.
The mesh of `mesh` holds the policy, the sampler's caches and the update's state. Every `save_every` steps the run
directory checkpoints what is trained, optimizer state, RNG key and step, so a run killed at any point resumes to the
same metrics (keys under `time/` are wall-clock and differ).

LoRA (`lora.rank` > 0): only the adapters are trained and checkpointed, the base is frozen in the compute dtype; the
reference policy is the base itself (the same graph with the adapters zeroed, lora.zero_adapters: no second copy of
the weights); the sampler decodes from merged weights (lora.merge after each update: new arrays for the targeted
kernels only, no recompilation, the decode kernels still apply). At rank 0 the reference is a copy of the start
parameters. The run directory's policy.json records the base and the LoRA config, so models.loading.load_policy
(workdir) gives the trained policy (adapters merged); WORKDIR/policy and WORKDIR/adapter are the exports.
"""
from __future__ import annotations

import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from cudaperf_jax.experiment.config import from_configdict
from cudaperf_jax.models import lora
from cudaperf_jax.rewards.unified import TERMS, UnifiedReward
from cudaperf_jax.rl import grpo
from cudaperf_jax.rl.batch import micro_batches
from cudaperf_jax.rl.config import RLConfig, TasksConfig
from cudaperf_jax.rl.objective import TRAIN_KEYS, grpo_objective, make_logprob_fn
from cudaperf_jax.rl.plots import plot_metrics
from cudaperf_jax.rl.rollout import rollout
from cudaperf_jax.training import (
    init_train_state,
    make_optimizer,
    make_train_step,
    mesh_of,
    next_dropout_key,
    place_batch,
    run_state,
    stack,
    with_adapters,
)


def typed(config) -> RLConfig:
    """An RLConfig as is; a ConfigDict or dict converted (and validated) by from_configdict."""
    return config if isinstance(config, RLConfig) else from_configdict(RLConfig, config)


def load_tasks(c: TasksConfig) -> list:
    """The training tasks: `tasks.suite` (a directory of task JSON files) or `tasks.dataset` (a built dataset,
    filtered by `tasks.split`), at most `tasks.max_tasks` (0: all)."""
    from kernels_harness.tasks.errors import TaskError
    from kernels_harness.tasks.schema import load_task
    repo = Path(__file__).resolve().parents[2]
    if c.suite:
        root = Path(c.suite)
        root = root if root.is_absolute() else repo / root
        files = sorted(root.glob("*.json"))
        if not files:
            raise FileNotFoundError(f"no task files (*.json) in {root}; point --config.tasks.suite at a directory")
        tasks = [load_task(f) for f in files]
        if c.split:
            tasks = [t for t in tasks if getattr(t, "split", None) in (None, "", c.split)]
    else:
        from kernels_harness.datasets import shards
        tasks = list(shards.load(c.dataset, split=c.split or None))
    if c.max_tasks:
        tasks = tasks[:c.max_tasks]
    if not tasks:
        raise TaskError(f"no tasks selected (split {c.split!r}); check --config.tasks")
    return tasks


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

    def __init__(self, cfg: RLConfig, run, policy=None):
        """policy: an already built (Decoder, tokenizer) instead of loading cfg.model (benchmarks)."""
        from cudaperf_jax.generation.sampler import Sampler
        from cudaperf_jax.models.loading import load_policy, write_run_policy
        from cudaperf_jax.models.sharding import shard_model
        self.cfg, self.run = cfg, run
        self.tasks = load_tasks(cfg.tasks)
        self.mesh = mesh_of(cfg.mesh)
        if policy is None:   # the base of a LoRA run is stored in the compute dtype (training.base_param_dtype)
            model, tok = load_policy(cfg.model, dtype=cfg.dtype, mesh=self.mesh, progress=False)
            write_run_policy(run.workdir, model, tok, base=cfg.model, lora=cfg.lora)
        else:
            model, tok = policy
            if self.mesh is not None:
                shard_model(model, self.mesh)
        model, trained = with_adapters(model, cfg.lora, rngs=nnx.Rngs(cfg.seed))
        self.reward = UnifiedReward(cfg.reward)
        self.sampler = Sampler(lora.merged_model(model), tok, mesh=self.mesh, prompt_bucket=cfg.prompt_bucket,
                               kernels=cfg.decode_kernels)
        self.optimizer, _ = make_optimizer(cfg.grpo.optim(), cfg.steps)
        self.graphdef, params, opt_state, self.rest = init_train_state(model, self.optimizer, trained=trained,
                                                                      mesh=self.mesh)
        objective = grpo_objective(cfg.grpo, remat=cfg.remat, attention=cfg.attention)
        self.update = make_train_step(self.graphdef, self.optimizer, objective, mesh=self.mesh)
        self.logp_fn = make_logprob_fn(self.graphdef, attention=cfg.attention)
        self.use_ref = cfg.grpo.kl_beta > 0
        self.ref_params = self.reference(params) if self.use_ref else None
        self.state = run_state(params, opt_state, cfg.seed)

    def reference(self, params):
        """The reference policy's trained state (with self.rest: the start policy). LoRA: the adapters zeroed, so the
        reference is the base itself and holds no copy of its weights; rank 0: a copy of the start parameters."""
        return lora.zero_adapters(params) if self.cfg.lora.on else jax.tree.map(jnp.copy, params)

    def sampler_weights(self) -> nnx.State:
        """The sampler's weights for the current parameters: lora.merge (adapters folded into the base's targeted
        kernels, the other arrays shared with self.rest) under LoRA, the policy's own state at rank 0."""
        if self.cfg.lora.on:
            return lora.merge(self.graphdef, self.state["params"], self.rest)
        return nnx.state(nnx.merge(self.graphdef, self.state["params"], self.rest))

    def client(self, pool):
        """The one reward path of the run: a HarnessClient over `pool` and the training tasks."""
        from cudaperf_jax.rewards.bridge import HarnessClient
        return HarnessClient(pool, self.tasks, self.sampler.tokenizer, self.reward, prompt=self.cfg.rollout.prompt)

    def tasks_of(self, step: int) -> list:
        """The data position is the step: tasks_per_step tasks of a per-epoch seeded permutation."""
        n, per = len(self.tasks), self.cfg.tasks_per_step
        out = []
        for j in range(step * per, (step + 1) * per):
            epoch, i = divmod(j, n)
            order = np.random.default_rng([self.cfg.seed, epoch]).permutation(n)
            out.append(self.tasks[order[i]])
        return out

    def _ref_hook(self, turn, cands):
        """Reference log-probs of a turn's candidates, computed while the harness judges them."""
        for mb in micro_batches(cands, np.zeros(len(cands)), self.sampler.pad_id, self.cfg.grpo.micro_batch,
                                self.cfg.prompt_bucket):
            x = place_batch({k: mb[k] for k in ("tokens", "positions", "kv_mask")}, self.mesh)
            lp = np.asarray(self.logp_fn(self.ref_params, self.rest, x["tokens"], x["positions"], x["kv_mask"]))
            for row, (ci, w) in enumerate(zip(mb["index"], mb["weight"])):
                if w > 0:
                    m = mb["loss_mask"][row] > 0
                    cands[ci].ref_logprobs = lp[row][m].astype(np.float32)

    def _update(self, mbs: list[dict], dropout_key=None) -> dict:
        """`grpo.epochs` optimizer updates over the micro-batches (each accumulated at its own length); metrics:
        loss and the loss's diagnostics averaged over epochs, grad_norm of the last. dropout_key: the step's LoRA
        dropout key (micro-batch j of epoch e drops with fold_in(fold_in(key, e), j)), None: no dropout."""
        rows = []
        for e in range(self.cfg.grpo.epochs):
            params, opt_state = self.state["params"], self.state["opt_state"]
            acc = None
            for j, mb in enumerate(mbs):
                key = None if dropout_key is None else jax.random.fold_in(jax.random.fold_in(dropout_key, e), j)
                acc = self.update.accumulate(params, self.rest, acc, stack([{k: mb[k] for k in TRAIN_KEYS}]), rng=key)
            params, opt_state, m = self.update.apply(params, opt_state, acc)
            self.state["params"], self.state["opt_state"] = params, opt_state
            rows.append(jax.device_get(m))
        out = {k: float(np.mean([r[k] for r in rows])) for k in rows[0] if k not in ("weight", "grad_norm")}
        return {**out, "grad_norm": float(rows[-1]["grad_norm"])}

    def step(self, step: int, client) -> dict:
        """One RL step (rollout, advantages, update) with `client` (a HarnessClient, see `client`); its metrics."""
        c = self.cfg
        t_start = time.perf_counter()
        self.sampler.update_weights(self.sampler_weights())
        rng, rollout_key = jax.random.split(self.state["rng"])       # the run's RNG advances every step
        rng, dropout_key = next_dropout_key(rng, c.lora)
        seed = int(jax.random.randint(rollout_key, (), 0, 2**31 - 1))
        tasks = self.tasks_of(step)
        ro = rollout(self.sampler, client, tasks, c.rollout, seed, on_generated=self._ref_hook if self.use_ref else None,
                     log=lambda line: print(f"[rl] step {step} {line}", flush=True), progress=True)
        rewards = ro.rewards("total")
        judged = ro.judged()
        returns, adv, equal = grpo.multi_turn_advantages(rewards, c.grpo.gamma, c.grpo.advantage, judged)
        adv = np.asarray(adv).reshape(-1)          # candidates are in (turn, task, sample) order
        t0 = time.perf_counter()
        mbs = micro_batches(ro.candidates, adv, self.sampler.pad_id, c.grpo.micro_batch, c.prompt_bucket)
        upd = self._update(mbs, dropout_key)
        jax.block_until_ready(self.state["params"])
        update_s = time.perf_counter() - t0
        self.state["rng"], self.state["step"] = rng, jnp.int32(step)
        total_s = time.perf_counter() - t_start
        m = {"reward/total": float(rewards.mean()), "return/turn0": float(np.asarray(returns)[0].mean()),
             "equal_groups": equal, "groups": int(rewards.shape[0] * rewards.shape[1]),
             "unchecked": int((~judged).sum()), **upd,
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
    """Runs (or resumes) the RL run of `config` (an RLConfig, or a ConfigDict converted by from_configdict) in
    `workdir`; returns the summary (also summary.json). config.json records the resolved config."""
    from tqdm import tqdm

    from cudaperf_jax.experiment import open_run
    from kernels_harness.run.pool import HarnessPool
    c = typed(config)
    run = open_run(workdir, c, name="train_rl")
    tr = Trainer(c, run)
    restored = run.restore(tr.state)  # first: a damaged newest checkpoint is set aside, the one before used
    if restored is not None:
        tr.state = dict(restored)
    start = run.restore_step()
    with HarnessPool(**c.harness.pool_kwargs()) as pool:
        client = tr.client(pool)
        bar = tqdm(range(start, c.steps), desc="rl steps", initial=start, total=c.steps)
        for step in bar:
            m = tr.step(step, client)
            run.log(step, m)
            bar.set_postfix(reward=f"{m['reward/total']:.3f}", correct=f"{m['turn0/correct']:.2f}")
            if (step + 1) % c.save_every == 0 or step + 1 == c.steps:
                run.save(step, tr.state)
        bar.close()
    if c.export_policy:   # WORKDIR/policy: a Hugging Face directory (experiments.evaluate loads it); WORKDIR/adapter
        from cudaperf_jax.models.export import export_policy
        from cudaperf_jax.models.loading import base_hf_id
        merged = Path(workdir) / "policy" if c.export_merged or not c.lora.on else None
        export_policy(nnx.merge(tr.graphdef, tr.state["params"], tr.rest), merged,
                      tokenizer=tr.sampler.tokenizer, dtype="float32", adapter_dir=Path(workdir) / "adapter",
                      adapter_dtype=c.adapter_dtype, base_model_name_or_path=base_hf_id(c.model), replace=True)
    metrics = run.metrics()
    summary = {"steps": c.steps, "resumed_at": start, "final": metrics[-1] if metrics else {}}
    run.write_json("summary.json", summary)
    plot_metrics(metrics, c.rollout.turns, Path(workdir) / "rl_curves.png")
    run.close()
    return summary


def trained_policy(config, workdir):
    """(Decoder, tokenizer) of the run in `workdir`: its latest checkpoint (adapters merged), as
    models.loading.load_policy(workdir) reads it, in config.dtype."""
    from cudaperf_jax.models.loading import load_policy
    c = typed(config)
    ckpts = Path(workdir) / "checkpoints"
    if not (ckpts.is_dir() and any(p.name.isdigit() for p in ckpts.iterdir())):
        raise FileNotFoundError(f"{workdir} holds no RL checkpoint; run experiments.train_rl into it first")
    return load_policy(workdir, dtype=c.dtype)
