"""Batched sampler for rollouts: jitted prefill, then a decode loop inside `lax.while_loop` with a KV cache.

Weights are arguments of the compiled programs (graphdef static, parameter state traced), so updating
the policy never recompiles or embeds weights; the cache buffers are donated to each call and kept
by the Sampler for the next call of the same shape. Prompts are left-padded to a length of the ladder
`padded_length(n, prompt_bucket)` (multiples of the bucket up to 8 of them, then steps of at most 25%), so the
prompts of a multi-turn rollout compile a handful of programs; a padded prompt gives exactly the tokens of the
same prompt unpadded.

Outputs per sample: generated tokens int32[N] (pad after the end), the model's log-probability of each
generated token float32[N] (log-softmax of the raw logits, temperature 1, untruncated: what a GRPO
forward pass computes), and the length (the stop token is included).

The decode kernels are chosen by one DecodeKernels (cudaperf_jax.kernels), a static argument of the programs; when
its path is auto and a kernel fails to build or run, the Sampler warns and goes on with XLA's dots (its `kernels`).

Progress: `generate(..., progress="label")` (and generate_tokens) shows a tqdm bar of the decode steps with tokens/s
and an ETA, fed by a host callback from inside the loop every `progress_every` steps (cudaperf_jax.generation.progress);
a static argument of the decode program, so calls without progress run the same programs as before.
"""
from __future__ import annotations

import dataclasses
import functools
import time
import warnings
from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from cudaperf_jax.generation import progress as progress_lib
from cudaperf_jax.generation import stops
from cudaperf_jax.generation.sampling import choose_with_logprobs
from cudaperf_jax.kernels import DecodeKernels
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


@functools.partial(jax.jit, static_argnames=("graphdef", "kernels"), donate_argnames=("cache",))
def _prefill(graphdef, state, cache: KVCache, tokens, kv_mask, positions, *, kernels: DecodeKernels):
    """Fills cache slots [0, P) from tokens[B, P]; returns (cache, last-position logits float32[B, V])."""
    model = nnx.merge(graphdef, state)
    h, cache = model.hidden(tokens, positions, kv_mask=kv_mask, cache=cache, cache_index=0, kernels=kernels)
    return cache, model.logits(h[:, -1], kernels)


@functools.partial(jax.jit, static_argnames=("graphdef", "spec", "kernels", "progress_every"),
                   donate_argnames=("cache",))
def _decode(graphdef, state, cache: KVCache, logits0, kv_mask, prompt_lens, keys, temperature, top_p,
            stop_ids, stop_seqs, layouts=(), progress_id=None, *, spec, kernels: DecodeKernels, progress_every: int = 0):
    """Samples N tokens; spec = (N, prompt_slots, top_k, greedy, use_top_p, pad_id, unroll, use_stop_seqs);
    kernels: the resolved decode kernels. layouts: Decoder.kernel_layouts of these weights, or ().
    progress_every > 0: every that many steps the loop calls progress.report(progress_id (int32), step, tokens so far,
    samples running) on the host (jax.debug.callback, unordered); 0 (the default): no callback in the program.

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
                                    use_top_p=use_top_p, cuda_top_k=kernels.top_k == "cuda")

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
        h, cache = model.hidden(last[:, None], pos, kv_mask=kv_mask, cache=cache, cache_index=p_slots + step - 1,
                                kernels=kernels, layouts=layouts)
        tok, lp = pick(model.logits(h[:, 0], kernels), step)
        carry = record((cache, last, out_t, out_lp, done, lengths), step, tok, lp)
        if progress_every:
            jax.lax.cond((step + 1) % progress_every == 0,
                         lambda: jax.debug.callback(progress_lib.report, progress_id, step + 1, jnp.sum(carry[5]),
                                                    jnp.sum(~carry[4]), ordered=False),
                         lambda: None)
        return step + 1, carry

    state_ = (jnp.int32(1), carry)
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


@functools.partial(jax.jit, static_argnames=("graphdef", "kernels", "batch", "cache_shape", "cache_dtype"))
def _layouts_of(graphdef, state, *, kernels, batch, cache_shape, cache_dtype):
    """Decoder.kernel_layouts of these weights (the Sampler's _layouts)."""
    return nnx.merge(graphdef, state).kernel_layouts(kernels, batch, cache_shape, cache_dtype)


def padded_length(n: int, bucket: int) -> int:
    """The smallest length >= n on the ladder bucket x {1, 2, ..., 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, ...}:
    multiples of `bucket` up to 8 of them, then 4 steps an octave (at most 25% padding), so lengths from 1 to 4,096
    with bucket 64 take 20 shapes rather than 64."""
    m = max(1, -(-int(n) // bucket))
    if m > 8:
        step = 1 << (m.bit_length() - 3)
        m = -(-m // step) * step
    return m * bucket


class Sampler:
    """Generates continuations for batches of prompts with one Decoder (and optionally its tokenizer)."""

    def __init__(self, model: Decoder, tokenizer=None, *, mesh=None, cache_dtype=None, prompt_bucket: int = 64,
                 pad_id: int | None = None, kernels: DecodeKernels | None = None, progress_every: int = 16):
        """kernels: the decode kernels (default DecodeKernels(): auto); after a kernel failure in auto mode the Sampler
        holds path xla instead (its `kernels` attribute). progress_every: decode steps between two progress reports of
        a call with `progress` on."""
        self.cfg = model.cfg
        self.kernels = kernels or DecodeKernels()
        self.graphdef, self.state = nnx.split(model)
        self._dtype = model.dtype   # the compute dtype (update_weights keeps the structure)
        self.tokenizer = tokenizer
        self.mesh = mesh
        self.cache_dtype = cache_dtype or model.dtype
        self.prompt_bucket = max(1, int(prompt_bucket))
        self.progress_every = max(1, int(progress_every))
        if pad_id is None:
            pad_id = getattr(tokenizer, "pad_token_id", None) if tokenizer is not None else None
        if pad_id is None:
            pad_id = self.cfg.pad_token_id if self.cfg.pad_token_id is not None else (self.cfg.eos_ids or (0,))[0]
        self.pad_id = int(pad_id)
        self._cache: dict[tuple, KVCache] = {}
        self._layouts: dict = {}   # (batch, cache shape) -> Decoder.kernel_layouts of the current weights

    def update_weights(self, model_or_state) -> None:
        """Uses new weights (a Decoder of the same structure, or its nnx.State) without recompiling."""
        self.state = nnx.state(model_or_state) if isinstance(model_or_state, nnx.Module) else model_or_state
        self._layouts = {}

    def _kernel_layouts(self, kernels: DecodeKernels, b: int, s: int) -> tuple:
        """Decoder.kernel_layouts of the current weights for a decode of b sequences over s cache slots, computed once
        per set of weights and shape (in every decode program it cost ~0.8 ms a call for Qwen2.5-1.5B on an H200);
        () where the kernels do not use them. A second copy of every gate_up while the Sampler holds these weights."""
        if self.mesh is not None:
            return ()
        shape = (b, self.cfg.num_kv_heads, s, self.cfg.head_dim)
        key = (kernels, b, s)
        if key not in self._layouts:
            self._layouts.clear()
            self._layouts[key] = _layouts_of(self.graphdef, self.state, kernels=kernels, batch=b, cache_shape=shape,
                                             cache_dtype=jnp.dtype(self.cache_dtype))
        return self._layouts[key]

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
        """Left-padded tokens int32[B, P] and mask bool[B, P], P = padded_length(longest, prompt_bucket)."""
        longest = max(len(t) for t in token_lists)
        p = padded_length(longest, self.prompt_bucket)
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
                        timings: dict | None = None, progress: str | None = None
                        ) -> tuple[jax.Array, jax.Array, jax.Array]:
        """Device arrays (tokens int32[B, N], logprobs float32[B, N], lengths int32[B]) for left-padded
        prompts tokens int32[B, P] with mask bool[B, P] and per-sample keys (uint32[B, 2]).

        timings: if a dict is given, the call waits for each phase and stores prefill_s and decode_s.
        progress: a label: a tqdm bar (stderr) of the decode steps with tokens/s and an ETA, until the call's results
        are ready (the call then waits for them); None: no bar, and the decode program has no host callback.
        """
        try:
            return self._generate_tokens(tokens, mask, params, keys, timings, progress)
        except Exception as e:
            if not self._fall_back(e, tokens.shape[0]):
                raise
            self._cache.clear()
            return self._generate_tokens(tokens, mask, params, keys, timings, progress)

    def _fall_back(self, error: BaseException, batch: int) -> bool:
        """After a failed compile or run: in auto mode, if a decode kernel was in the failed programs, use XLA's dots
        from now on (warning once) and return True so that the caller retries."""
        run = self.kernels.resolve(batch)
        if self.kernels.path != "auto" or (not run.on and run.top_k != "cuda"):
            return False
        warnings.warn("a decode kernel failed on this machine; decoding with XLA's dots instead (pass "
                      f"DecodeKernels(path='xla') to skip them): {type(error).__name__}: {str(error)[:500]}",
                      RuntimeWarning, stacklevel=3)
        self.kernels = dataclasses.replace(self.kernels, path="xla", top_k="xla")
        return True

    def _generate_tokens(self, tokens, mask, params: SamplingParams, keys, timings, progress: str | None = None):
        prefill_args, decode_args, spec, kc = self._program_inputs(tokens, mask, params, keys)
        prefill = functools.partial(_prefill, self.graphdef, kernels=kc)
        if progress is None:
            return self._run(prefill, functools.partial(_decode, self.graphdef, spec=spec, kernels=kc), prefill_args,
                             decode_args, spec, timings)
        with progress_lib.DecodeProgress(progress, spec[0], tokens.shape[0]) as bar:
            decode = functools.partial(_decode, self.graphdef, spec=spec, kernels=kc, progress_every=self.progress_every)
            out = self._run(prefill, decode, prefill_args, (*decode_args, jnp.int32(bar.id)), spec, timings)
            lengths = np.asarray(out[2])   # waits for the results: the bar ends with the call
            bar.finish(int(lengths.max()), int(lengths.sum()))
        return out

    def _program_inputs(self, tokens, mask, params: SamplingParams, keys):
        """(prefill's arguments after graphdef, decode's after graphdef, state, cache and logits0, decode's spec, the
        resolved decode kernels)."""
        b, p = tokens.shape
        kc = self.kernels.resolve(b)
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
        spec = (n, p, int(params.top_k), greedy, (not greedy) and params.top_p < 1.0, self.pad_id, kc.unroll,
                bool((stop_seqs >= 0).any()))
        decode_args = (kv_mask_d, lens_d, keys_d, jnp.float32(max(params.temperature, 1e-6)),
                       jnp.float32(params.top_p), jnp.asarray(stop_ids), jnp.asarray(stop_seqs),
                       self._kernel_layouts(kc, b, p + n))
        return (tokens_d, kv_mask_d, pos_d), decode_args, spec, kc

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

    def compile_programs(self, tokens: np.ndarray, mask: np.ndarray, params: SamplingParams, keys,
                         kernels: DecodeKernels | None = None):
        """The prefill and decode programs for these inputs compiled ahead of time with `kernels` (default the
        Sampler's), and a function run(timings=None) that generates with them exactly as generate_tokens does
        (run.programs: the two compiled programs). Programs of different configs coexist, so that one process can
        time them in turns (benchmarks/decode_ab.py)."""
        own = self.kernels
        self.kernels = kernels or own
        try:
            prefill_args, decode_args, spec, kc = self._program_inputs(tokens, mask, params, keys)
        finally:
            self.kernels = own
        b, p = prefill_args[0].shape
        cache = self._get_cache(b, p + spec[0])
        pre = _prefill.lower(self.graphdef, self.state, cache, *prefill_args, kernels=kc).compile()
        cache, logits0 = pre(self.state, cache, *prefill_args)
        dec = _decode.lower(self.graphdef, self.state, cache, logits0, *decode_args, spec=spec, kernels=kc).compile()
        self._cache[(b, p + spec[0])] = cache

        def run(timings: dict | None = None):
            return self._run(pre, dec, prefill_args, decode_args, spec, timings)
        run.programs = (pre, dec)
        run.kernels = kc
        return run

    def generate(self, prompts: Sequence, params: SamplingParams = SamplingParams(), *, seed: int = 0,
                 keys=None, chat: bool = False, progress: str | None = None) -> SampleOutput:
        """Samples continuations of `prompts` (strings, chat message lists, or token-id lists).

        keys: uint32[B, 2] per-sample PRNG keys (default: split from `seed`). progress: a label for a tqdm bar of the
        decode steps (tokens/s, ETA); None: none (see generate_tokens).
        """
        token_lists = self.encode(prompts, chat=chat)
        toks, mask = self.pad(token_lists)
        if keys is None:
            keys = jax.random.split(jax.random.PRNGKey(seed), len(token_lists))
        out_t, out_lp, lengths = self.generate_tokens(toks, mask, params, keys, progress=progress)
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
