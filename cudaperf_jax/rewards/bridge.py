"""The bridge from JAX to the harness: token arrays in, reward arrays out, through an ordered host callback.

    client = HarnessClient(pool, tasks, tokenizer, UnifiedReward(RewardConfig()), prompt="scaffold")
    @jax.jit
    def f(tokens, lengths, task_idx):           # int32[B, N], int32[B], int32[B]
        return client.jax_rewards(tokens, lengths, task_idx)     # float32[B, C], C = len(client.names)
    client.reward_fn(prompts, completions, task_id=[...])       # TRL-style -> list[float] (the total)
    client.evaluate([(task, source), ...])                       # plain Python callers: [EvalResult]
    client.reward_rows(results, tasks, sources)                  # float32[n, C] of judged candidates

The one way candidates reach the harness and the reward: the RL trainer and experiments/evaluate.py hand a client to
rl.rollout (it evaluates a turn's candidates in a thread, then rewards them with reward_rows), TRL-style trainers
call reward_fn, jitted code calls jax_rewards.

On the host (`jax.experimental.io_callback(..., ordered=True)`: the callbacks of one program run in program
order and are never dropped or duplicated by XLA), each sample's first `lengths[b]` tokens are decoded, the
CUDA source is extracted (cudaperf_jax.prompts.extract_solution), the batch is evaluated in one HarnessPool
call (the pool compiles in parallel and runs candidates in its own worker processes) and the unified reward's
components are returned, one row per sample, columns in `client.names` order. `client.last` keeps the
EvalResults and sources of the latest call, for logging.
"""
from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from cudaperf_jax.prompts import DEFAULT as DEFAULT_PROMPT
from cudaperf_jax.prompts import extract_solution, task_prompt
from cudaperf_jax.rewards.unified import COMPONENTS, RewardConfig, UnifiedReward


class HarnessClient:
    """Evaluates candidates for JAX code (jax_rewards) and for Python code (evaluate, rewards, reward_fn)."""

    def __init__(self, pool, tasks: Sequence, tokenizer=None, reward: UnifiedReward | None = None,
                 prompt: str = DEFAULT_PROMPT):
        """prompt: the prompt variant that posed the tasks (reward_fn matches prompts to tasks through it)."""
        self.pool = pool
        self.tasks = list(tasks)
        self.tokenizer = tokenizer
        self.reward = reward or UnifiedReward(RewardConfig())
        self.names = tuple(self.reward.names) if hasattr(self.reward, "names") else COMPONENTS
        self.prompt = prompt
        self.last: dict = {"results": [], "sources": []}
        self._by_id = {t.id: t for t in self.tasks}
        self._by_prompt: dict | None = None   # prompt text -> task, built on the first reward_fn call without ids
        self._lock = threading.Lock()   # one harness batch at a time (the pool is shared)

    # ---- plain Python callers -----------------------------------------------------------------
    def evaluate(self, items: list) -> list:
        """[(Task, source)] -> [EvalResult] (the HarnessPool's, unchanged)."""
        with self._lock:
            return self.pool.evaluate(items)

    def reward_rows(self, results: list, tasks: list, sources: list) -> np.ndarray:
        """float32[n, C] reward components (columns in `names` order) of judged candidates."""
        comps = self.reward(results, tasks, sources)
        self.last = {"results": list(results), "sources": list(sources)}
        return np.stack([np.asarray(comps[k], np.float32) for k in self.names], axis=1)

    def rewards(self, tasks: list, sources: list) -> tuple[np.ndarray, list]:
        """(float32[n, C] reward components, EvalResults) for parallel lists of tasks and CUDA sources."""
        results = self.evaluate(list(zip(tasks, sources)))
        return self.reward_rows(results, tasks, sources), results

    def _task_of(self, prompt, task_id=None):
        if task_id is not None:
            if task_id not in self._by_id:
                raise KeyError(f"task {task_id!r} is not among this client's {len(self.tasks)} tasks")
            return self._by_id[task_id]
        if isinstance(prompt, list):   # chat messages: the first user message poses the task
            prompt = next((m["content"] for m in prompt if m.get("role") == "user"), "")
        if self._by_prompt is None:
            self._by_prompt = {task_prompt(t, self.prompt).strip(): t for t in self.tasks}
        t = self._by_prompt.get(str(prompt).strip())
        if t is None:
            raise KeyError("a prompt matches none of the client's tasks; pass task_id=[...] beside the prompts")
        return t

    def reward_fn(self, prompts: list, completions: list, task_id: list | None = None, **_) -> list[float]:
        """TRL-style reward function: the total unified reward per completion (strings or chat message lists)."""
        texts = [c if isinstance(c, str) else c[-1]["content"] for c in completions]
        tasks = [self._task_of(p, None if task_id is None else task_id[i]) for i, p in enumerate(prompts)]
        comps, _ = self.rewards(tasks, [extract_solution(t) for t in texts])
        return [float(x) for x in comps[:, self.names.index("total")]]

    # ---- JAX callers ------------------------------------------------------------------------
    def host_rewards(self, tokens, lengths, task_idx) -> np.ndarray:
        """The host side of jax_rewards: numpy in, float32[B, C] out."""
        if self.tokenizer is None:
            raise ValueError("decoding token arrays needs a tokenizer; pass one to HarnessClient")
        tokens, lengths, task_idx = np.asarray(tokens), np.asarray(lengths), np.asarray(task_idx)
        texts = [self.tokenizer.decode(tokens[b, :int(lengths[b])].tolist(), skip_special_tokens=True)
                 for b in range(tokens.shape[0])]
        bad = [int(i) for i in task_idx if not 0 <= int(i) < len(self.tasks)]
        if bad:
            raise IndexError(f"task indices {bad[:5]} outside [0, {len(self.tasks)})")
        tasks = [self.tasks[int(i)] for i in task_idx]
        comps, _ = self.rewards(tasks, [extract_solution(t) for t in texts])
        return comps

    def jax_rewards(self, tokens, lengths, task_idx):
        """float32[B, C] from tokens int32[B, N], lengths int32[B], task_idx int32[B]; usable inside jit."""
        import jax
        from jax.experimental import io_callback
        shape = jax.ShapeDtypeStruct((tokens.shape[0], len(self.names)), np.float32)
        return io_callback(self.host_rewards, shape, tokens, lengths, task_idx, ordered=True)
