"""A model completion -> the CUDA source it contains (the longest fenced block, else the whole text)."""
from __future__ import annotations

import re

_BLOCK = re.compile(r"```[ \t]*(?:cuda|cu|c\+\+|cpp|c)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL | re.IGNORECASE)


def extract_solution(completion: str) -> str:
    """The CUDA source in a completion: the longest fenced block, else the whole text."""
    blocks = [b.strip() for b in _BLOCK.findall(completion)]
    blocks = [b for b in blocks if b]
    if blocks:
        return max(blocks, key=len) + "\n"
    return completion.strip() + "\n"
