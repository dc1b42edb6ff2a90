"""The feedback text a policy sees on its next turn, built from an EvalResult.

Short (a few lines, at most `max_chars`): the first compiler errors; the forbidden calls; which config
failed and how badly; on cuda the time against the baseline; one or two structural hints when the
features carry them.
"""
from __future__ import annotations

import re

from kernels_harness.hacks import summarize
from kernels_harness.tasks.schema import describe_config


def _cfg(task, c) -> str:
    return describe_config(c.config)


def _compiler_errors(log: str, limit: int = 5) -> list[str]:
    lines = [ln.strip() for ln in log.splitlines() if re.search(r"\berror\b", ln, re.IGNORECASE) and "full log" not in ln]
    seen, out = set(), []
    for ln in lines:
        if ln not in seen:
            seen.add(ln)
            out.append(ln[:240])
    return out[:limit] or [ln[:240] for ln in log.strip().splitlines()[-limit:]]


# a compiler error (nvcc's or g++'s) naming one of these (an undeclared namespace or function, a missing header)
# means the answer reached for a library: PyTorch's C++ API, Thrust, CUB, CUTLASS, cuBLAS, cuDNN
_LIBRARY_IN_ERROR = [re.compile(p) for p in (
    r'(?:identifier|namespace) "(torch|at|c10|thrust|cub|cutlass|cute)" is undefined',
    r'identifier "((?:cublas|cudnn)\w*)" is undefined',
    r'(?:cannot open source file|fatal error:) "?<?(torch|ATen|c10|cublas|cudnn|cutlass)\b',
    r"[\u2018'](torch|at|c10|thrust|cub|cutlass|cute|cublas\w*|cudnn\w*)[\u2019'] (?:was not|has not been) declared")]


def library_hint(log: str) -> str | None:
    """One sentence when the compiler's errors show the answer used a library (no solution may: an attempt that
    includes its header is rejected as a hack); None otherwise."""
    for pat in _LIBRARY_IN_ERROR:
        if m := pat.search(log or ""):
            return (f"`{m.group(1)}` is a library: a solution uses none (no PyTorch C++ API, Thrust, CUB, CUTLASS, "
                    "cuBLAS or cuDNN); compute every output in your own kernels.")
    return None


def reason(res, max_chars: int = 300) -> str:
    """Why a candidate failed, in one line: its `error`, else its first compiler errors, else its violations."""
    text = res.error
    if not text and res.status == "compile_error":
        text = " | ".join(_compiler_errors(res.compile_log or "", limit=2)) or "the compiler gave no message"
    if not text and res.violations:
        text = summarize(res.violations)
    text = (text or "").replace("\n", " ")
    return text if len(text) <= max_chars else text[:max_chars - 3] + "..."


def make_feedback(task, res, max_chars: int = 1200) -> str:
    """One short paragraph for the next turn. `task`: Task; `res`: EvalResult."""
    s = res.status
    ran = [c for c in res.configs if not c.skipped]
    skipped = [c for c in res.configs if c.skipped and "cpu backend" in c.skip_reason]
    lines = []
    if s == "hack" and not res.violations:
        lines.append(f"Rejected as a reward hack: {res.error or 'no detail'}. Compute every output from the "
                     "inputs of each call.")
    elif s == "hack":
        lines.append(f"Rejected before compiling: {summarize(res.violations)}. Do the work in your own kernels, "
                     "launched on the given `stream`, without library, process, file, timer or environment calls.")
    elif s == "unchecked":
        lines.append(f"Not checked: {res.error or 'no config could be run on this backend'}. It compiled; "
                     "nothing is known about its correctness.")
    elif s == "compile_error":
        lines.append("Compilation failed:")
        lines += _compiler_errors(res.compile_log)
        if hint := library_hint(res.compile_log):
            lines.append(hint)
    elif s in ("runtime_error", "timeout", "wrong"):
        head = {"runtime_error": "Runtime error", "timeout": "Timed out", "wrong": "Wrong result"}[s]
        lines.append(f"{head}: {res.error or 'no detail'}")
        passed = [c for c in ran if c.correct]
        if passed:
            lines.append("Correct on: " + "; ".join(_cfg(task, c) for c in passed) + ".")
    elif s == "ok":
        what = "the only checked config" if len(ran) == 1 else f"all {len(ran)} checked configs"
        lines.append(f"Correct on {what}" + (f" ({len(skipped)} larger one{'s' if len(skipped) > 1 else ''} "
                     "skipped on the cpu backend, unchecked: " + "; ".join(_cfg(task, c) for c in skipped) + ")"
                     if skipped else "") + ".")
        timed = [c for c in ran if c.time_ms]
        for c in timed:
            base = f" vs baseline {c.baseline_ms:.4g} ms ({c.baseline_ms / c.time_ms:.2f}x)" if c.baseline_ms else ""
            lines.append(f"{_cfg(task, c)}: {c.time_ms:.4g} ms{base}")
        if res.speedup:
            lines.append(f"Speedup over the baseline (geometric mean): {res.speedup:.2f}x.")
    hints = res.features.get("feedback") if isinstance(res.features, dict) else None
    if isinstance(hints, str):
        hints = [hints]
    if hints and s in ("ok", "wrong"):
        lines += [str(h) for h in hints[:2]]
    text = "\n".join(lines)
    return text if len(text) <= max_chars else text[:max_chars - 3] + "..."
