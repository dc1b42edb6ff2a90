"""Several candidates in one translation unit and one shared library (used by the pool and the dataset
measurement); the compiler itself is passed in, so nvcc (cuda) and g++ (the emulation) share this.

combine(members) writes one translation unit in which member k is

    namespace <its namespace> {
    #line 1 "m<k>/solution.cu"
    <its source: #include lines blanked, every `entry` identifier renamed to its own symbol>
    }
    #undef <each macro the member defines>

after all members' #include lines, hoisted to the top (deduplicated, each behind a `#line` naming the
member and line that first included it). So the members' kernels, helpers and statics cannot clash,
each exports its entry under its own `extern "C"` symbol, and every compiler message names the member
and its own line numbers (`m3/solution.cu(12): error ...` from nvcc, `m3/solution.cu:12:5: error` from
g++): `failed_members` reads which members broke a build, `member_log` cuts a member's own lines out
of a successful build's log.

build(members, out_path, compile_text) builds as many members as possible into one library: a build
that fails is retried without the members its errors name (at most `rounds` times), one whose errors
name no member is split in halves, one that timed out is given up. It returns the members built and
those the caller must build alone (from their own source, so their logs are their own).
A member whose source cannot be combined safely (`unbatchable`) is never passed here.
"""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include\b.*$", re.MULTILINE)
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)", re.MULTILINE)
_BEFORE_INCLUDE = re.compile(r"^[ \t]*#[ \t]*(if|ifdef|ifndef|elif|else|define|undef|line)\b", re.MULTILINE)
_TAG = re.compile(r"\bm(\d+)/solution\.cu\b")
_ERROR = re.compile(r"\berror\b", re.IGNORECASE)


@dataclasses.dataclass(frozen=True)
class Member:
    """One candidate of a batch: its source, the task's entry name, and the (unique) symbol and
    namespace it gets in a combined library."""
    source: str
    entry: str
    symbol: str
    namespace: str


def names_for(key: str) -> tuple[str, str]:
    """(symbol, namespace) of a member from its build key (hex): the same key, the same names."""
    return f"cudaperf_e{key[:20]}", f"cudaperf_ns{key[:20]}"


def unbatchable(source: str, entry: str) -> str:
    """Why `source` must be built on its own ("" if it can share a library): it does not define the
    entry with C linkage, or it has macros/conditionals before an #include (hoisting would change it),
    or its own #line directives (messages could not be attributed)."""
    if not re.search(r'extern\s+"C"', source) or not re.search(rf"\b{re.escape(entry)}\s*\(", source):
        return f'it does not define extern "C" {entry}(...)'
    if re.search(r"^[ \t]*#[ \t]*line\b", source, re.MULTILINE):
        return "it has #line directives"
    includes = list(_INCLUDE.finditer(source))
    if includes and _BEFORE_INCLUDE.search(source, 0, includes[-1].start()):
        return "it has preprocessor conditionals or macros before an #include"
    return ""


def tag(k: int) -> str:
    return f"m{k}/solution.cu"


def combine(members: list[Member]) -> str:
    """The combined translation unit (see the module docstring)."""
    head, seen, bodies = [], set(), []
    for k, m in enumerate(members):
        lines = m.source.split("\n")
        for i, line in enumerate(lines):
            if _INCLUDE.match(line):
                norm = re.sub(r"\s+", " ", line.strip())
                if norm not in seen:
                    seen.add(norm)
                    head.append(f'#line {i + 1} "{tag(k)}"\n{line.strip()}')
                lines[i] = ""
        body = re.sub(rf"\b{re.escape(m.entry)}\b", m.symbol, "\n".join(lines))
        undefs = "".join(f"#undef {name}\n" for name in dict.fromkeys(_DEFINE.findall(body)))
        bodies.append(f'namespace {m.namespace} {{\n#line 1 "{tag(k)}"\n{body}\n}}  // namespace {m.namespace}\n'
                      f"{undefs}")
    return "\n".join(head) + "\n" + "\n".join(bodies)


def failed_members(log: str, n: int) -> set[int] | None:
    """Indices of the members an error message names; None if some error names no member (a linker
    error, a crash of the compiler): then nobody can be blamed from the log."""
    lines = log.splitlines()
    bad: set[int] = set()
    context = None
    for i, line in enumerate(lines):
        tags = [int(x) for x in _TAG.findall(line)]
        if tags and not _ERROR.search(line):
            context = tags[-1]  # "In file included from m2/solution.cu:3", "required from here"
        if not _ERROR.search(line) or re.match(r"\s*\d+ errors? detected", line):
            continue
        who = tags[0] if tags else None
        if who is None:  # nvcc names the member after a header's error: "detected during ... of m3/solution.cu"
            for nxt in lines[i + 1:i + 8]:
                later = _TAG.findall(nxt)
                if later:
                    who = int(later[0])
                    break
        who = context if who is None else who
        if who is None or who >= n:
            return None
        bad.add(who)
    return bad


def member_log(log: str, k: int, namespace: str) -> str:
    """Member k's own part of a successful build's log: its warnings (file name `solution.cu`, its own
    line numbers) and ptxas's lines for its kernels."""
    mangled = f"{len(namespace)}{namespace}"
    out, owner = [], None
    for line in log.splitlines():
        tags = _TAG.findall(line)
        if tags:
            owner = int(tags[0]) == k
        elif "Compiling entry function" in line or "Function properties for" in line:
            owner = mangled in line or namespace in line
        elif line.startswith("ptxas info") and ("Used " not in line and "Compile time" not in line):
            owner = False
        if owner:
            out.append(_TAG.sub(lambda m: "solution.cu" if int(m.group(1)) == k else m.group(0), line))
    return "\n".join(out) + ("\n" if out else "")


def member_resources(resources: dict, namespace: str) -> dict:
    """The ptxas resources (kernels_harness.build.nvcc.parse_ptxas of member_log) with the member's
    namespace taken out of the signatures."""
    out = {}
    for name, rec in resources.items():
        rec = dict(rec)
        rec["signature"] = rec.get("signature", "").replace(namespace + "::", "")
        out[name.replace(namespace + "::", "")] = rec
    return out


@dataclasses.dataclass
class Compiled:
    """What `compile_text(text, out_path)` returns: ok, the full (untrimmed) log, timed_out."""
    ok: bool
    log: str
    timed_out: bool = False


def build(members: list[Member], out_path: str | Path, compile_text, rounds: int = 3,
          min_size: int = 2) -> tuple[dict[int, dict], list[int]]:
    """Builds `members` into as few libraries as the compiler allows (see the module docstring).

    Returns ({k: {"path", "log", "symbol", "batch_size", "full_log"}} for the members in a library,
    [k, ...] the members to build alone). Libraries are `out_path` and `<stem>_<suffix>.so` beside it.
    """
    out_path = Path(out_path)
    built: dict[int, dict] = {}
    alone: list[int] = []

    def attempt(ks: list[int], path: Path, depth: int) -> None:
        for _ in range(rounds):
            if len(ks) < min_size:
                alone.extend(ks)
                return
            res = compile_text(combine([members[k] for k in ks]), path)
            if res.ok:
                for j, k in enumerate(ks):
                    built[k] = {"path": str(path), "symbol": members[k].symbol, "batch_size": len(ks),
                                "log": member_log(res.log, j, members[k].namespace), "full_log": res.log}
                return
            if res.timed_out:  # one slow member would cost every retry the whole timeout
                alone.extend(ks)
                return
            bad = failed_members(res.log, len(ks))
            if not bad:  # nobody named: split, and let the halves find out
                if depth >= 4 or len(ks) < 2 * min_size:
                    alone.extend(ks)
                    return
                mid = len(ks) // 2
                attempt(ks[:mid], path.with_name(f"{path.stem}_a.so"), depth + 1)
                attempt(ks[mid:], path.with_name(f"{path.stem}_b.so"), depth + 1)
                return
            alone.extend(ks[j] for j in sorted(bad))
            ks = [k for j, k in enumerate(ks) if j not in bad]
            path = path.with_name(f"{path.stem}_r.so")
        alone.extend(ks)

    attempt(list(range(len(members))), out_path, 0)
    return built, sorted(alone)
