"""Sequence packing: several examples per row of L tokens, and the step -> rows schedule.

A packed set of N rows (numpy, host side):
    tokens      int32[N, L]   example tokens back to back (prompt then response), pad_id after the last
    positions   int32[N, L]   0.. within each example (as the sampler numbers a prompt), 0 on padding
    segment_ids int32[N, L]   1, 2, ... per example in the row, 0 on padding; the decoder's attention
                              stays inside a segment (Decoder(..., segment_ids=...))
    targets     int32[N, L]   the next token of the same example (0 where there is none)
    weights     float32[N, L] 1 where targets[t] is a response token (loss on response tokens only)

Rows are filled first-fit by decreasing length (deterministic); examples longer than L are dropped and
counted. The schedule reads the rows as an endless stream of epochs, each a permutation seeded by
(seed, epoch): the rows of step s depend only on s, so a resumed run sees the same batches.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from cudaperf_jax.sft.data import Example

FIELDS = ("tokens", "positions", "segment_ids", "targets", "weights")


class Packed(NamedTuple):
    """Packed rows (see the module docstring); all arrays [N, L]."""
    tokens: np.ndarray
    positions: np.ndarray
    segment_ids: np.ndarray
    targets: np.ndarray
    weights: np.ndarray

    @property
    def rows(self) -> int:
        return int(self.tokens.shape[0])

    def take(self, idx) -> dict[str, np.ndarray]:
        """The rows idx as a batch dict (field -> [len(idx), L])."""
        return {k: v[idx] for k, v in zip(FIELDS, self)}


def shuffled(examples: Sequence[Example], seed: int) -> list[Example]:
    order = np.random.default_rng([seed, 7]).permutation(len(examples))
    return [examples[i] for i in order]


def assign_rows(lengths: Sequence[int], seq_len: int) -> tuple[list[list[int]], list[int]]:
    """(rows as lists of example indices, dropped indices): first fit by decreasing length."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    rows: list[list[int]] = []
    room = np.zeros(0, np.int64)
    dropped = []
    for i in order:
        n = lengths[i]
        if n > seq_len:
            dropped.append(i)
            continue
        fits = np.flatnonzero(room >= n)
        if fits.size:
            r = int(fits[0])
            rows[r].append(i)
            room[r] -= n
        else:
            rows.append([i])
            room = np.append(room, seq_len - n)
    return rows, sorted(dropped)


def pack(examples: Sequence[Example], seq_len: int, pad_id: int) -> tuple[Packed, dict]:
    """Packed rows of `examples` and counts {rows, examples_packed, dropped_too_long, fill}."""
    rows, dropped = assign_rows([len(e) for e in examples], seq_len)
    n = len(rows)
    tokens = np.full((n, seq_len), pad_id, np.int32)
    positions = np.zeros((n, seq_len), np.int32)
    segments = np.zeros((n, seq_len), np.int32)
    targets = np.zeros((n, seq_len), np.int32)
    weights = np.zeros((n, seq_len), np.float32)
    for r, members in enumerate(rows):
        at = 0
        for s, i in enumerate(members, start=1):
            e = examples[i]
            seq = np.concatenate([e.prompt, e.response])
            k, p = len(seq), len(e.prompt)
            tokens[r, at:at + k] = seq
            positions[r, at:at + k] = np.arange(k)
            segments[r, at:at + k] = s
            targets[r, at:at + k - 1] = seq[1:]
            weights[r, at + p - 1:at + k - 1] = 1.0   # predictions of response tokens
            at += k
    stats = {"rows": n, "examples_packed": len(examples) - len(dropped), "dropped_too_long": len(dropped),
             "fill": float((segments > 0).mean()) if n else 0.0}
    return Packed(tokens, positions, segments, targets, weights), stats


def batch_rows(num_rows: int, step: int, batch: int, seed: int) -> np.ndarray:
    """Row indices int64[batch] of `step`: positions step*batch.. of the stream of seeded epoch permutations."""
    if num_rows < 1:
        raise ValueError("no packed rows: the data selection produced no example that fits seq_len")
    g = step * batch + np.arange(batch)
    epochs, offsets = np.divmod(g, num_rows)
    perms = {int(e): np.random.default_rng([seed, int(e)]).permutation(num_rows) for e in np.unique(epochs)}
    return np.array([perms[int(e)][o] for e, o in zip(epochs, offsets)], np.int64)


def eval_batches(packed: Packed, batch: int, max_rows: int = 0):
    """Batches dict[field -> [batch, L]] covering the first max_rows rows (0: all); the last padded with
    weightless rows (segment 0, weights 0) to a full batch."""
    n = packed.rows if not max_rows else min(max_rows, packed.rows)
    for start in range(0, n, batch):
        idx = np.arange(start, min(start + batch, n))
        b = packed.take(idx)
        if len(idx) < batch:
            pad = batch - len(idx)
            b = {k: np.concatenate([v, np.zeros((pad, v.shape[1]), v.dtype)]) for k, v in b.items()}
        yield b
