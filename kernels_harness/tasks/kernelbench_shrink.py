"""Smaller configs of a KernelBench problem: shrink its size constants, keep only configs the module runs.

    search = ConfigSearch(source, tag, run)       # run(overrides, device) -> Probe, raises on failure
    found = search.configs()                      # [Found] smallest first, the file's own config last

Candidates are the integer module constants >= 8 that are sizes: names like kernel/stride/padding/
dilation/groups/heads/eps/num_layers are kept, everything else (`batch_size`, `dim`, `M`, `in_channels`)
is tried. For each divisor (16 and 4; 64 and 256 as well when the /16 config is still above the cpu
backend's budget) a candidate config is verified by running the module (PyTorch's meta device first,
then the CPU with real arithmetic, for configs whose arrays fit in 256 MiB); when it fails, fewer constants are shrunk: first all but one, then a
greedy build-up (largest constant first) checked on the meta device and confirmed on the CPU. Shrunk
values stay multiples of the file's group/head counts they were multiples of (channels / groups).
Every dropped candidate keeps its reason; a problem whose own config does not run is an error.
"""
from __future__ import annotations

import dataclasses
import math
import re

from kernels_harness.tasks.errors import TaskError
from kernels_harness.tasks.torch_source import Const

NOT_SIZE = re.compile(r"(kernel|stride|pad|dilation|group|eps|axis|ratio|scale|prob|alpha|beta|momentum|"
                      r"num_layers|layers$|heads?$|n_head|^stages$|clusters|divisor|max$|min$)", re.IGNORECASE)
_MODULUS = re.compile(r"(group|head)", re.IGNORECASE)
DIVISORS = (16, 4)
TINY_DIVISORS = (64, 256)
CPU_BUDGET_BYTES = 8 << 20     # kernels_harness.run.pool.HarnessPool's default cpu_budget_bytes
CPU_VERIFY_BYTES = 256 << 20   # configs above this are verified on the meta device only


@dataclasses.dataclass
class Probe:
    """What one run of the module produced: the signature pieces and the bytes of all its arrays."""
    args: list
    values: dict
    nbytes: int
    key: tuple          # names, roles, dtypes, ranks: configs of one task must agree on it


@dataclasses.dataclass
class Found:
    name: str
    divisor: int
    overrides: dict     # the constants this config sets (all candidates: shrunk or at the file's value)
    shrunk: list
    probe: Probe


def size_candidates(consts: dict[str, Const]) -> list[str]:
    """Independent integer constants that look like sizes, in file order."""
    return [k for k, c in consts.items() if isinstance(c.value, int) and not c.derived and c.value >= 8
            and not NOT_SIZE.search(k)]


def _moduli(consts: dict[str, Const]) -> list[int]:
    return [int(c.value) for k, c in consts.items() if isinstance(c.value, int) and c.value >= 2
            and _MODULUS.search(k)]


def shrunk_value(v: int, div: int, moduli: list[int]) -> int:
    """v // div, kept a multiple of every modulus that divides v (and at least that modulus)."""
    m = 1
    for g in moduli:
        if v % g == 0:
            m = m * g // math.gcd(m, g)
    new = max(1, v // div)
    if m > 1:
        new = max(m, new // m * m)
    return min(v, new)


def _short(e: Exception) -> str:
    msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {msg}"[:200]


class ConfigSearch:
    """Finds the configs of one problem; `run(overrides, device)` runs the module (raises on failure)."""

    def __init__(self, consts: dict[str, Const], tag: str, run):
        self.consts, self.tag, self.run = consts, tag, run
        self.cands = size_candidates(consts)
        self.moduli = _moduli(consts)
        self.file_values = {k: consts[k].value for k in self.cands}
        self.dropped: list[dict] = []
        self.base: Probe | None = None
        self._cache: dict = {}

    def _try(self, overrides: dict, device: str):
        """(Probe, None) or (None, reason); results are cached per (overrides, device)."""
        key = (tuple(sorted(overrides.items())), device)
        if key not in self._cache:
            try:
                probe = self.run(overrides, device)
                if self.base is not None and probe.key != self.base.key:
                    raise TaskError("the module's arguments (names, dtypes or ranks) differ from the file's config")
                self._cache[key] = (probe, None)
            except Exception as e:  # noqa: BLE001 - a module may raise anything for sizes it does not accept
                self._cache[key] = (None, _short(e))
        return self._cache[key]

    def _verify(self, overrides: dict):
        """Meta device first (cheap shape check), then the CPU with real arithmetic."""
        probe, err = self._try(overrides, "meta")
        if probe is None and not _no_meta_kernel(err):
            return None, f"meta: {err}"
        if probe is not None and probe.nbytes > CPU_VERIFY_BYTES:
            return probe, None  # too large to run on the cpu here; the meta device checked the shapes
        probe, err = self._try(overrides, "cpu")
        return (probe, None) if probe is not None else (None, f"cpu: {err}")

    def _proposal(self, subset, div: int) -> dict:
        return {k: (shrunk_value(v, div, self.moduli) if k in subset else v) for k, v in self.file_values.items()}

    def _shrink(self, div: int) -> Found | None:
        changed = [k for k in self.cands if shrunk_value(self.file_values[k], div, self.moduli) != self.file_values[k]]
        if not changed:
            self.dropped.append({"divisor": div, "overrides": {}, "reason": "no size constant can be divided"})
            return None
        full = self._proposal(changed, div)
        probe, err = self._verify(full)
        if probe is not None:
            return Found("", div, full, changed, probe)
        self.dropped.append({"divisor": div, "overrides": _diff(full, self.file_values), "reason": err})
        if len(changed) > 1:  # all but one
            for k in sorted(changed, key=lambda k: self.file_values[k]):
                sub = [c for c in changed if c != k]
                cfg = self._proposal(sub, div)
                probe, err = self._verify(cfg)
                if probe is not None:
                    return Found("", div, cfg, sub, probe)
                self.dropped.append({"divisor": div, "overrides": _diff(cfg, self.file_values), "reason": err})
        keep: list = []  # greedy build-up on the meta device, confirmed on the cpu
        for k in sorted(changed, key=lambda k: -self.file_values[k]):
            cfg = self._proposal(keep + [k], div)
            p, err = self._try(cfg, "meta")
            if p is not None or _no_meta_kernel(err):
                keep.append(k)
        if keep and len(keep) < len(changed) - 1:
            cfg = self._proposal(keep, div)
            probe, err = self._verify(cfg)
            if probe is not None:
                return Found("", div, cfg, keep, probe)
            self.dropped.append({"divisor": div, "overrides": _diff(cfg, self.file_values), "reason": err})
        return None

    def configs(self) -> list[Found]:
        """Configs smallest first; the file's own config last. Raises TaskError if the file does not run."""
        probe, _err = self._try(dict(self.file_values), "meta")
        if probe is None:
            probe, err2 = self._try(dict(self.file_values), "cpu")
            if probe is None:
                raise TaskError(f"{self.tag}: running the module with its own sizes failed ({err2})")
        self.base = probe
        found = [Found("large", 1, dict(self.file_values), [], probe)]
        for div, name in zip(DIVISORS, ("small", "medium")):
            self._add(found, self._shrink(div), name)
        if min(f.probe.nbytes for f in found) > CPU_BUDGET_BYTES:  # a smaller one for the cpu backend
            for div in TINY_DIVISORS:
                tiny = [f for f in found if f.name == "tiny"]
                f = self._shrink(div)
                if f is None or (tiny and f.probe.nbytes >= tiny[0].probe.nbytes):
                    continue
                if tiny:
                    found.remove(tiny[0])
                self._add(found, f, "tiny")
                if f.probe.nbytes <= CPU_BUDGET_BYTES:
                    break
        found.sort(key=lambda f: (f.probe.nbytes, -f.divisor))
        return found

    def _add(self, found: list, f: Found | None, name: str) -> None:
        if f is None:
            return
        for other in found:
            if other.overrides == f.overrides:
                self.dropped.append({"divisor": f.divisor, "overrides": _diff(f.overrides, self.file_values),
                                     "reason": f"the same sizes as config {other.name!r}"})
                return
        f.name = name
        found.append(f)


def _diff(cfg: dict, base: dict) -> dict:
    return {k: v for k, v in cfg.items() if base.get(k) != v}


def _no_meta_kernel(err: str | None) -> bool:
    """The meta device failed because an op has no meta implementation (not because of the sizes)."""
    return bool(err) and any(s in err for s in ("NotImplementedError", "meta", "Meta", "item()", "data-dependent",
                                                "Cannot copy out of meta"))
