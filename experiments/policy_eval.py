"""A policy's evaluation as a library: multi-turn rollouts of a loaded policy on a suite, judged by a harness pool.

    sampler = load_sampler("qwen2.5-coder-1.5b", dtype="bfloat16")           # once per model, for any number of runs
    cfg = RolloutConfig(samples_per_task=4, turns=2, temperature=0.2, top_p=0.95, prompt="plain", gen_batch=32)
    ev = evaluate_policy(sampler, pool, tasks, cfg, seed=0)                    # PolicyEval
    ev.records        # one cudaperf_jax.eval.report.record per answer, with its ABI category ("abi")
    ev.judged, ev.deduplicated                                                 # answers sent to the harness / copied
    print(time_line(ev))     # generation s and tokens/s, harness s, per verdict n and mean execution s, ...

Each distinct (task, source) of a run is judged once (cudaperf_jax.eval.dedupe): at a low temperature many samples
repeat. experiments/evaluate.py (--config.model=...) and benchmarks/zero_shot.py are built on it. It lives on top of
cudaperf_jax because it joins the rollout (rl) with the evaluation records (eval), two packages of one layer.
"""
from __future__ import annotations

import dataclasses
import time


@dataclasses.dataclass
class PolicyEval:
    """What evaluate_policy returns: records (dicts, in rollout order), the rollout's candidates, the harness's
    judged and deduplicated counts, and seconds (generation, harness, harness_wait, hook, total)."""
    records: list
    candidates: list
    judged: int
    deduplicated: int
    seconds: dict
    generated_tokens: int = 0


def load_sampler(model: str, dtype: str = "float32", kernels=None, progress: bool = True):
    """A cudaperf_jax.generation.sampler.Sampler of the policy at `model` (a checkpoint path or a name
    load_policy knows) with its tokenizer; kernels: a cudaperf_jax.kernels.DecodeKernels (None: the default)."""
    from cudaperf_jax.generation.sampler import Sampler
    from cudaperf_jax.models.loading import load_policy
    policy, tok = load_policy(model, dtype=dtype, progress=progress)
    return Sampler(policy, tok, kernels=kernels)


def evaluate_policy(sampler, evaluator, tasks: list, cfg, seed: int, *, dedupe: bool = True, progress: bool = False,
                    log=None) -> PolicyEval:
    """Rollouts of `sampler` on `tasks` (cfg: a RolloutConfig), each answer judged by `evaluator` (a HarnessPool or
    anything with evaluate([(Task, source)]) -> [EvalResult]) through one rewards.bridge.HarnessClient (the reward
    path of training, with the default unified reward); see the module docstring. log: one line per turn."""
    from cudaperf_jax.eval.abi import classify
    from cudaperf_jax.eval.dedupe import DedupingEvaluator
    from cudaperf_jax.eval.report import record
    from cudaperf_jax.rewards.bridge import HarnessClient
    from cudaperf_jax.rl.rollout import rollout
    ev = DedupingEvaluator(evaluator) if dedupe else evaluator
    client = HarnessClient(ev, tasks, sampler.tokenizer, prompt=cfg.prompt)
    t0 = time.perf_counter()
    ro = rollout(sampler, client, tasks, cfg, seed=seed, progress=progress, log=log)
    records = []
    for c in ro.candidates:
        task = tasks[c.task_index]
        rec = record(task, c.turn, c.sample, c.result, text=c.text, source=c.source, truncated=not c.stopped)
        rec["abi"] = classify(task, c.source, c.result, truncated=not c.stopped)
        records.append(rec)
    judged = ev.judged if dedupe else len(records)
    return PolicyEval(records=records, candidates=list(ro.candidates), judged=judged,
                      deduplicated=ev.deduplicated if dedupe else 0,
                      seconds={**ro.seconds, "total": time.perf_counter() - t0}, generated_tokens=ro.generated_tokens)


def harness_breakdown(candidates: list) -> dict:
    """Where the harness's time went, over the distinct (task, source) answers of `candidates` (repeats took their
    first verdict): per verdict the count and the seconds of execution (checks and timing in a worker) and of
    compilation; how many torch.compile baselines were measured, reused or failed (per config); how many workers
    were replaced after a job (each costs a new worker's start); and the longest execution.
    Returns {"verdicts": {status: {"n", "execute_s", "compile_s"}}, "compile_baseline": {...},
    "compile_baseline_errors": [up to 3 distinct reasons torch.compile failed], "workers_replaced", "max_execute_s"}."""
    seen, verdicts, compile_from, compile_errors = set(), {}, {}, []
    replaced, longest = 0, 0.0
    for c in candidates:
        r = c.result
        if r is None or (c.task_index, c.source) in seen:
            continue
        seen.add((c.task_index, c.source))
        s = r.seconds or {}
        v = verdicts.setdefault(r.status, {"n": 0, "execute_s": 0.0, "compile_s": 0.0})
        v["n"] += 1
        v["execute_s"] += float(s.get("execute", 0.0))
        v["compile_s"] += float(s.get("compile", 0.0))
        replaced += int(s.get("worker_replaced", 0.0))
        longest = max(longest, float(s.get("execute", 0.0)))
        for cfg in r.configs or []:
            how = getattr(cfg, "compile_baseline_from", "")
            if how:
                compile_from[how] = compile_from.get(how, 0) + 1
            if how == "failed" and len(compile_errors) < 3 and (cfg.error or "") not in compile_errors:
                compile_errors.append(cfg.error or "")
    for v in verdicts.values():
        v["execute_s"], v["compile_s"] = round(v["execute_s"], 2), round(v["compile_s"], 2)
    return {"verdicts": dict(sorted(verdicts.items())), "compile_baseline": compile_from,
            "compile_baseline_errors": compile_errors, "workers_replaced": replaced, "max_execute_s": round(longest, 2)}


def time_line(ev: PolicyEval) -> str:
    """One line: generation seconds and tokens/s, harness seconds, per verdict the count and mean execution
    seconds, torch.compile baselines measured/reused, workers replaced."""
    s = ev.seconds
    gen, harness = s.get("generation", 0.0), s.get("harness", 0.0)
    tps = ev.generated_tokens / gen if gen > 0 else 0.0
    b = harness_breakdown(ev.candidates)
    verdicts = ", ".join(f"{k} {v['n']} ({v['execute_s'] / max(v['n'], 1):.1f} s)" for k, v in b["verdicts"].items())
    comp = ", ".join(f"{k} {v}" for k, v in sorted(b["compile_baseline"].items())) or "none"
    if b["compile_baseline_errors"]:   # why torch.compile failed (up to 3 distinct messages): fast_1 compile needs it
        comp += " (" + "; ".join(b["compile_baseline_errors"]) + ")"
    return (f"generation {gen:.0f} s ({ev.generated_tokens} tokens, {tps:.0f} tok/s); harness {harness:.0f} s for "
            f"{ev.judged} judged ({ev.deduplicated} repeats): {verdicts or 'nothing'} [verdict n (mean execution)]; "
            f"longest {b['max_execute_s']:.0f} s; torch.compile baselines (configs): {comp}; workers replaced "
            f"{b['workers_replaced']}")
