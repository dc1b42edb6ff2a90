"""Batched sampler for rollouts: jitted prefill, then a decode loop inside `lax.while_loop` with a KV cache.

Weights are arguments of the compiled programs (graphdef static, parameter state traced), so updating
the policy never recompiles or embeds weights; the cache buffers are donated to each call and kept
by the Sampler for the next call of the same shape. Prompts are left-padded to a multiple of
`prompt_bucket` tokens; a padded prompt gives exactly the tokens of the same prompt unpadded.

Outputs per sample: generated tokens int32[N] (pad after the end), the model's log-probability of each
generated token float32[N] (log-softmax of the raw logits, temperature 1, untruncated: what a GRPO
forward pass computes), and the length (the stop token is included).
"""
from __future__ import annotations

import dataclasses
import functools
import os
import time
from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from cudaperf_jax.generation import stops
from cudaperf_jax.generation.sampling import choose_with_logprobs
from cudaperf_jax.models import decode_fused, gemv
from cudaperf_jax.models.decoder import Decoder, KVCache
from cudaperf_jax.models.sharding import batch_sharding, cache_shardings


@dataclasses.dataclass(frozen=True)
class SamplingParams:
    """How to sample. temperature 0 is greedy; top_k 0 and top_p 1 switch those filters off."""
    max_new_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    stop_token_ids: tuple[int, ...] | None = None  # None: the model's eos ids
    stop_strings: tuple[str, ...] = ()

    def __post_init__(self):
        if self.max_new_tokens < 1:
            raise ValueError("max_new_tokens must be at least 1")
        if self.temperature < 0 or not 0 < self.top_p <= 1 or self.top_k < 0:
            raise ValueError("need temperature >= 0, 0 < top_p <= 1 and top_k >= 0")


class SampleOutput(NamedTuple):
    """tokens int32[B, N], logprobs float32[B, N], lengths int32[B], texts (None without tokenizer),
    prompt_lengths int32[B]."""
    tokens: np.ndarray
    logprobs: np.ndarray
    lengths: np.ndarray
    texts: list[str] | None
    prompt_lengths: np.ndarray


@functools.partial(jax.jit, static_argnames=("graphdef",), donate_argnames=("cache",))
def _prefill(graphdef, state, cache: KVCache, tokens, kv_mask, positions):
    """Fills cache slots [0, P) from tokens[B, P]; returns (cache, last-position logits float32[B, V])."""
    model = nnx.merge(graphdef, state)
    h, cache = model.hidden(tokens, positions, kv_mask=kv_mask, cache=cache, cache_index=0)
    return cache, model.logits(h[:, -1])


@functools.partial(jax.jit, static_argnames=("graphdef", "spec"), donate_argnames=("cache",))
def _decode(graphdef, state, cache: KVCache, logits0, kv_mask, prompt_lens, keys, temperature, top_p,
            stop_ids, stop_seqs, layouts=(), *, spec):
    """Samples N tokens; spec = (N, prompt_slots, top_k, greedy, use_top_p, pad_id, unroll, use_stop_seqs).
    layouts: decode_fused.step_layouts of these weights, or () (the program builds them where they apply).

    unroll > 1: the loop runs `unroll` steps an iteration while that many remain, then single steps, so the device waits
    for the host's loop test (XLA's while loop copies its predicate to the host) once per `unroll` tokens; a batch
    whose samples all stopped mid-iteration computes the rest of it with every output masked, as finished samples of
    a batch always are. use_stop_seqs False (no stop strings): the loop skips the stop-sequence test.
    Returns (cache, tokens int32[B, N], logprobs float32[B, N], lengths int32[B]).
    """
    n, p_slots, top_k, greedy, use_top_p, pad_id, unroll, use_stop_seqs = spec
    model = nnx.merge(graphdef, state)
    b = logits0.shape[0]
    sl = stop_seqs.shape[1]

    def pick(logits, step):
        return choose_with_logprobs(logits, keys, step, temperature, top_p, top_k=top_k, greedy=greedy,
                                    use_top_p=use_top_p)

    def record(carry, step, tok, lp):
        cache, _, out_t, out_lp, done, lengths = carry
        tok = jnp.where(done, pad_id, tok)
        lp = jnp.where(done, 0.0, lp)
        out_t = jax.lax.dynamic_update_slice(out_t, tok[:, None], (0, step + sl - 1))
        out_lp = jax.lax.dynamic_update_slice(out_lp, lp[:, None], (0, step))
        hit = jnp.any(tok[:, None] == stop_ids[None, :], axis=-1)
        if use_stop_seqs:
            window = jax.lax.dynamic_slice(out_t, (0, step), (b, sl))  # last sl tokens (-2 before start)
            seq_hit = jnp.all((stop_seqs[None] < 0) | (stop_seqs[None] == window[:, None, :]), axis=-1)
            hit = hit | jnp.any(seq_hit & jnp.any(stop_seqs >= 0, axis=-1)[None], axis=-1)
        lengths = jnp.where(done, lengths, step + 1)
        return cache, tok, out_t, out_lp, done | hit, lengths

    out_t = jnp.full((b, n + sl - 1), -2, jnp.int32)  # sl-1 leading sentinels for the stop-sequence window
    out_lp = jnp.zeros((b, n), jnp.float32)
    done = jnp.zeros((b,), bool)
    carry = (cache, jnp.zeros((b,), jnp.int32), out_t, out_lp, done, jnp.zeros((b,), jnp.int32))
    tok0, lp0 = pick(logits0, 0)
    carry = record(carry, 0, tok0, lp0)

    def cond(state_):
        step, carry = state_
        return (step < n) & ~jnp.all(carry[4])

    def body(state_):
        step, (cache, last, out_t, out_lp, done, lengths) = state_
        pos = (prompt_lens + step - 1)[:, None]
        h, cache = model.hidden(last[:, None], pos, kv_mask=kv_mask, cache=cache, cache_index=p_slots + step - 1)
        tok, lp = pick(model.logits(h[:, 0]), step)
        return step + 1, record((cache, last, out_t, out_lp, done, lengths), step, tok, lp)

    state_ = (jnp.int32(1), carry)
    with decode_fused.prepared(model, layouts):   # loop-invariant weight layouts of the fused decode
        if unroll > 1 and n > unroll:
            def body_unrolled(state_):
                for _ in range(unroll):
                    state_ = body(state_)
                return state_
            state_ = jax.lax.while_loop(lambda s: cond(s) & (s[0] + unroll <= n), body_unrolled, state_)
        _, (cache, _, out_t, out_lp, done, lengths) = jax.lax.while_loop(cond, body, state_)
    tokens = out_t[:, sl - 1:]
    tokens = jnp.where(tokens == -2, pad_id, tokens)
    return cache, tokens, out_lp, lengths


@functools.partial(jax.jit, static_argnames=("graphdef",))
def _layouts_of(graphdef, state):
    """decode_fused.step_layouts of these weights (the Sampler's _step_layouts)."""
    return decode_fused.step_layouts(nnx.merge(graphdef, state))


def decode_unroll(batch: int = 1) -> int:
    """CUDAPERF_DECODE_UNROLL: decode steps per iteration of the sampler's while loop (see _decode). `auto` (default):
    4 on a GPU for batches up to 32, where each iteration ends with the host reading the loop test, else 1 (each
    unrolled step is another copy of the model in the compiled program: no wait to save on a CPU, and at batch 128
    no gain for twice the compile time); or a number >= 1. H200, random Qwen2.5-1.5B (2026-12-03): 4 against 1 was
    -16.7 us a step at batch 1 (benchmarks/results/decode_ab_h200_2026-12-03_unroll256.json), 1.861 against 1.906 ms
    at batch 32, 2.526 against 2.517 at batch 128 with 19 s of compile against 10 (decode_1p5b_batch32_128_unroll*)."""
    v = os.environ.get("CUDAPERF_DECODE_UNROLL", "auto").strip().lower()
    if v == "auto":
        return 4 if jax.default_backend() == "gpu" and batch <= 32 else 1
    if not v.isdigit() or int(v) < 1:
        raise ValueError(f"CUDAPERF_DECODE_UNROLL={v!r}: use auto or a whole number >= 1")
    return int(v)


class Sampler:
    """Generates continuations for batches of prompts with one Decoder (and optionally its tokenizer)."""

    def __init__(self, model: Decoder, tokenizer=None, *, mesh=None, cache_dtype=None, prompt_bucket: int = 64,
                 pad_id: int | None = None):
        self.cfg = model.cfg
        self.graphdef, self.state = nnx.split(model)
        self._dtype = model.dtype   # the compute dtype (update_weights keeps the structure)
        self.tokenizer = tokenizer
        self.mesh = mesh
        self.cache_dtype = cache_dtype or model.dtype
        self.prompt_bucket = max(1, int(prompt_bucket))
        if pad_id is None:
            pad_id = getattr(tokenizer, "pad_token_id", None) if tokenizer is not None else None
        if pad_id is None:
            pad_id = self.cfg.pad_token_id if self.cfg.pad_token_id is not None else (self.cfg.eos_ids or (0,))[0]
        self.pad_id = int(pad_id)
        self._cache: dict[tuple, KVCache] = {}
        self._layouts: tuple | None = None   # _step_layouts of the current weights, once computed

    def update_weights(self, model_or_state) -> None:
        """Uses new weights (a Decoder of the same structure, or its nnx.State) without recompiling."""
        self.state = nnx.state(model_or_state) if isinstance(model_or_state, nnx.Module) else model_or_state
        self._layouts = None

    def _step_layouts(self, b: int, s: int) -> tuple:
        """decode_fused.step_layouts of the current weights where a decode of b sequences over s cache slots runs the
        step launch's group-major MLP, computed once per set of weights (building them in every decode program cost
        ~0.8 ms a call for Qwen2.5-1.5B on an H200: +12.7 us a step at 64 new tokens, 2026-12-04); () otherwise. Held
        while the Sampler holds these weights: a second copy of every gate_up (as the decode program held it before).
        CUDAPERF_STEP_LAYOUTS=program: the decode program builds them in every call instead (the default `sampler`)."""
        from cudaperf_jax.models.ops import env_choice
        if self.mesh is not None or env_choice("CUDAPERF_STEP_LAYOUTS", "sampler", ("sampler", "program")) != "sampler":
            return ()
        shape = (b, self.cfg.num_kv_heads, s, self.cfg.head_dim)
        if not decode_fused.step_layouts_apply(self.cfg, self._dtype, b, shape, self.cache_dtype):
            return ()
        if self._layouts is None:
            self._layouts = _layouts_of(self.graphdef, self.state)
        return self._layouts

    # ---------------------------------------------------------------- prompts
    def encode(self, prompts: Sequence, chat: bool = False) -> list[list[int]]:
        """Token ids per prompt: strings are tokenised (through the chat template if chat), lists kept."""
        out = []
        for p in prompts:
            if isinstance(p, str) or (chat and isinstance(p, list) and p and isinstance(p[0], dict)):
                if self.tokenizer is None:
                    raise ValueError("text prompts need a tokenizer; pass one to the Sampler or give token ids")
                if chat:
                    msgs = [{"role": "user", "content": p}] if isinstance(p, str) else p
                    text = self.tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
                    out.append(list(self.tokenizer.encode(text, add_special_tokens=False)))
                else:
                    out.append(list(self.tokenizer.encode(p)))
            else:
                out.append([int(t) for t in p])
        if any(len(t) == 0 for t in out):
            raise ValueError("a prompt is empty; every prompt needs at least one token")
        return out

    def pad(self, token_lists: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
        """Left-padded tokens int32[B, P] and mask bool[B, P], P rounded up to prompt_bucket."""
        longest = max(len(t) for t in token_lists)
        p = -(-longest // self.prompt_bucket) * self.prompt_bucket
        toks = np.full((len(token_lists), p), self.pad_id, np.int32)
        mask = np.zeros((len(token_lists), p), bool)
        for i, t in enumerate(token_lists):
            toks[i, p - len(t):] = t
            mask[i, p - len(t):] = True
        return toks, mask

    # --------------------------------------------------------------- sampling
    def _get_cache(self, b: int, s: int) -> KVCache:
        key = (b, s)
        cache = self._cache.pop(key, None)
        if cache is None:
            self._cache.clear()  # keep at most one set of buffers alive
            cache = KVCache.zeros(self.cfg, b, s, self.cache_dtype)
            if self.mesh is not None:
                cache = jax.device_put(cache, cache_shardings(self.mesh, cache))
        return cache

    def generate_tokens(self, tokens: np.ndarray, mask: np.ndarray, params: SamplingParams, keys,
                        timings: dict | None = None) -> tuple[jax.Array, jax.Array, jax.Array]:
        """Device arrays (tokens int32[B, N], logprobs float32[B, N], lengths int32[B]) for left-padded
        prompts tokens int32[B, P] with mask bool[B, P] and per-sample keys (uint32[B, 2]).

        timings: if a dict is given, the call waits for each phase and stores prefill_s and decode_s.
        """
        gemv.reset_used()
        try:
            return self._generate_tokens(tokens, mask, params, keys, timings)
        except Exception as e:
            if not gemv.fall_back(e):  # the batch-1 Pallas kernel failed here: once more with XLA's dots
                raise
            self._cache.clear()
            return self._generate_tokens(tokens, mask, params, keys, timings)

    def _generate_tokens(self, tokens, mask, params: SamplingParams, keys, timings):
        prefill_args, decode_args, spec = self._program_inputs(tokens, mask, params, keys)
        return self._run(functools.partial(_prefill, self.graphdef),
                         functools.partial(_decode, self.graphdef, spec=spec), prefill_args, decode_args, spec, timings)

    def _program_inputs(self, tokens, mask, params: SamplingParams, keys):
        """(prefill's arguments after graphdef, decode's after graphdef, state, cache and logits0, decode's spec)."""
        b, p = tokens.shape
        n = params.max_new_tokens
        stop_ids = params.stop_token_ids if params.stop_token_ids is not None else self.cfg.eos_ids
        stop_ids = stops.stop_id_array(stop_ids)
        stop_seqs = stops.stop_sequences(params.stop_strings, self.tokenizer)
        mask = np.asarray(mask, bool)
        prompt_lens = mask.sum(axis=1).astype(np.int32)
        positions = np.maximum(np.cumsum(mask, axis=1) - 1, 0).astype(np.int32)
        kv_mask = np.concatenate([mask, np.ones((b, n), bool)], axis=1)
        if jax.dtypes.issubdtype(getattr(keys, "dtype", np.uint32), jax.dtypes.prng_key):
            keys = jax.random.key_data(keys)  # typed keys (jax.random.key) -> uint32[B, 2]
        arrays = [np.asarray(tokens, np.int32), kv_mask, positions, prompt_lens, np.asarray(keys)]
        if self.mesh is not None:
            arrays = [jax.device_put(a, batch_sharding(self.mesh, a.shape)) for a in arrays]
        tokens_d, kv_mask_d, pos_d, lens_d, keys_d = arrays
        greedy = params.temperature == 0
        spec = (n, p, int(params.top_k), greedy, (not greedy) and params.top_p < 1.0, self.pad_id, decode_unroll(b),
                bool((stop_seqs >= 0).any()))
        decode_args = (kv_mask_d, lens_d, keys_d, jnp.float32(max(params.temperature, 1e-6)),
                       jnp.float32(params.top_p), jnp.asarray(stop_ids), jnp.asarray(stop_seqs),
                       self._step_layouts(b, p + n))
        return (tokens_d, kv_mask_d, pos_d), decode_args, spec

    def _run(self, prefill, decode, prefill_args, decode_args, spec, timings):
        """Prefill, then decode: prefill(state, cache, *prefill_args) and decode(state, cache, logits0, *decode_args)
        are the jitted functions with their static arguments bound, or their ahead-of-time compiled programs."""
        b, p = prefill_args[0].shape
        n = spec[0]
        cache = self._get_cache(b, p + n)
        t0 = time.perf_counter()
        cache, logits0 = prefill(self.state, cache, *prefill_args)
        if timings is not None:
            logits0.block_until_ready()
            t1 = time.perf_counter()
        cache, out_t, out_lp, lengths = decode(self.state, cache, logits0, *decode_args)
        if timings is not None:
            lengths.block_until_ready()
            timings.update(prefill_s=t1 - t0, decode_s=time.perf_counter() - t1)
        self._cache[(b, p + n)] = cache
        return out_t, out_lp, lengths

    def compile_programs(self, tokens: np.ndarray, mask: np.ndarray, params: SamplingParams, keys):
        """The prefill and decode programs for these inputs, compiled ahead of time under the environment as it is
        now (the CUDAPERF_* settings are read while tracing), and a function run(timings=None) that generates with
        them exactly as generate_tokens does (run.programs: the two compiled programs). Programs compiled under
        different settings coexist, so that one process can time them in turns (benchmarks/decode_ab.py). Clears
        JAX's caches first (a trace of the same function and shapes under other settings would be reused otherwise)."""
        jax.clear_caches()
        prefill_args, decode_args, spec = self._program_inputs(tokens, mask, params, keys)
        b, p = prefill_args[0].shape
        cache = self._get_cache(b, p + spec[0])
        pre = _prefill.lower(self.graphdef, self.state, cache, *prefill_args).compile()
        cache, logits0 = pre(self.state, cache, *prefill_args)
        dec = _decode.lower(self.graphdef, self.state, cache, logits0, *decode_args, spec=spec).compile()
        self._cache[(b, p + spec[0])] = cache

        def run(timings: dict | None = None):
            return self._run(pre, dec, prefill_args, decode_args, spec, timings)
        run.programs = (pre, dec)
        return run

    def generate(self, prompts: Sequence, params: SamplingParams = SamplingParams(), *, seed: int = 0,
                 keys=None, chat: bool = False) -> SampleOutput:
        """Samples continuations of `prompts` (strings, chat message lists, or token-id lists).

        keys: uint32[B, 2] per-sample PRNG keys (default: split from `seed`).
        """
        token_lists = self.encode(prompts, chat=chat)
        toks, mask = self.pad(token_lists)
        if keys is None:
            keys = jax.random.split(jax.random.PRNGKey(seed), len(token_lists))
        out_t, out_lp, lengths = self.generate_tokens(toks, mask, params, keys)
        out_t, out_lp, lengths = (np.asarray(x) for x in jax.device_get((out_t, out_lp, lengths)))
        texts = None
        if self.tokenizer is not None:
            if params.stop_strings:
                lengths, texts = stops.truncate_at_stop_strings(out_t, lengths, params.stop_strings, self.tokenizer)
                col = np.arange(out_t.shape[1])[None, :]
                out_t = np.where(col < lengths[:, None], out_t, self.pad_id).astype(np.int32)
                out_lp = np.where(col < lengths[:, None], out_lp, 0.0).astype(np.float32)
            else:
                texts = [self.tokenizer.decode(out_t[i, : lengths[i]].tolist(), skip_special_tokens=True)
                         for i in range(len(token_lists))]
        return SampleOutput(out_t, out_lp, lengths, texts, mask.sum(axis=1).astype(np.int32))
