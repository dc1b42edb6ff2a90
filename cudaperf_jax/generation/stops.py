"""Stop tokens and stop strings.

Inside the jitted decode loop a sample stops at a stop token id or when its last tokens equal one of
the stop strings' token sequences (`stop_sequences`, a cheap early exit). A string can also be
completed across token boundaries that differ from its own tokenisation, so after decoding the host
cuts every sample at the first occurrence of a stop string in its text (`truncate_at_stop_strings`).
"""
from __future__ import annotations

import numpy as np

MAX_STOP_IDS = 8
MAX_STOP_SEQS = 8
MAX_STOP_LEN = 8


def stop_id_array(ids) -> np.ndarray:
    """int32[MAX_STOP_IDS] of stop token ids padded with -1 (a fixed shape, so no recompilation)."""
    ids = sorted({int(i) for i in ids})
    if len(ids) > MAX_STOP_IDS:
        raise ValueError(f"at most {MAX_STOP_IDS} stop token ids are supported; got {len(ids)}")
    out = np.full((MAX_STOP_IDS,), -1, np.int32)
    out[: len(ids)] = ids
    return out


def stop_sequences(stop_strings, tokenizer) -> np.ndarray:
    """int32[MAX_STOP_SEQS, MAX_STOP_LEN]: each string's tokens right-aligned, padded with -1.

    Strings longer than MAX_STOP_LEN tokens are matched on the host only.
    """
    out = np.full((MAX_STOP_SEQS, MAX_STOP_LEN), -1, np.int32)
    if not stop_strings:
        return out
    if len(stop_strings) > MAX_STOP_SEQS:
        raise ValueError(f"at most {MAX_STOP_SEQS} stop strings are supported; got {len(stop_strings)}")
    if tokenizer is None:
        raise ValueError("stop strings need a tokenizer; pass one to the Sampler")
    for i, s in enumerate(stop_strings):
        ids = tokenizer.encode(s, add_special_tokens=False)
        if 0 < len(ids) <= MAX_STOP_LEN:
            out[i, MAX_STOP_LEN - len(ids):] = ids
    return out


def truncate_at_stop_strings(tokens: np.ndarray, lengths: np.ndarray, stop_strings, tokenizer
                             ) -> tuple[np.ndarray, list[str]]:
    """(new lengths int32[B], texts) with each sample cut at its first stop string.

    tokens: int32[B, N]; lengths: int32[B]. A sample's new length is the fewest tokens whose text
    contains a stop string; its text ends just before that string.
    """
    lengths = np.asarray(lengths).copy()
    texts = []
    for b in range(tokens.shape[0]):
        row = tokens[b, : lengths[b]].tolist()
        text = tokenizer.decode(row, skip_special_tokens=True)
        hits = [text.find(s) for s in stop_strings if s and s in text]
        if not hits:
            texts.append(text)
            continue
        lo, hi = 1, len(row)  # smallest k with a stop string in decode(row[:k]): monotone in k
        while lo < hi:
            mid = (lo + hi) // 2
            if any(s in tokenizer.decode(row[:mid], skip_special_tokens=True) for s in stop_strings if s):
                hi = mid
            else:
                lo = mid + 1
        lengths[b] = lo
        texts.append(text[: min(hits)])
    return lengths.astype(np.int32), texts
