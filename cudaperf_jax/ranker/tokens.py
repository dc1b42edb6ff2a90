"""Token ids of CUDA sources for the ranker's encoders.

`code_tokens(sources, vocab, max_len)`: the from-scratch transformer's tokenizer, needing no vocabulary
file: comments and #include lines dropped, the text split into identifiers, numbers and operators, and
each piece hashed (crc32) into `vocab - 2` ids (0 = padding, 1 = a leading summary slot).
`policy_tokens(tokenizer, sources, max_len)`: the policy's own tokenizer (backbone encoder).
Both return (int32 [B, L], bool [B, L] mask of real tokens); sources longer than L are cut at the end.
"""
from __future__ import annotations

import re
import zlib

import numpy as np

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
_INCLUDE = re.compile(r"^\s*#\s*include[^\n]*$", re.MULTILINE)
_PIECE = re.compile(r"[A-Za-z_]\w*|\d+\.?\d*(?:[eE][-+]?\d+)?[fFuUlL]*|<<<|>>>|<<=|>>=|->|\+\+|--|&&|\|\||[-+*/%<>=!&|^]=|\S")
PAD, CLS = 0, 1


def pieces(source: str) -> list[str]:
    return _PIECE.findall(_INCLUDE.sub("", _COMMENT.sub(" ", source or "")))


def code_tokens(sources: list[str], vocab: int, max_len: int) -> tuple[np.ndarray, np.ndarray]:
    if vocab < 3 or max_len < 2:
        raise ValueError(f"vocab must be >= 3 and max_len >= 2 (got {vocab}, {max_len})")
    ids = np.zeros((len(sources), max_len), np.int32)
    for b, s in enumerate(sources):
        toks = [CLS] + [2 + zlib.crc32(p.encode()) % (vocab - 2) for p in pieces(s)][:max_len - 1]
        ids[b, :len(toks)] = toks
    return ids, ids != PAD


def policy_tokens(tokenizer, sources: list[str], max_len: int) -> tuple[np.ndarray, np.ndarray]:
    ids = np.zeros((len(sources), max_len), np.int32)
    mask = np.zeros((len(sources), max_len), bool)
    for b, s in enumerate(sources):
        t = tokenizer(_INCLUDE.sub("", _COMMENT.sub(" ", s or "")), add_special_tokens=False)["input_ids"][:max_len]
        t = t or [0]
        ids[b, :len(t)] = t
        mask[b, :len(t)] = True
    return ids, mask
