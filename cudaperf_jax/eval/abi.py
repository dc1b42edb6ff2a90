"""Why a judged answer failed on the solution ABI (README "Task files") rather than on its computation.

    category = classify(task, source, result, completion=text, truncated=False)   # a CATEGORIES name or None

One category per answer, or None: the answer is fine (`ok`), or it failed on what it computes (a wrong result, a
crash, a compile error inside a kernel), or it is not about the ABI at all (`hack`, `unchecked`, an answer cut at the
token budget). Categories, checked in this order:

  no_code                  no code at all (prose, an empty answer): nothing with braces, no include, no kernel
  echoed_prototype         the exported prototype (or another declaration) with no definition and no kernel
  kernel_named_like_export a __global__ named like the entry in a failing answer: beside the export nvcc says "cannot
                           overload functions distinguished by return type alone", "more than one instance of
                           overloaded function has "C" linkage" or, where a launch's arguments pick the export, "a host
                           function call cannot be configured" (g++ on the cpu backend: "ambiguating new declaration",
                           "conflicting declaration of C function", or the launch runs the export)
  missing_export           no extern "C" function at all (the entry with C++ linkage, only kernels, a main)
  misnamed_export          extern "C" functions, none named like the entry
  signature_mismatch       the export exists with another parameter list: a compiler's "C" linkage conflict with
                           a declaration of the entry, or parameters whose ABI types (pointer or not, element type
                           and width, the trailing stream) differ from the task's (const and names do not count)
  const_mismatch           a `const T*` input passed where a kernel or function takes `T*` (nvcc: argument of
                           type "const float *" is incompatible with parameter of type "float *")
  example_name_copied      a name of the prompt's worked example is undefined: the answer launches or calls the
                           example's kernel beside a kernel of its own (nvcc: identifier "vec_add_kernel" is
                           undefined; g++: 'vec_add_kernel' was not declared), or its kernel body is the example's,
                           using the example's parameters (out_d1, alpha) that the task does not have
  undeclared_size          a size-like identifier is undefined (nvcc: identifier "N" is undefined; g++: 'N' was not
                           declared in this scope): a symbol of the task (config, scalar, module constant), an
                           ALL_CAPS name or a common size word, not called as a function

The compile log is the harness's (EvalResult.compile_log): nvcc's on the cuda backend, g++'s on the cpu backend
(the emulation layer compiles the rewritten source with g++); both wordings are recognised.
"""
from __future__ import annotations

import functools
import re

from kernels_harness.hacks import strip_comments_and_strings

CATEGORIES = ("no_code", "echoed_prototype", "kernel_named_like_export", "missing_export", "misnamed_export",
              "signature_mismatch", "const_mismatch", "example_name_copied", "undeclared_size")
FAILED = ("compile_error", "runtime_error", "wrong", "timeout")

_EXTERN_C = r'extern\s*"\s*"'      # extern "C" after strip_comments_and_strings blanked the literal
_FUNC = re.compile(r"(?P<head>[A-Za-z_][\w\s\*&:<>,]*?)\b(?P<name>[A-Za-z_]\w*)\s*\((?P<params>[^()]*(?:\([^()]*\)"
                   r"[^()]*)*)\)\s*(?:const\s*)?(?P<end>[{;])")
_KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "catch", "decltype", "static_assert", "alignof"}
_SIZE_WORDS = re.compile(r"^(n|m|k|num_?\w*|\w*_?(size|sizes|len|length|dim|dims|count|rows|cols|columns|width|"
                         r"height|depth|stride|strides|elements|numel|total|features|channels|batch))$", re.IGNORECASE)
_UNDEFINED = (re.compile(r'identifier "(\w+)" is undefined'),                       # nvcc
              re.compile(r"'(\w+)' was not declared in this scope"),                # g++
              re.compile(r"'(\w+)' (?:has not been|was not) declared"))
_CONST = (re.compile(r'argument of type "const ([\w ]+?) ?\*" is incompatible with parameter of type "\1 ?\*"'),
          re.compile(r'a value of type "const ([\w ]+?) ?\*" cannot be (?:used to initialize|assigned to) an entity '
                     r'of type "\1 ?\*"'),
          re.compile(r"invalid conversion from 'const ([\w ]+?) ?\*' to '\1 ?\*'"),
          re.compile(r"binding reference of type '[^']*' to '[^']*' discards qualifiers"))
_LINKAGE = (re.compile(r'more than one instance of overloaded function "(\w+)" has "C" linkage'),
            re.compile(r"conflicting declaration of C function '[^']*?\b(\w+)\("))
_NOT_EXPORTED = ("does not export", "undefined symbol")


def classify(task, source: str, result, truncated: bool = False) -> str | None:
    """The ABI category of a judged answer (CATEGORIES), or None. task: kernels_harness Task; source: the CUDA
    source judged (prompts.extract_solution of the answer); result: its EvalResult (status, compile_log, error);
    truncated: the answer was cut at the token budget (its failure is its length: None)."""
    status = getattr(result, "status", None)
    if status not in FAILED or truncated:
        return None
    code = _plain(source or "")
    log = getattr(result, "compile_log", "") or ""
    entry = task.entry
    funcs = functions(code)
    kernels = {f["name"] for f in funcs if "__global__" in f["head"]}
    defined = [f for f in funcs if f["defined"] and not re.search(r"__(global|device)__", f["head"])]
    exported = [f for f in defined if f["extern_c"]]
    if not kernels and not any(f["defined"] for f in funcs):
        if any(f["name"] == entry or f["extern_c"] for f in funcs):
            return "echoed_prototype"
        if not re.search(r"[{}]|#\s*include", code):
            return "no_code"
    conflict = status == "compile_error" and _linkage_conflict(log, entry)
    if entry in kernels:   # beside the export it fails to compile, or a launch picks the export (the cpu backend)
        return "kernel_named_like_export"
    entry_defs = [f for f in exported if f["name"] == entry]
    if not entry_defs and not conflict:
        return "misnamed_export" if exported else "missing_export"
    if conflict:
        return "signature_mismatch"
    if status == "compile_error" and any(p.search(log) for p in _CONST):
        return "const_mismatch"
    if status == "compile_error" and _example_copied(task, _undefined(log), {f["name"] for f in funcs if f["defined"]}):
        return "example_name_copied"
    if status == "compile_error" and _undeclared_size(task, code, log):
        return "undeclared_size"
    if entry_defs and not _same_abi(entry_defs[-1]["params"], task):
        return "signature_mismatch"
    if status == "runtime_error" and any(m in (getattr(result, "error", "") or "") for m in _NOT_EXPORTED):
        return "missing_export"
    return None


def _plain(source: str) -> str:
    """The source with comments, string literals, attributes and launch bounds blanked (line numbers kept)."""
    code, _ = strip_comments_and_strings(source)
    blank = lambda m: re.sub(r"[^\n]", " ", m.group(0))
    code = re.sub(r"__launch_bounds__\s*\([^()]*\)", blank, code)
    return re.sub(r"__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)", blank, code)


def functions(code: str) -> list[dict]:
    """Function declarations and definitions in comment- and string-blanked code:
    [{"name", "head" (what precedes the name), "params" (text), "defined" (a body follows), "extern_c"}]."""
    blocks = _extern_c_blocks(code)
    out = []
    for m in _FUNC.finditer(code):
        name, head = m.group("name"), m.group("head")
        if name in _KEYWORDS or re.search(r"(^|\W)(return|new|else|throw)\s*$", head) or "=" in head:
            continue
        start = m.start("name")
        line_start = code.rfind("\n", 0, m.start()) + 1
        prefix = code[max(0, line_start - 200):start]
        extern_c = bool(re.search(_EXTERN_C + r"[^;{}]*$", prefix)) or any(a <= start < b for a, b in blocks)
        out.append({"name": name, "head": head.strip(), "params": m.group("params").strip(),
                    "defined": m.group("end") == "{", "extern_c": extern_c})
    return out


def _extern_c_blocks(code: str) -> list[tuple[int, int]]:
    """[start, end) of every `extern "C" { ... }` block."""
    spans = []
    for m in re.finditer(_EXTERN_C + r"\s*\{", code):
        depth, i = 0, m.end() - 1
        for i in range(m.end() - 1, len(code)):
            depth += {"{": 1, "}": -1}.get(code[i], 0)
            if depth == 0:
                break
        spans.append((m.end(), i))
    return spans


def _linkage_conflict(log: str, entry: str) -> bool:
    return any(m.group(1) == entry for p in _LINKAGE for m in p.finditer(log))


def task_symbols(task) -> set[str]:
    """Names that stand for sizes in the task: config keys, scalar arguments, shape symbols, a Python source's
    module-level constants (KernelBench's `batch_size = 16`) and the exported function's non-pointer parameters
    (a torch2cuda export's `out_d1`)."""
    names = {k for c in task.configs for k in c if k != "name"}
    for a in task.signature:
        names.add(a.name) if not a.is_array else names.update(str(s) for s in a.shape)
    names |= set(task.extra.get("constants") or [])
    for param in _prototype_params(task):   # the export's scalars and dims (out_d1): a kernel using them unpassed
        if "*" not in param and "cudaStream_t" not in param:
            names.add(_param_name(param))
    names |= set(re.findall(r"(?m)^([A-Za-z_]\w*)\s*=\s*[-\d(]", task.source or ""))
    return {n for n in names if re.fullmatch(r"[A-Za-z_]\w*", n)}


def _undefined(log: str) -> set[str]:
    """The identifiers a compile log calls undefined (nvcc's and g++'s wordings)."""
    return {m.group(1) for pat in _UNDEFINED for m in pat.finditer(log)}


@functools.cache
def example_names() -> frozenset[str]:
    """The functions and kernels the prompts' worked examples define (cudaperf_jax.prompts.variants.ALL_EXAMPLES)."""
    from cudaperf_jax.prompts.variants import ALL_EXAMPLES
    return frozenset(f["name"] for examples in ALL_EXAMPLES for *_, answer in examples.values()
                     for f in functions(_plain(answer)) if f["defined"])


@functools.cache
def example_params() -> frozenset[str]:
    """The parameter names of the worked examples' kernels and exports longer than one letter (out_d1, alpha)."""
    from cudaperf_jax.prompts.variants import ALL_EXAMPLES
    return frozenset(name for examples in ALL_EXAMPLES for *_, answer in examples.values()
                     for f in functions(_plain(answer)) if f["defined"]
                     for name in map(_param_name, _split_params(f["params"])) if len(name) > 1)


def _example_copied(task, undefined: set[str], defined: set[str]) -> bool:
    """An undefined name is the worked example's own: its kernel or function (vec_add_kernel), or one of its
    parameters that the task does not have (out_d1 in a C task; a body copied from the example)."""
    if undefined & (example_names() - defined):
        return True
    own = task_symbols(task)
    return any(n in example_params() and n not in own and not _SIZE_WORDS.match(n) for n in undefined)


def _undeclared_size(task, code: str, log: str) -> bool:
    symbols = task_symbols(task)
    for name in _undefined(log):
        if re.search(r"\b" + re.escape(name) + r"\s*\(", code):   # called: an undefined function, not a size
            continue
        if name in symbols or (name.isupper() and len(name) > 0) or _SIZE_WORDS.match(name):
            return True
    return False


# ---- ABI types of parameter lists -------------------------------------------------------------------------------
_SYNONYMS = [(r"\bunsigned\s+long\s+long(\s+int)?\b", "i8"), (r"\blong\s+long(\s+int)?\b", "i8"),
             (r"\bunsigned\s+long(\s+int)?\b", "i8"), (r"\blong(\s+int)?\b", "i8"),
             ((r"\b(u?int64_t|size_t|ssize_t|"
               r"ptrdiff_t|intptr_t|uintptr_t)\b"), "i8"),
             (r"\bunsigned(\s+int)?\b", "i4"), (r"\b(u?int32_t|int)\b", "i4"),
             (r"\b(u?int16_t|short)\b", "i2"), (r"\b(u?int8_t|char|signed\s+char|unsigned\s+char)\b", "i1"),
             (r"\bdouble\b", "f8"), (r"\bfloat\b", "f4"), (r"\b(__half|half)\b", "f2"),
             (r"\b(__nv_bfloat16|nv_bfloat16|bfloat16)\b", "bf2"), (r"\bbool\b", "b1"),
             (r"\bcudaStream_t\b", "stream")]
_QUALIFIERS = re.compile(r"\b(const|volatile|__restrict__|__restrict|restrict|struct|register)\b")


def abi_type(param: str) -> str:
    """The ABI-relevant type of one parameter declaration: "i4", "f4*", "stream", ... (names, const, restrict and
    integer signedness dropped; widths kept); "?" when unrecognised."""
    p = _QUALIFIERS.sub(" ", param.split("=")[0])
    stars = p.count("*") + p.count("[")
    p = re.sub(r"[\*\[\]&]", " ", p)
    words = p.split()
    if len(words) > 1 and not re.search(r"\b(long|unsigned|short|signed|int|char)\s*$", " ".join(words)):
        words = words[:-1]                                   # the parameter's name
    t = " ".join(words)
    for pat, rep in _SYNONYMS:
        if re.fullmatch(pat, t):
            t = rep
            break
    else:
        t = "void" if t == "void" else "?"
    return t + "*" * stars


def _same_abi(params: str, task) -> bool:
    """Whether a definition's parameter list passes the task's arguments the way the harness calls it."""
    got = [abi_type(p) for p in _split_params(params)]
    want = [abi_type(p) for p in _prototype_params(task)]
    if got == ["void"]:
        got = []
    if len(got) != len(want):
        return False
    for g, w in zip(got, want):
        if "?" in g or g == w or (g.startswith("void*") and w.endswith("*")):
            continue   # a type this reader does not know (a typedef, a template) is given the benefit of the doubt
        return False
    return True


def _param_name(param: str) -> str:
    """The name a parameter declaration declares (`const float* __restrict__ x` -> x)."""
    return re.findall(r"\w+", param)[-1]


def _prototype_params(task) -> list[str]:
    """The parameters of the task's exported prototype (the solution ABI), one declaration each."""
    return _split_params(task.c_prototype().split("(", 1)[1].rsplit(")", 1)[0])


def _split_params(params: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for c in params:
        depth += {"<": 1, "(": 1, ">": -1, ")": -1}.get(c, 0)
        if c == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += c
    return [p for p in out + [cur.strip()] if p]
