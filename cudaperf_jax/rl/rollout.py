"""Multi-turn rollouts: G samples per task and turn over T refinement turns, each judged by the harness.

    cfg = RolloutConfig(samples_per_task=8, turns=3, max_new_tokens=512)
    client = HarnessClient(pool, tasks, tokenizer, UnifiedReward(RewardConfig()), prompt=cfg.prompt)
    ro = rollout(sampler, client, tasks, cfg, seed=0)
    ro.candidates[i]   # task_index, turn, sample, prompt_ids, completion_ids, logprobs, text, source, result, rewards
    ro.rewards()       # float32[T, K, G] total reward (ro.rewards("correct") for one component)

Candidates reach the harness and the reward through one rewards.bridge.HarnessClient: `client.evaluate` judges a
turn's candidates, `client.reward_rows` rewards them.

Turn t+1's prompt for sample g of task k is turn t's prompt ids + the completion ids the sampler produced +
the feedback turn (the harness feedback on that completion, rendered by the chat template and tokenized alone;
cudaperf_jax.prompts.conversation). The loss therefore sees exactly the ids the sampler saw and produced. When that
prompt would exceed `max_prompt_tokens`, the oldest exchanges are dropped (first prompt + the latest exchanges
that fit, still exact ids), and if not even the latest fits, the sample starts afresh from the first prompt
(`Candidate.context` says which). All K*G samples of a turn are generated in one sampler call; the harness
evaluates them in a thread as soon as generation ends, while `on_generated(turn, candidates)` (e.g. the
trainer's reference forward pass) runs on the main thread.
"""
from __future__ import annotations

import collections
import dataclasses
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import jax
import numpy as np

from cudaperf_jax.generation.sampler import SamplingParams
from cudaperf_jax.prompts import DEFAULT as DEFAULT_PROMPT
from cudaperf_jax.prompts import ChatTokens, extract_solution
from cudaperf_jax.prompts import get as get_prompt


@dataclasses.dataclass(frozen=True)
class RolloutConfig:
    """How rollouts sample. samples_per_task G, turns T; the sampling fields are those of SamplingParams."""
    samples_per_task: int = 8
    turns: int = 3
    max_new_tokens: int = 1024      # the dataset's verified answers: median 476 tokens, p90 965 (train split)
    max_prompt_tokens: int = 4096
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    feedback_chars: int = 1200      # harness feedback longer than this is cut (the start kept)
    history: str = "full"           # full: every earlier exchange (as fits) | last: only the latest exchange
    prompt: str = DEFAULT_PROMPT  # the prompt variant (cudaperf_jax.prompts.PROMPTS)
    gen_batch: int = 0              # sequences per sampler call at 4,096-token prompts, up to 8x for shorter ones
                                    # (prefill memory ~ batch x length^2); 0: a whole turn at once

    def __post_init__(self):
        if self.samples_per_task < 1 or self.turns < 1:
            raise ValueError("samples_per_task and turns must be at least 1")
        if self.max_new_tokens < 1 or self.max_prompt_tokens < 16:
            raise ValueError("need max_new_tokens >= 1 and max_prompt_tokens >= 16")
        if self.gen_batch < 0:
            raise ValueError("gen_batch must be >= 0 (0: a whole turn in one sampler call)")
        if self.history not in ("full", "last"):
            raise ValueError("history must be 'full' or 'last'")
        get_prompt(self.prompt)
        SamplingParams(max_new_tokens=self.max_new_tokens, temperature=self.temperature, top_p=self.top_p,
                       top_k=self.top_k)

    def sampling(self) -> SamplingParams:
        return SamplingParams(max_new_tokens=self.max_new_tokens, temperature=self.temperature, top_p=self.top_p,
                              top_k=self.top_k)


@dataclasses.dataclass
class Candidate:
    """One sampled answer. prompt_ids int32[P], completion_ids int32[N] (the stop token included when the
    sample stopped), logprobs float32[N] (the sampler's, temperature 1), rewards float32[C] (names in
    Rollout.reward_names)."""
    task_index: int
    turn: int
    sample: int
    prompt_ids: np.ndarray
    completion_ids: np.ndarray
    logprobs: np.ndarray
    text: str
    source: str
    result: object = None           # kernels_harness.result.EvalResult
    rewards: np.ndarray | None = None            # float32[C], columns in Rollout.reward_names
    stopped: bool = True            # False: cut at max_new_tokens
    context: str = "full"           # full | window | fresh (see the module docstring)
    ref_logprobs: np.ndarray | None = None   # float32[N] of the reference policy (the trainer fills them)


@dataclasses.dataclass
class Rollout:
    """Candidates in order (turn, task, sample); `seconds`: generation / harness / harness_wait / hook."""
    tasks: list
    cfg: RolloutConfig
    candidates: list
    reward_names: tuple = ()
    seconds: dict = dataclasses.field(default_factory=dict)
    generated_tokens: int = 0

    def at(self, turn: int, task: int, sample: int) -> Candidate:
        k, g = len(self.tasks), self.cfg.samples_per_task
        return self.candidates[(turn * k + task) * g + sample]

    def turn(self, t: int) -> list:
        n = len(self.tasks) * self.cfg.samples_per_task
        return self.candidates[t * n:(t + 1) * n]

    def rewards(self, component: str = "total") -> np.ndarray:
        """float32[T, K, G] of one reward component."""
        if component not in self.reward_names:
            raise KeyError(f"no reward component {component!r}; have {self.reward_names}")
        j = self.reward_names.index(component)
        r = np.array([c.rewards[j] for c in self.candidates], np.float32)
        return r.reshape(self.cfg.turns, len(self.tasks), self.cfg.samples_per_task)

    def judged(self) -> np.ndarray:
        """bool[T, K, G]: False where the harness established no verdict (`unchecked`: no reward, no gradient)."""
        ok = np.array([getattr(c.result, "status", None) != "unchecked" for c in self.candidates], bool)
        return ok.reshape(self.cfg.turns, len(self.tasks), self.cfg.samples_per_task)


def _cut(feedback: str, limit: int) -> str:
    feedback = (feedback or "").strip() or "The harness returned no feedback."
    return feedback if len(feedback) <= limit else feedback[:limit].rstrip() + " [...]"


def truncation_note(max_new_tokens: int) -> str:
    """The feedback sentence for an answer cut at the generation budget (it cannot compile as written)."""
    return (f"Your answer was cut off after {max_new_tokens} tokens before it ended; "
            "write a shorter complete solution.")


def _context(first: list[int], exchanges: list, limit: int, history: str) -> tuple[list[int], str]:
    """The prompt ids from the first prompt and the (completion, feedback) exchanges that fit in `limit`."""
    keep = exchanges if history == "full" else exchanges[-1:]
    mode = "full" if len(keep) == len(exchanges) else "window"
    while keep and len(first) + sum(len(c) + len(f) for c, f in keep) > limit:
        keep = keep[1:]
        mode = "window"
    if exchanges and not keep:
        return list(first), "fresh"
    ids = list(first)
    for c, f in keep:
        ids += list(c) + list(f)
    return ids, mode


def rollout(sampler, client, tasks: Sequence, cfg: RolloutConfig, seed: int, *,
            on_generated: Callable | None = None, progress: bool = False,
            log: Callable[[str], None] | None = None) -> Rollout:
    """Samples cfg.turns turns of cfg.samples_per_task answers per task; see the module docstring.

    sampler: a cudaperf_jax.generation.sampler.Sampler with a chat tokenizer. client: a rewards.bridge.HarnessClient
    (its `evaluate([(task, source)]) -> [EvalResult]` runs in a thread while `on_generated` runs; its
    `reward_rows(results, tasks, sources) -> float32[n, C]` and `names` (with "total") give the rewards). Keys: sample g of task k in turn t draws from
    fold_in(fold_in(PRNGKey(seed), t), k * G + g), so a rollout is a function of its seed. log: called with one
    line per turn (samples, tokens and seconds of generation, harness seconds, verdicts). progress: a bar over the
    turns, a bar over each sampler call's decode steps (tokens/s, ETA) and a line per sampler call and per turn on
    stderr (through `log` when given).
    """
    tasks = list(tasks)
    if not tasks:
        raise ValueError("rollout needs at least one task")
    conv = ChatTokens(sampler.tokenizer, stop_ids=sampler.cfg.eos_ids, prompt=cfg.prompt)
    k_n, g_n = len(tasks), cfg.samples_per_task
    firsts = [conv.first_prompt(t) for t in tasks]
    for t, ids in zip(tasks, firsts):
        if len(ids) > cfg.max_prompt_tokens:
            raise ValueError(f"task {t.id}'s first prompt has {len(ids)} tokens, more than max_prompt_tokens="
                             f"{cfg.max_prompt_tokens}; raise it or leave the task out")
    params = cfg.sampling()
    names = tuple(client.names)
    seconds = {"generation": 0.0, "harness": 0.0, "harness_wait": 0.0, "hook": 0.0}
    out: list[Candidate] = []
    exchanges = [[[] for _ in range(g_n)] for _ in range(k_n)]   # per task and sample: [(completion, feedback)]
    base = jax.random.PRNGKey(seed)
    generated = 0
    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=cfg.turns, desc="rollout turns", leave=False)
        if log is None:
            log = _stderr_line
    with ThreadPoolExecutor(1) as harness_thread:
        for turn in range(cfg.turns):
            prompts_, modes = [], []
            for k in range(k_n):
                for g in range(g_n):
                    ids, mode = _context(firsts[k], exchanges[k][g], cfg.max_prompt_tokens, cfg.history)
                    prompts_.append(ids)
                    modes.append(mode)
            keys = jax.vmap(lambda i, t=turn: jax.random.fold_in(jax.random.fold_in(base, t), i))(np.arange(k_n * g_n))
            t0 = time.perf_counter()
            gen_before = seconds["generation"]
            out_t, out_lp, lengths = _generate(sampler, prompts_, params, keys, cfg.gen_batch,
                                               label=f"decode turn {turn}" if progress else None,
                                               log=log if progress else None)
            seconds["generation"] += time.perf_counter() - t0
            cands = []
            for i, ids in enumerate(prompts_):
                k, g = divmod(i, g_n)
                n = int(lengths[i])
                comp = out_t[i, :n].astype(np.int32)
                text = sampler.tokenizer.decode(comp.tolist(), skip_special_tokens=True)
                cands.append(Candidate(task_index=k, turn=turn, sample=g, prompt_ids=np.asarray(ids, np.int32),
                                       completion_ids=comp, logprobs=out_lp[i, :n].astype(np.float32), text=text,
                                       source=extract_solution(text), stopped=conv.ended(comp.tolist()),
                                       context=modes[i]))
                generated += n
            items = [(tasks[c.task_index], c.source) for c in cands]
            t0 = time.perf_counter()
            future = harness_thread.submit(_timed, client.evaluate, items)
            if on_generated is not None:
                on_generated(turn, cands)
            t1 = time.perf_counter()
            seconds["hook"] += t1 - t0
            results, spent = future.result()
            seconds["harness_wait"] += time.perf_counter() - t1
            seconds["harness"] += spent
            rows = client.reward_rows(results, [tasks[c.task_index] for c in cands], [c.source for c in cands])
            for c, r, row in zip(cands, results, rows):
                c.result = r
                c.rewards = np.asarray(row, np.float32)
                text = _cut(r.feedback or r.status, cfg.feedback_chars)
                if not c.stopped:
                    text = truncation_note(cfg.max_new_tokens) + " " + text
                fb = conv.feedback_ids(tasks[c.task_index], c.completion_ids.tolist(), text, r.status)
                exchanges[c.task_index][c.sample].append((c.completion_ids.tolist(), fb))
            out += cands
            if log is not None:
                verdicts = collections.Counter(r.status for r in results)
                toks, gen_s = sum(len(c.completion_ids) for c in cands), seconds["generation"] - gen_before
                slow = max(results, key=_execute_s)   # a step waits for its slowest candidate
                log(f"turn {turn}: {len(cands)} samples, {toks} tokens in {gen_s:.1f} s ({toks / max(gen_s, 1e-9):.0f} "
                    f"tokens/s); harness {spent:.1f} s: "
                    + ", ".join(f"{k} {v}" for k, v in sorted(verdicts.items()))
                    + f"; slowest {slow.task_id} ({slow.status}) {_execute_s(slow):.1f} s")
            if bar:
                bar.update(1)
    if bar:
        bar.close()
    return Rollout(tasks=tasks, cfg=cfg, candidates=out, reward_names=names, seconds=seconds,
                   generated_tokens=generated)


def _execute_s(result) -> float:
    """Seconds a judged candidate spent executing in a worker (checks and timing)."""
    return float((result.seconds or {}).get("execute", 0.0))


GEN_BATCH_AT = 4096   # gen_batch is the chunk size at prompts of this many (padded) tokens
GEN_BATCH_MAX = 8     # shorter prompts take up to this many times gen_batch sequences per call


def chunk_size(gen_batch: int, padded: int) -> int:
    """Sequences per sampler call for prompts padded to `padded` tokens: gen_batch at GEN_BATCH_AT tokens, more for
    shorter prompts (the prefill's attention scores, its largest buffer, grow as batch x length^2), at most
    GEN_BATCH_MAX x gen_batch; a power of two times gen_batch, so a handful of batch shapes recur."""
    factor = 1
    while factor < GEN_BATCH_MAX and (2 * factor) * padded * padded <= GEN_BATCH_AT * GEN_BATCH_AT:
        factor *= 2
    return gen_batch * factor


def _chunks(sampler, prompts_: list, gen_batch: int) -> list[list[int]]:
    """Indices of the prompts per sampler call: in order of length, each call as large as chunk_size allows for its
    longest prompt (all at once when gen_batch is 0)."""
    if not gen_batch:
        return [list(range(len(prompts_)))]
    from cudaperf_jax.generation.sampler import padded_length
    order = sorted(range(len(prompts_)), key=lambda i: len(prompts_[i]))
    out, cur = [], []
    for i in order:
        size = chunk_size(gen_batch, padded_length(len(prompts_[i]), sampler.prompt_bucket))
        if cur and len(cur) + 1 > size:
            out.append(cur)
            cur = []
        cur.append(i)
    return out + ([cur] if cur else [])


def _stderr_line(line: str) -> None:
    import sys
    print(f"[rollout] {line}", file=sys.stderr, flush=True)


def _generate(sampler, prompts_: list, params, keys, gen_batch: int, label: str | None = None,
              log: Callable[[str], None] | None = None):
    """(tokens int32[n, N], logprobs float32[n, N], lengths int32[n]) of the prompts in sampler calls of
    `_chunks` (gen_batch 0: one call). A short chunk is padded with copies of its first prompt to its size's batch
    (so that the programs of a batch shape compile once); each sample's key is its own, whatever its chunk.
    label: a decode progress bar per sampler call (None: none); log: a line per sampler call when there are several."""
    n = len(prompts_)
    tokens, logprobs, lengths = [None] * n, [None] * n, np.zeros(n, np.int32)
    chunks = _chunks(sampler, prompts_, gen_batch)
    done = 0
    for c, idx in enumerate(chunks):
        t0 = time.perf_counter()
        which = (f"{label}, call {c + 1}/{len(chunks)}: {len(idx)} sequences" if len(chunks) > 1 else label) \
            if label else None
        size = len(idx) if not gen_batch else chunk_size(
            gen_batch, max(_padded(sampler, len(prompts_[i])) for i in idx))
        rows = idx + [idx[0]] * (size - len(idx))
        toks, mask = sampler.pad([prompts_[i] for i in rows])
        out = sampler.generate_tokens(toks, mask, params, keys[np.asarray(rows)], **({"progress": which} if which else {}))
        t, lp, ln = (np.asarray(x) for x in jax.device_get(out))
        for r, i in enumerate(idx):
            tokens[i], logprobs[i], lengths[i] = t[r], lp[r], ln[r]
        done += len(idx)
        if log is not None and len(chunks) > 1:
            n_tok, sec = int(ln[:len(idx)].sum()), time.perf_counter() - t0
            log(f"{which}: {n_tok} tokens in {sec:.1f} s ({n_tok / max(sec, 1e-9):.1f} tokens/s); {done}/{n} "
                "sequences of the turn done")
    width = max(t.shape[0] for t in tokens)
    pad = lambda a, v: np.pad(a, (0, width - a.shape[0]), constant_values=v)
    return (np.stack([pad(t, sampler.pad_id) for t in tokens]), np.stack([pad(x, 0.0) for x in logprobs]), lengths)


def _padded(sampler, n: int) -> int:
    from cudaperf_jax.generation.sampler import padded_length
    return padded_length(n, sampler.prompt_bucket)


def _timed(fn, *args):
    t0 = time.perf_counter()
    res = fn(*args)
    return res, time.perf_counter() - t0
