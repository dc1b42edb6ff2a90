"""Train batches from rollout candidates: the exact prompt and completion ids, micro-batched by length.

    for mb in micro_batches(candidates, advantages, pad_id, size=8): ...   # batches of cudaperf_jax.rl.objective

Each micro-batch is a training batch (tokens int32[b, P + N], positions, kv_mask, loss_mask float32[b, P+N-1],
old_logp (the sampler's log-probs on the completion positions), ref_logp, advantages float32[b]) whose prompt part
is left-padded and its completion part right-padded to a multiple of `bucket`, with more left padding so that the
whole length P + N is on the sampler's ladder (`padded_length`: at most 25% padding), so a handful of shapes recur
and jit compiles each once (training.step accumulates each micro-batch at its own length: nothing is padded to the
step's longest sequence). Candidates are sorted by prompt length (stable), so a micro-batch's
prompts are of similar length.
"""
from __future__ import annotations

import numpy as np

from cudaperf_jax.generation.sampler import padded_length


def _round(n: int, bucket: int) -> int:
    return max(bucket, -(-n // bucket) * bucket)


def batch_from_samples(prompt_tokens, prompt_mask, completion_tokens, completion_lengths, advantages,
                       old_logp_completion=None) -> dict:
    """A train batch from sampler output.

    prompt_tokens int32[B, P] (left padded) with prompt_mask bool[B, P]; completion_tokens int32[B, N]
    with completion_lengths int32[B]; advantages float32[B]; old_logp_completion float32[B, N] (the
    sampler's log-probs; None: zeros). Reference log-probs start equal to the old ones (callers replace them
    with the reference model's).
    """
    b, p = prompt_tokens.shape
    n = completion_tokens.shape[1]
    comp_mask = np.arange(n)[None, :] < np.asarray(completion_lengths)[:, None]
    tokens = np.concatenate([prompt_tokens, completion_tokens], 1).astype(np.int32)
    kv_mask = np.concatenate([prompt_mask, comp_mask], 1)
    positions = np.maximum(np.cumsum(kv_mask, 1) - 1, 0).astype(np.int32)
    loss_mask = np.zeros((b, p + n - 1), np.float32)
    loss_mask[:, p - 1:] = comp_mask
    old = np.zeros((b, p + n - 1), np.float32)
    if old_logp_completion is not None:
        old[:, p - 1:] = np.where(comp_mask, old_logp_completion, 0.0)
    return {"tokens": tokens, "positions": positions, "kv_mask": kv_mask, "loss_mask": loss_mask,
            "old_logp": old, "ref_logp": old.copy(), "advantages": np.asarray(advantages, np.float32)}


def build_batch(cands: list, advantages: np.ndarray, pad_id: int, bucket: int = 64) -> dict:
    """One batch of `cands` (rollout.Candidate) with advantages float32[len(cands)]."""
    p = _round(max(len(c.prompt_ids) for c in cands), bucket)
    n = _round(max(max(len(c.completion_ids) for c in cands), 1), bucket)
    p = padded_length(p + n, bucket) - n
    b = len(cands)
    ptoks = np.full((b, p), pad_id, np.int32)
    pmask = np.zeros((b, p), bool)
    ctoks = np.full((b, n), pad_id, np.int32)
    clp = np.zeros((b, n), np.float32)
    lens = np.zeros(b, np.int32)
    for i, c in enumerate(cands):
        lp = len(c.prompt_ids)
        ptoks[i, p - lp:] = c.prompt_ids
        pmask[i, p - lp:] = True
        m = len(c.completion_ids)
        ctoks[i, :m] = c.completion_ids
        clp[i, :m] = c.logprobs
        lens[i] = m
    batch = batch_from_samples(ptoks, pmask, ctoks, lens, np.asarray(advantages, np.float32), clp)
    if all(c.ref_logprobs is not None for c in cands):   # else ref = old (callers skip the KL term)
        for i, c in enumerate(cands):
            m = len(c.completion_ids)
            batch["ref_logp"][i, p - 1:p - 1 + m] = c.ref_logprobs
    return batch


def micro_batches(cands: list, advantages: np.ndarray, pad_id: int, size: int, bucket: int = 64) -> list[dict]:
    """Batches of at most `size` candidates (the last one padded with zero-weight copies to `size`, so every
    micro-batch has the same batch dimension); a `weight` float32[b] field is 1 on real rows, 0 on padding."""
    order = sorted(range(len(cands)), key=lambda i: len(cands[i].prompt_ids))
    out = []
    for s in range(0, len(order), size):
        idx = order[s:s + size]
        real = len(idx)
        idx = idx + [idx[-1]] * (size - real)
        mb = build_batch([cands[i] for i in idx], np.asarray(advantages, np.float32)[idx], pad_id, bucket)
        w = np.zeros(size, np.float32)
        w[:real] = 1.0
        mb["weight"] = w
        mb["loss_mask"] = mb["loss_mask"] * w[:, None]
        mb["index"] = np.asarray(idx, np.int32)
        out.append(mb)
    return out
