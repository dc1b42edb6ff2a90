"""The labelled candidate mix of the soak (benchmarks/soak.py): real tasks, their verified and labelled-wrong
implementations, the adversarial test kernels, and hostile variants generated from verified implementations.

Each candidate is {"i", "task" (id), "category", "name", "source", "accept": [statuses that are right]}.
Hostile variants inject code at the top of the entry point (or declarations before it) of a verified
implementation of any task, so they run against every kind of signature:

    hang_host / hang_kernel      an endless host loop / an endless kernel          -> timeout
    crash_segv / crash_trap      a null write / __builtin_trap (SIGILL)            -> runtime_error
    oob_before / oob_end         a kernel writes out[-2] / out[len]                -> wrong or runtime_error
    fork / file / socket         named calls (the static checks)                   -> hack
    fork_hidden / socket_hidden  the same calls, names pasted by the preprocessor  -> runtime_error (sandbox)
    file_hidden                  fopen for writing, the same way                   -> cpu: runtime_error;
                                 cuda: the open fails and the result stands (and no file may appear)
    huge_output                  ~64 MiB printed to stdout                         -> the verdict of the base
    huge_template / huge_constexpr  2^20 template instantiations (past the pool's compile memory limit) / a
                                 constexpr evaluation at the compiler's operation limit -> compile_error
"""
from __future__ import annotations

import dataclasses
import json
import random
import re
import sys
from pathlib import Path

from kernels_harness.datasets import registry, validate
from kernels_harness.tasks.schema import Task, load_task

ROOT = Path(__file__).resolve().parents[1]
ADVERSARIAL = ROOT / "tests" / "kernels_harness" / "adversarial"
NOT_OK = ["wrong", "runtime_error", "timeout", "compile_error", "hack"]
# category -> share of the mix (the rest of a category's budget goes to the others when it has no candidates)
WEIGHTS = {"correct": 0.34, "wrong": 0.22, "adversarial": 0.08, "hang": 0.05, "crash": 0.07, "oob": 0.07,
           "hostile": 0.11, "huge_output": 0.03, "huge_compile": 0.03}


def base_tasks(backend: str, per_family: int = 2, torch: bool = True) -> list[Task]:
    """The smoke suite, the adversarial saxpy task and `per_family` programs of every dataset family (those with
    labelled-wrong implementations first; on cpu only their smallest config runs, as in datasets.validate)."""
    tasks = [load_task(p) for p in sorted((ROOT / "experiments" / "suites" / "smoke").glob("*.json"))]
    tasks.append(load_task(ADVERSARIAL / "saxpy_task.json"))
    for fam in registry.FAMILIES:
        if fam.track == "torch2cuda" and not torch:
            continue
        built = [registry.build(fam.name, params) for params in registry.variants(fam.name)[:4 * per_family]]
        built.sort(key=lambda t: not any(i.expected == "wrong" for i in t.implementations))  # negatives first
        tasks += built[:per_family]
    if backend == "cpu":
        tasks = [dataclasses.replace(t, configs=t.configs[:1]) for t in tasks]
    return tasks


def _adversarial_expected(backend: str) -> dict:
    sys.path.insert(0, str(ROOT))
    from tests.kernels_harness.adversarial import test_adversarial as adv
    return adv.GPU_EXPECTED if backend == "cuda" else adv.EXPECTED


# ---- injection ---------------------------------------------------------------------------------------------
def _entry_parts(source: str, entry: str):
    """(start of the `extern "C" int entry(` definition, index just after its opening brace, parameter names,
    stream parameter name) or None."""
    m = re.search(r'extern\s+"C"\s+(?:__host__\s+)?int\s+' + re.escape(entry) + r"\s*\(", source)
    if not m:
        return None
    depth, j = 1, m.end()
    while j < len(source) and depth:
        depth += {"(": 1, ")": -1}.get(source[j], 0)
        j += 1
    brace = source.find("{", j)
    if brace < 0 or source[j:brace].strip():
        return None
    params = [p.strip() for p in source[m.end():j - 1].split(",")]
    names = [re.findall(r"\w+", p)[-1] if re.findall(r"\w+", p) else "" for p in params]
    stream = next((n for p, n in zip(params, names) if "cudaStream_t" in p), None)
    return m.start(), brace + 1, names, stream


def _first_output(task: Task, names: list[str]):
    """(C name, C type, C length expression or None) of the first float32/float64/int32 output."""
    scalars = {a.value: names[k] for k, a in enumerate(task.signature)
               if a.role == "scalar" and isinstance(a.value, str) and k < len(names)}
    for k, a in enumerate(task.signature):
        if a.role in ("out", "inout") and a.dtype in ("float32", "float64", "int32") and k < len(names):
            dims = [f"(long long)({scalars[s]})" if s in scalars else (str(s) if str(s).isdigit() else None)
                    for s in a.shape]
            length = "*".join(dims) if dims and None not in dims else None
            return names[k], a.c_type, length
    return None


_SPIN_KERNEL = "__global__ void soak_spin(volatile int* f) { while (f[0] != 0x5eed || f[0] == 0x5eed) { } }\n"
_OOB_KERNEL = ("template <typename T> __global__ void soak_oob(T* p, long long at) "
               "{ if (threadIdx.x == 0) p[at] = (T)7; }\n")
_TEMPLATE = ("template <int N, int K> struct SoakT { enum { v = SoakT<N - 1, 2 * K>::v + SoakT<N - 1, 2 * K + 1>::v }; };\n"
             "template <int K> struct SoakT<0, K> { enum { v = K & 1 }; };\n"
             "static const int soak_big = SoakT<20, 0>::v;\n")
_CONSTEXPR = ("constexpr unsigned long soak_ce() { unsigned long s = 0; for (unsigned long i = 0; i < 200000UL; ++i)"
              " for (unsigned long j = 0; j < 200000UL; ++j) s += i ^ (s >> 3) ^ j; return s; }\n"
              "static_assert(soak_ce() != 1UL, \"soak\");\n")


def _c_chars(text: str) -> str:
    return "{" + ", ".join(f"'{c}'" for c in text) + ", 0}"


def hostile_variants(task: Task, source: str, backend: str, escape_dir: str) -> list[tuple]:
    """[(category, name, source, accepted statuses)] made from one verified implementation."""
    parts = _entry_parts(source, task.entry)
    if parts is None:
        return []
    start, body, names, stream = parts
    out = []

    def inject(pre: str, code: str, head: str = "") -> str:
        return head + source[:start] + pre + source[start:body] + "\n" + code + "\n" + source[body:]

    out.append(("hang", "hang_host", inject("", "for (volatile unsigned long soak_k = 0;; soak_k = soak_k + 1) { }"),
                ["timeout"]))
    target = _first_output(task, names)
    if stream and target:
        ptr, ctype, length = target
        out.append(("hang", "hang_kernel", inject(_SPIN_KERNEL, f"soak_spin<<<1, 1, 0, {stream}>>>((volatile int*)"
                                                  f"(void*){ptr}); return (int)cudaGetLastError();"), ["timeout"]))
        tail = "\nsoak_oob<<<1, 32, 0, {s}>>>(({t}*){p}, {at});\n"
        for name, at in (("oob_before", "-2"), ("oob_end", length)):
            if at is None:
                continue
            k = source.rfind("return")  # the write goes after the real work: before the entry's last return
            if k < body:
                continue
            src = source[:k] + tail.format(s=stream, t=ctype, p=ptr, at=at) + source[k:]
            src = src[:start] + _OOB_KERNEL + src[start:]
            out.append(("oob", name, src, ["wrong", "runtime_error"]))
    out.append(("crash", "crash_segv", inject("", "{ volatile int* soak_p = nullptr; *soak_p = 1; }"),
                ["runtime_error"]))
    out.append(("crash", "crash_trap", inject("", "__builtin_trap();"), ["runtime_error"]))
    out.append(("hostile", "fork", inject("", "if (fork() == 0) { for (;;) { } }", "#include <unistd.h>\n"),
                ["hack"]))
    out.append(("hostile", "file", inject("", 'fopen("soak_escape.txt", "w");', "#include <cstdio>\n"), ["hack"]))
    out.append(("hostile", "socket", inject("", "socket(2, 1, 0);", "#include <sys/socket.h>\n"), ["hack"]))
    # the same calls under names the static checks cannot read (token pasting): the sandbox must stop them
    cat = "#define SOAK_CAT(a, b) a##b\n"
    out.append(("hostile", "fork_hidden", inject(cat + 'extern "C" int SOAK_CAT(fo, rk)(void);\n',
                                                 "if (SOAK_CAT(fo, rk)() == 0) { for (;;) { } }"), ["runtime_error"]))
    out.append(("hostile", "socket_hidden", inject(cat + 'extern "C" int SOAK_CAT(soc, ket)(int, int, int);\n',
                                                   "SOAK_CAT(soc, ket)(2, 1, 0);"), ["runtime_error"]))
    path = str(Path(escape_dir) / "escaped.txt")
    out.append(("hostile", "file_hidden", inject(
        cat, f"{{ const char soak_path[] = {_c_chars(path)}; const char soak_mode[] = {_c_chars('w')}; "
        "SOAK_CAT(fo, pen)(soak_path, soak_mode); }", "#include <cstdio>\n"),
        ["runtime_error"] if backend == "cpu" else ["ok", "runtime_error"]))
    out.append(("huge_output", "huge_output", inject(
        "", 'for (int soak_i = 0; soak_i < 65536; ++soak_i) printf("%01024d\\n", soak_i);', "#include <cstdio>\n"),
        ["ok"]))
    out.append(("huge_compile", "huge_template", inject(_TEMPLATE, ""), ["compile_error"]))
    out.append(("huge_compile", "huge_constexpr", inject(_CONSTEXPR, ""), ["compile_error"]))
    return out


def candidate_pool(backend: str, escape_dir: str, per_family: int = 2, torch: bool = True) -> tuple[list, dict]:
    """(tasks, {category: [(task id, name, source, accepted)]}) before sampling."""
    tasks = base_tasks(backend, per_family, torch)
    by_cat: dict[str, list] = {c: [] for c in WEIGHTS}
    for t in tasks:
        for impl in t.implementations:
            if impl.expected == "correct":
                by_cat["correct"].append((t.id, impl.name, impl.source, ["ok"]))
            else:
                timing = backend == "cuda" and impl.defect in validate.TIMING_DEFECTS
                by_cat["wrong"].append((t.id, impl.name, impl.source, NOT_OK + (["ok"] if timing else [])))
        good = next((i for i in t.implementations if i.expected == "correct"), None)
        if good is not None:
            for cat, name, src, acc in hostile_variants(t, good.source, backend, escape_dir):
                by_cat[cat].append((t.id, name, src, acc))
    saxpy = next(t for t in tasks if t.id == json.loads((ADVERSARIAL / "saxpy_task.json").read_text())["id"])
    for name, acc in _adversarial_expected(backend).items():
        by_cat["adversarial"].append((saxpy.id, name, (ADVERSARIAL / f"{name}.cu").read_text(), sorted(acc)))
    return tasks, by_cat


def build_mix(n: int, seed: int, backend: str, escape_dir: str, per_family: int = 2, torch: bool = True,
              unique: bool = True) -> tuple[dict, list[dict]]:
    """({task id: Task}, n candidates): categories drawn by WEIGHTS, members uniformly, in a seeded order.
    unique: each source gets a comment with its number (so each is compiled, as generated code would be)."""
    tasks, by_cat = candidate_pool(backend, escape_dir, per_family, torch)
    cats = [c for c in WEIGHTS if by_cat[c]]
    rng = random.Random(seed)
    picks = rng.choices(cats, weights=[WEIGHTS[c] for c in cats], k=n)
    out = []
    for i, cat in enumerate(picks):
        tid, name, src, acc = rng.choice(by_cat[cat])
        if unique:
            src = f"// soak candidate {i}\n{src}"
        out.append({"i": i, "task": tid, "category": cat, "name": name, "source": src, "accept": list(acc)})
    return {t.id: t for t in tasks}, out
