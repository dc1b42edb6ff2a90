"""The first metadata fields of a GGUF file, read from its header without the `gguf` package.

Reads key/value pairs in file order and stops as soon as the asked keys are found (general.architecture
and general.name come first in llama.cpp's files), so checking a 1 GB file reads a few hundred bytes.
"""
from __future__ import annotations

import struct
from pathlib import Path

# GGUF value types (ggml's gguf_type): fixed-size scalars, 8 = string, 9 = array.
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9


def _read(f, n: int) -> bytes:
    b = f.read(n)
    if len(b) != n:
        raise ValueError("the file ends inside its GGUF header")
    return b


def _u(f, fmt: str):
    return struct.unpack(fmt, _read(f, struct.calcsize(fmt)))[0]


def _string(f, keep: bool = True) -> str | None:
    n = _u(f, "<Q")
    if not keep:
        f.seek(n, 1)
        return None
    return _read(f, n).decode("utf-8", errors="replace")


def _value(f, vtype: int, keep: bool):
    if vtype in _SCALARS:
        v = _u(f, _SCALARS[vtype])
        return v if keep else None
    if vtype == _STRING:
        return _string(f, keep)
    if vtype == _ARRAY:
        etype, count = _u(f, "<I"), _u(f, "<Q")
        if etype in _SCALARS and not keep:
            f.seek(struct.calcsize(_SCALARS[etype]) * count, 1)
            return None
        items = [_value(f, etype, keep) for _ in range(count)]
        return items if keep else None
    raise ValueError(f"unknown GGUF value type {vtype}")


def read_metadata(path: str | Path, keys: tuple[str, ...] = ("general.architecture", "general.name")) -> dict:
    """{key: value} for those of `keys` the header of the GGUF file at PATH holds (absent keys are left out).

    Raises ValueError (one sentence) when PATH is not a readable GGUF file."""
    want, out = set(keys), {}
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            raise ValueError("it does not start with the GGUF magic bytes")
        version = _u(f, "<I")
        if version not in (2, 3):
            raise ValueError(f"it is GGUF version {version}, not 2 or 3")
        _n_tensors, n_kv = _u(f, "<Q"), _u(f, "<Q")
        for _ in range(n_kv):
            key = _string(f)
            value = _value(f, _u(f, "<I"), keep=key in want)
            if key in want:
                out[key] = value
                if len(out) == len(want):
                    break
    return out
