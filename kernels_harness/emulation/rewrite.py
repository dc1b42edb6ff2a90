"""Source rewriter of the CPU backend: turns a CUDA C++ translation unit into C++ that g++ compiles
against the emulation header (include/cudaperf_emu.h).

It works on tokens (comments, strings and preprocessor lines are kept intact; no tree-sitter needed, so
it also runs where tree-sitter is not installed) and changes only:

- `kernel<<<grid, block, smem, stream>>>(args)` -> `::cudaperf_emu::launch("kernel", grid, block, smem,
  stream, fibers, [&](auto&&... a) { kernel(a...); }, args)`, where `fibers` is 1 when the kernel (or a
  function, macro or type it names, transitively) uses a barrier or a warp collective;
- `__shared__ T x[N];` in a function -> `T (&x)[N] = ::cudaperf_emu::shared_var<T[N], ID>();`, a heap
  block per host thread (the threads of a block run on one host thread, one block at a time), poisoned
  before each block and visible to AddressSanitizer; other shapes and file scope -> `static thread_local`;
- `extern __shared__ T x[];` -> `T* x = (T*)::cudaperf_emu::dyn_smem();` inside functions; at file scope
  every later use of `x` becomes that expression;
- `volatile T*` -> `::cudaperf_emu::vptr<T>`: stores through it are warp lockstep points, so legacy
  warp-synchronous reductions compute what they compute on the GPU;
- `__noinline__` -> `__attribute__((noinline))`.

Line numbers are preserved, so compiler messages point at the user's lines. Constructs the backend cannot
run raise UnsupportedConstruct with a one-line message naming the construct and its line.
"""
from __future__ import annotations

import dataclasses
import re

SYNC_NAMES = frozenset({
    "__syncthreads", "__syncthreads_count", "__syncthreads_and", "__syncthreads_or", "__syncwarp",
    "__shfl_sync", "__shfl_up_sync", "__shfl_down_sync", "__shfl_xor_sync", "__ballot_sync", "__any_sync",
    "__all_sync", "__uni_sync", "__match_any_sync", "__reduce_add_sync", "__reduce_min_sync",
    "__reduce_max_sync", "__reduce_and_sync", "__reduce_or_sync", "__reduce_xor_sync",
})
# Names that make a kernel run its threads as fibers: the collectives, and `volatile` (warp-synchronous
# shared-memory code, see include/cudaperf_emu_volatile.h).
FIBER_NAMES = SYNC_NAMES | {"volatile"}
# With cooperative groups, these member and function names are collectives too.
CG_FIBER_NAMES = frozenset({"this_thread_block", "tiled_partition", "thread_block_tile", "sync", "shfl", "shfl_down",
                            "shfl_up", "shfl_xor", "ballot", "any", "all", "reduce", "inclusive_scan",
                            "exclusive_scan", "match_any"})
_CASTS = {"reinterpret_cast", "static_cast", "const_cast"}

# identifier -> what to call it in the error message
_UNSUPPORTED_IDENTS = {
    "asm": "inline PTX assembly (asm)", "__asm__": "inline PTX assembly (asm)", "__asm": "inline PTX assembly (asm)",
    "this_grid": "grid-wide cooperative groups (this_grid)", "this_multi_grid": "multi-grid groups (this_multi_grid)",
    "coalesced_threads": "coalesced groups (coalesced_threads)", "memcpy_async": "asynchronous copies (memcpy_async)",
    "binary_partition": "cooperative groups binary_partition", "labeled_partition": "cooperative groups labeled_partition",
    "nvcuda": "tensor-core WMMA (nvcuda::wmma)",
    "wmma": "tensor-core WMMA (wmma::)", "__pipeline_memcpy_async": "asynchronous copies (__pipeline_memcpy_async)",
    "__pipeline_commit": "asynchronous copies (__pipeline_commit)",
    "__pipeline_wait_prior": "asynchronous copies (__pipeline_wait_prior)",
    "cudaLaunchCooperativeKernel": "cooperative launches (cudaLaunchCooperativeKernel)",
    "cudaLaunchKernel": "launches through cudaLaunchKernel (use kernel<<<...>>>(...))",
    "cudaLaunchKernelEx": "launches through cudaLaunchKernelEx (use kernel<<<...>>>(...))",
    "cudaTextureObject_t": "texture objects (cudaTextureObject_t)", "tex1Dfetch": "texture fetches (tex1Dfetch)",
    "tex2D": "texture fetches (tex2D)", "cudaCreateTextureObject": "texture objects (cudaCreateTextureObject)",
    "surf2Dwrite": "surface writes (surf2Dwrite)", "cudaGraphCreate": "CUDA graphs (cudaGraphCreate)",
    "cudaStreamBeginCapture": "CUDA graphs (cudaStreamBeginCapture)",
    "__cvta_generic_to_shared": "address-space conversion (__cvta_generic_to_shared)",
}
_UNSUPPORTED_NAMESPACES = {"cuda": "libcu++ (cuda::)", "cub": "CUB (cub::)", "thrust": "Thrust (thrust::)",
                           "cute": "CuTe (cute::)", "cutlass": "CUTLASS (cutlass::)"}
_UNSUPPORTED_HEADERS = re.compile(
    r"^(cooperative_groups/(?!reduce\.h|scan\.h)|mma\.h|cub/|thrust/|cuda/|cuda_pipeline|cuda_awbarrier|cublas|cudnn|curand|cufft|"
    r"cusparse|cusolver|cutlass/|cute/|torch/|ATen/|c10/|nvrtc|cuda_fp8|cuda_fp6|cuda_fp4)")

_TOKEN = re.compile(r"""
    (?P<ws>[ \t\r\f\v]+|\\\n)
  | (?P<nl>\n)
  | (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<string>(?:u8|u|U|L)?R"(?P<delim>[^ ()\\\t\n]{0,16})\(.*?\)(?P=delim)"
              |(?:u8|u|U|L)?"(?:\\.|[^"\\\n])*"
              |(?:u8|u|U|L)?'(?:\\.|[^'\\\n])*')
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<number>\.?[0-9](?:[eEpP][+-]|[A-Za-z0-9_.'])*)
  | (?P<punct><<<|>>>|::|->|\.\.\.|.)
""", re.VERBOSE | re.DOTALL)
_PP_LINE = re.compile(r"[ \t]*#(?:[^\n\\]|\\.|\\\n)*", re.DOTALL)


class UnsupportedConstruct(ValueError):
    """The source uses something the CPU backend cannot run; the message is one line."""


@dataclasses.dataclass(frozen=True)
class Token:
    kind: str      # ident | number | string | punct | pp
    text: str
    start: int
    end: int
    line: int


@dataclasses.dataclass
class RewriteResult:
    source: str                      # the rewritten translation unit
    fiber_kernels: dict              # launched kernel base name -> True when it runs its threads as fibers
    launches: int                    # number of launch sites rewritten
    dynamic_shared: list             # names of extern __shared__ arrays


def tokenize(text: str) -> list[Token]:
    """C++ tokens of `text` without whitespace and comments; a preprocessor line is one `pp` token."""
    out: list[Token] = []
    pos, line, at_line_start = 0, 1, True
    n = len(text)
    while pos < n:
        if at_line_start:
            m = _PP_LINE.match(text, pos)
            if m:
                out.append(Token("pp", m.group(0), m.start(), m.end(), line))
                line += m.group(0).count("\n")
                pos = m.end()
                continue
        m = _TOKEN.match(text, pos)
        kind = m.lastgroup if m.lastgroup != "delim" else "string"
        if kind == "ws":
            line += m.group(0).count("\n")
        elif kind == "nl":
            line += 1
            at_line_start = True
            pos = m.end()
            continue
        elif kind == "comment":
            line += m.group(0).count("\n")
        else:
            out.append(Token(kind, m.group(0), m.start(), m.end(), line))
            at_line_start = False
        pos = m.end()
        if kind == "comment" and "\n" in m.group(0):
            at_line_start = False
    return out


def _line_breaks(span: str) -> str:
    """The line breaks of `span` (escaped ones kept escaped), to keep later line numbers unchanged."""
    return "".join(re.findall(r"\\?\n", span))


def _match_forward(toks: list[Token], i: int, open_: str, close: str) -> int:
    depth = 0
    for j in range(i, len(toks)):
        if toks[j].text == open_:
            depth += 1
        elif toks[j].text == close:
            depth -= 1
            if depth == 0:
                return j
    return -1


@dataclasses.dataclass
class _Scopes:
    in_function: list    # token index -> True if inside a function body
    functions: dict      # function / macro / type name -> set of identifiers it uses
    device_fn: list      # token index -> True if inside a __global__ or __device__ (not __host__) body


_FN_TAIL = {"const", "noexcept", "override", "final", "mutable", "volatile"}


def _scan_scopes(toks: list[Token]) -> _Scopes:
    """Which tokens are inside function bodies, and the identifiers each named entity uses."""
    in_fn = [False] * len(toks)
    dev = [False] * len(toks)
    functions: dict[str, set] = {}
    stack: list[tuple[str, str | None, bool]] = []   # (kind, name, device)
    decl_start = 0
    for i, t in enumerate(toks):
        inside = any(k == "fn" for k, _, _ in stack)
        in_fn[i] = inside
        dev[i] = any(k == "fn" and d for k, _, d in stack)
        if t.kind == "pp":
            m = re.match(r"\s*#\s*define\s+([A-Za-z_]\w*)(.*)", t.text, re.DOTALL)
            if m:
                functions.setdefault(m.group(1), set()).update(re.findall(r"[A-Za-z_]\w*", m.group(2)))
            continue
        if t.kind == "ident":
            for k, name, _ in stack:
                if name is not None:
                    functions.setdefault(name, set()).add(t.text)
        if t.text in (";", "}") and not inside:
            decl_start = i + 1
        if t.text == "{":
            kind, name, device = "other", None, False
            prev = toks[i - 1] if i else None
            if inside:
                kind = "block"
            elif prev is not None and (prev.text == ")" or prev.text in _FN_TAIL):
                j = i - 1
                while j >= 0 and toks[j].text in _FN_TAIL:
                    j -= 1
                if toks[j].text == ")":
                    depth = 0
                    while j >= 0:
                        depth += toks[j].text == ")"
                        depth -= toks[j].text == "("
                        if depth == 0:
                            break
                        j -= 1
                    if j > 0 and toks[j - 1].kind == "ident":
                        name = toks[j - 1].text
                    head = {x.text for x in toks[decl_start:i]}
                    device = ("__global__" in head or "__device__" in head) and "__host__" not in head
                    kind = "fn"
            else:
                j = i - 1
                while j >= decl_start and toks[j].text not in ("struct", "class", "union", "namespace"):
                    j -= 1
                if j >= decl_start and toks[j].text in ("struct", "class", "union") and j + 1 < i \
                        and toks[j + 1].kind == "ident":
                    name = toks[j + 1].text
            stack.append((kind, name, device))
            if not inside and kind != "fn":
                decl_start = i + 1
        elif t.text == "}" and stack:
            stack.pop()
            if not any(k == "fn" for k, _, _ in stack):
                decl_start = i + 1
    return _Scopes(in_fn, functions, dev)


def _uses_sync(name: str, functions: dict, memo: dict) -> bool:
    """True if `name` uses (transitively) a name of memo["__fiber_names__"]."""
    if name in memo:
        return memo[name]
    names = memo["__fiber_names__"]
    memo[name] = False
    seen, todo = {name}, [name]
    while todo:
        for ident in functions.get(todo.pop(), ()):
            if ident in names:
                memo[name] = True
                return True
            if ident in functions and ident not in seen:
                seen.add(ident)
                todo.append(ident)
    return False


def _check_supported(toks: list[Token]) -> None:
    for k, t in enumerate(toks):
        if t.kind == "pp":
            m = re.match(r"\s*#\s*include\s*[<\"]([^>\"]+)[>\"]", t.text)
            if m and _UNSUPPORTED_HEADERS.match(m.group(1)):
                raise UnsupportedConstruct(f"unsupported on the cpu backend: header <{m.group(1)}> "
                                           f"(line {t.line})")
            continue
        if t.kind != "ident":
            continue
        if t.text in _UNSUPPORTED_IDENTS:
            raise UnsupportedConstruct(f"unsupported on the cpu backend: {_UNSUPPORTED_IDENTS[t.text]} "
                                       f"(line {t.line})")
        if t.text in _UNSUPPORTED_NAMESPACES and k + 1 < len(toks) and toks[k + 1].text == "::" \
                and (k == 0 or toks[k - 1].text != "::"):
            raise UnsupportedConstruct(f"unsupported on the cpu backend: {_UNSUPPORTED_NAMESPACES[t.text]} "
                                       f"(line {t.line})")


def _launch_callee(toks: list[Token], i: int) -> tuple[int, str]:
    """Index of the first token of the callee that ends just before toks[i] (`<<<`) and its base name."""
    j = i - 1
    if j >= 0 and toks[j].text == ">":
        depth = 0
        while j >= 0:
            depth += toks[j].text == ">"
            depth += 2 * (toks[j].text == ">>>")
            depth -= toks[j].text == "<"
            if depth == 0:
                break
            j -= 1
        j -= 1
    if j < 0 or toks[j].kind != "ident":
        raise UnsupportedConstruct(f"cannot parse the kernel launched at line {toks[i].line}: "
                                   "write it as name<<<grid, block, smem, stream>>>(args)")
    base = toks[j].text
    while j >= 2 and toks[j - 1].text == "::" and toks[j - 2].kind == "ident":
        j -= 2
    if j >= 1 and toks[j - 1].text == "::":
        j -= 1
    return j, base


def _split_top(toks: list[Token], lo: int, hi: int) -> list[tuple[int, int]]:
    """Token ranges [a, b) of the comma-separated parts of toks[lo:hi] at bracket depth 0."""
    parts, depth, start = [], 0, lo
    for k in range(lo, hi):
        x = toks[k].text
        if x in "([{":
            depth += 1
        elif x in ")]}":
            depth -= 1
        elif x == "," and depth == 0:
            parts.append((start, k))
            start = k + 1
    parts.append((start, hi))
    return parts


def rewrite(source: str) -> RewriteResult:
    """Rewrites a CUDA translation unit for the CPU backend (see the module docstring)."""
    toks = tokenize(source)
    _check_supported(toks)
    scopes = _scan_scopes(toks)
    uses_cg = any(t.text == "cooperative_groups" or (t.kind == "pp" and "cooperative_groups" in t.text)
                  for t in toks)
    fiber_names = FIBER_NAMES | CG_FIBER_NAMES if uses_cg else FIBER_NAMES
    any_sync = any(t.kind == "ident" and t.text in fiber_names for t in toks) or any(
        t.kind == "pp" and any(s in t.text for s in fiber_names) for t in toks)
    memo: dict = {"__fiber_names__": fiber_names}
    edits: list[tuple[int, int, str]] = []
    fiber_kernels: dict[str, bool] = {}
    dyn_names: list[str] = []
    file_scope_dyn: dict[str, str] = {}
    launches = 0
    i = 0
    while i < len(toks):
        t = toks[i]
        if t.kind == "pp" and re.match(r"\s*#\s*include\s*<cooperative_groups/(reduce|scan)\.h>", t.text):
            edits.append((t.start, t.end, "#include <cooperative_groups.h>"))
        elif t.kind == "pp" and re.match(r"\s*#\s*define\b", t.text) and "<<<" in t.text:
            inner = rewrite_launches_only(t.text, scopes.functions, any_sync, memo, fiber_kernels)
            edits.append((t.start, t.end, inner))
        elif t.text == "<<<":
            if scopes.device_fn[i]:
                raise UnsupportedConstruct(f"unsupported on the cpu backend: a kernel launch inside device code "
                                           f"(dynamic parallelism, line {t.line})")
            edits.append(_launch_edit(source, toks, i, scopes.functions, any_sync, memo, fiber_kernels))
            launches += 1
        elif t.text == "volatile":
            edits.extend(_volatile_edits(toks, i))
        elif t.text == "__noinline__":
            edits.append((t.start, t.end, "__attribute__((noinline))"))
        elif t.text == "__shared__":
            edit, name, ctype = _shared_edit(source, toks, i, scopes.in_function[i])
            edits.append(edit)
            if name:
                dyn_names.append(name)
                if not scopes.in_function[i]:
                    file_scope_dyn[name] = f"(({ctype}*)::cudaperf_emu::dyn_smem())"
        elif t.kind == "ident" and t.text in file_scope_dyn and not (
                i and toks[i - 1].text in (".", "->", "::")):
            edits.append((t.start, t.end, file_scope_dyn[t.text]))
        i += 1
    return RewriteResult(_apply(source, edits), fiber_kernels, launches, dyn_names)


def rewrite_launches_only(text: str, functions: dict, any_sync: bool, memo: dict, fiber_kernels: dict) -> str:
    """Rewrites the launches inside one #define directive."""
    body = text
    toks = tokenize(re.sub(r"^\s*#", " ", body, count=1))
    m = re.match(r"\s*#\s*define\s+\w+\(([^)]*)\)", text)
    params = {x.strip() for x in m.group(1).split(",")} if m else set()
    edits = [_launch_edit(body, toks, k, functions, any_sync, memo, fiber_kernels, params)
             for k, tk in enumerate(toks) if tk.text == "<<<"]
    return _apply(body, edits)


def _launch_edit(source, toks, i, functions, any_sync, memo, fiber_kernels, macro_params=frozenset()):
    lo, base = _launch_callee(toks, i)
    label = f"#{base}" if base in macro_params else f'"{base}"'   # a macro parameter: its argument's name
    close = -1
    depth = 0
    for k in range(i + 1, len(toks)):
        x = toks[k].text
        if x in "([{":
            depth += 1
        elif x in ")]}":
            depth -= 1
        elif x == ">>>" and depth == 0:
            close = k
            break
    line = toks[i].line
    if close < 0:
        raise UnsupportedConstruct(f"a kernel launch at line {line} has no closing >>>")
    parts = _split_top(toks, i + 1, close)
    if not 2 <= len(parts) <= 4 or any(a == b for a, b in parts):
        raise UnsupportedConstruct(f"the launch of `{base}` at line {line} needs 2 to 4 configuration "
                                   "arguments: <<<grid, block, smem, stream>>>")
    if close + 1 >= len(toks) or toks[close + 1].text != "(":
        raise UnsupportedConstruct(f"the launch of `{base}` at line {line} has no argument list")
    rparen = _match_forward(toks, close + 1, "(", ")")
    if rparen < 0:
        raise UnsupportedConstruct(f"the launch of `{base}` at line {line} has an unclosed argument list")
    cfg = [source[toks[a].start:toks[b - 1].end] for a, b in parts] + ["0"] * (4 - len(parts))
    callee = source[toks[lo].start:toks[i - 1].end]
    args = source[toks[close + 1].end:toks[rparen].start].strip()
    fibers = _uses_sync(base, functions, memo) if base in functions else any_sync
    fiber_kernels[base] = fiber_kernels.get(base, False) or fibers
    text = (f'::cudaperf_emu::launch({label}, {cfg[0]}, {cfg[1]}, {cfg[2]}, {cfg[3]}, {int(fibers)}, '
            f'[&](auto&&... cudaperf_a) {{ {callee}(cudaperf_a...); }}' + (f", {args})" if args else ")"))
    span = source[toks[lo].start:toks[rparen].end]
    return toks[lo].start, toks[rparen].end, text.replace("\n", " ") + _line_breaks(span)


def _shared_edit(source, toks, i, in_function):
    """The edit for the `__shared__` at toks[i]; (edit, dyn_name, dyn_ctype) with dyn_name None if static."""
    j = i - 1
    while j >= 0 and toks[j].text not in (";", "{", "}", ")", ":") and toks[j].kind != "pp":
        j -= 1
    head = [x.text for x in toks[j + 1:i]]
    if "extern" not in head:
        if in_function:
            edit = _static_shared_edit(source, toks, i, j)
            if edit:
                return edit, None, None
        repl = "thread_local" if "static" in head else "static thread_local"
        return (toks[i].start, toks[i].end, repl), None, None
    end = i
    while end < len(toks) and toks[end].text != ";":
        end += 1
    decl, k = [], j + 1
    while k < end:
        x = toks[k]
        if x.text in ("extern", "__shared__"):
            k += 1
            continue
        if x.text in ("__align__", "alignas", "__attribute__", "__declspec") and k + 1 < end \
                and toks[k + 1].text == "(":
            k = _match_forward(toks, k + 1, "(", ")") + 1
            continue
        decl.append(x)
        k += 1
    texts = [x.text for x in decl]
    if len(texts) < 4 or texts[-2:] != ["[", "]"] or decl[-3].kind != "ident" or "," in texts:
        raise UnsupportedConstruct(f"unsupported on the cpu backend: the extern __shared__ declaration at line "
                                   f"{toks[i].line}; write it as `extern __shared__ T name[];`")
    name = decl[-3].text
    ctype = " ".join(texts[:-3])
    start, stop = toks[j + 1].start, toks[end].end
    if in_function:
        repl = f"{ctype}* {name} = ({ctype}*)::cudaperf_emu::dyn_smem();"
    else:
        repl = ""
    return (start, stop, repl + _line_breaks(source[start:stop])), name, ctype


_SHARED_IDS = iter(range(1, 1 << 30))
_SKIP_IN_DECL = {"__shared__", "static"}


def _static_shared_edit(source, toks, i, j):
    """`__shared__ T a[N][M], b;` inside a function -> references to per-block heap blocks:
    `T (&a)[N][M] = ::cudaperf_emu::shared_var<T[N][M], ID>(); T& b = ...;` (None if the declaration has
    another shape; it then stays a static thread_local). Heap blocks let AddressSanitizer see overflows of
    static shared memory, and the runtime fills them with 0xFF bytes before every block."""
    end = i
    while end < len(toks) and toks[end].text not in (";", "{", "}"):
        end += 1
    if end >= len(toks) or toks[end].text != ";":
        return None
    body, k = [], j + 1
    while k < end:
        x = toks[k]
        if x.text in _SKIP_IN_DECL:
            k += 1
            continue
        if x.text in ("__align__", "alignas", "__attribute__") and k + 1 < end and toks[k + 1].text == "(":
            k = _match_forward(toks, k + 1, "(", ")") + 1
            continue
        body.append(x)
        k += 1
    parts, depth, cur = [], 0, []
    for x in body:
        if x.text in ("<", "[", "("):
            depth += 1
        elif x.text in (">", "]", ")"):
            depth -= 1
        if x.text == "," and depth == 0:
            parts.append(cur)
            cur = []
        else:
            cur.append(x)
    parts.append(cur)
    decls = []
    for n, part in enumerate(parts):
        m = len(part)
        while m > 0 and part[m - 1].text == "]":       # trailing [..] groups
            depth, m = 0, m - 1
            while m >= 0:
                depth += part[m].text == "]"
                depth -= part[m].text == "["
                if depth == 0:
                    break
                m -= 1
            if m < 0:
                return None
        if m <= 0 or part[m - 1].kind != "ident":
            return None
        name, type_toks, dims = part[m - 1], part[:m - 1], part[m:]
        if n == 0:
            if not type_toks or any(x.text in ("*", "&", "=", "(", ")", "extern") for x in type_toks):
                return None
            ctype = source[type_toks[0].start:type_toks[-1].end]
        elif type_toks:
            return None
        if any(x.text in ("=", "(") for x in dims):
            return None
        decls.append((name.text, source[dims[0].start:dims[-1].end] if dims else ""))
    out = []
    for name, dims in decls:
        ref = f"({'&'}{name}){dims}" if dims else f"&{name}"
        out.append(f"{ctype} {ref} = ::cudaperf_emu::shared_var<{ctype}{dims}, {next(_SHARED_IDS)}>();")
    start, stop = toks[j + 1].start, toks[end].end
    return start, stop, " ".join(out).replace("\n", " ") + _line_breaks(source[start:stop])


def _volatile_edits(toks, i) -> list:
    """`volatile T *` -> `::cudaperf_emu::vptr<T>`. A parameter of a function definition keeps its type (so
    template arguments are still deduced) and is wrapped at the top of the body instead."""
    if i >= 2 and toks[i - 1].text == "<" and toks[i - 2].text in _CASTS:
        return []
    j, depth, type_toks = i + 1, 0, []
    while j < len(toks):
        x = toks[j]
        if x.text == "<":
            depth += 1
        elif x.text == ">":
            depth -= 1
        elif x.text == "*" and depth == 0:
            break
        elif not (x.kind in ("ident", "number") or x.text == "::" or (x.text == "," and depth > 0)) \
                or x.text in ("__shared__", "__restrict__", "const"):
            return []
        type_toks.append(x.text)
        j += 1
    if j >= len(toks) or not type_toks:
        return []
    ctype = " ".join(type_toks)
    end = toks[j].end
    k = j + 1
    while k < len(toks) and toks[k].text in ("__restrict__", "__restrict", "restrict", "const"):
        k += 1
    param = _parameter_of_definition(toks, i, k)
    if param is not None:
        name_tok, brace = param
        raw = f"{name_tok.text}_cudaperf_raw"
        return [(name_tok.start, name_tok.end, raw),
                (brace.end, brace.end, f" ::cudaperf_emu::vptr<{ctype}> {name_tok.text} = {raw};")]
    if toks[j + 1].text in ("__restrict__", "__restrict", "restrict"):
        end = toks[j + 1].end
    return [(toks[i].start, end, f"::cudaperf_emu::vptr<{ctype}> ")]


def _parameter_of_definition(toks, i, k):
    """(name token, body `{` token) if toks[i:k] starts a named parameter of a function definition."""
    if k >= len(toks) or toks[k].kind != "ident" or k + 1 >= len(toks) or toks[k + 1].text not in (",", ")", "="):
        return None
    depth, lp = 0, -1
    for m in range(i - 1, -1, -1):
        x = toks[m].text
        if x in (";", "{", "}"):
            return None
        if x == ")":
            depth += 1
        elif x == "(":
            if depth == 0:
                lp = m
                break
            depth -= 1
    if lp <= 0 or not (toks[lp - 1].kind == "ident" or toks[lp - 1].text in (">", "]")):
        return None
    rp = _match_forward(toks, lp, "(", ")")
    if rp < 0:
        return None
    b = rp + 1
    while b < len(toks) and toks[b].text in _FN_TAIL:
        b += 1
    return (toks[k], toks[b]) if b < len(toks) and toks[b].text == "{" else None


def _apply(source: str, edits: list[tuple[int, int, str]]) -> str:
    out, pos = [], 0
    for a, b, text in sorted(edits):
        if a < pos:
            continue
        out.append(source[pos:a])
        out.append(text)
        pos = b
    out.append(source[pos:])
    return "".join(out)
