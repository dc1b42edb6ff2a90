"""The tree-sitter CUDA parse of a candidate: kernels, macros, launches in host code.

tree-sitter and tree-sitter-cuda are optional at run time (the H200 image lacks them): `parser()`
returns None and `PARSE_UNAVAILABLE` says why, and callers report that note instead of failing.
"""
from __future__ import annotations

import ast
import dataclasses
import re
from fractions import Fraction

PARSE_UNAVAILABLE = ""
_PARSER = None

# sizeof() of the types kernels use, in bytes.
SIZEOF = {"char": 1, "bool": 1, "int8_t": 1, "uint8_t": 1, "short": 2, "int16_t": 2, "half": 2,
          "__half": 2, "__nv_bfloat16": 2, "int": 4, "unsigned": 4, "float": 4, "int32_t": 4,
          "uint32_t": 4, "unsigned int": 4, "long": 8, "long long": 8, "size_t": 8, "double": 8,
          "int64_t": 8, "uint64_t": 8, "unsigned long long": 8, "half2": 4, "__half2": 4,
          "__nv_bfloat162": 4, "float2": 8, "int2": 8, "uint2": 8, "double2": 16, "float4": 16,
          "int4": 16, "uint4": 16, "longlong2": 16, "double4": 32}
VECTOR_TYPES = {"half2", "__half2", "__nv_bfloat162", "float2", "int2", "uint2", "double2", "float4",
                "int4", "uint4", "longlong2", "double4", "char4", "uchar4", "short2", "short4"}


def parser():
    """A cached tree_sitter.Parser for CUDA, or None (with PARSE_UNAVAILABLE set) if it is missing."""
    global _PARSER, PARSE_UNAVAILABLE
    if _PARSER is None and not PARSE_UNAVAILABLE:
        try:
            import tree_sitter
            import tree_sitter_cuda
            _PARSER = tree_sitter.Parser(tree_sitter.Language(tree_sitter_cuda.language()))
        except Exception as e:  # noqa: BLE001 - any import/ABI problem means "no static analysis"
            PARSE_UNAVAILABLE = (f"static analysis skipped: tree-sitter CUDA is unavailable ({type(e).__name__}: {e}); "
                                 "install tree-sitter and tree-sitter-cuda")
    return _PARSER


def text(node) -> str:
    return node.text.decode("utf-8", "replace")


def line(node) -> int:
    return node.start_point[0] + 1


def walk(node):
    """All descendants of node (pre-order), node included."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.children))


def strip_literal(t: str) -> str:
    return re.sub(r"(?<=[0-9.])[uUlLfF]+$", "", t)


def const_eval(expr: str, macros: dict) -> Fraction | None:
    """A C constant expression (numbers, macros, + - * / % << >> and parentheses) or None."""
    expr = expr.strip()
    for _ in range(8):  # expand macros, a few levels deep
        new = re.sub(r"\b[A-Za-z_]\w*\b",
                     lambda m: f"({macros[m.group(0)]})" if m.group(0) in macros else m.group(0), expr)
        if new == expr:
            break
        expr = new
    expr = re.sub(r"(?<=[0-9.])[uUlLfF]+\b", "", expr)
    expr = re.sub(r"\(\s*(?:unsigned|int|long|size_t|float|double|const)[\w\s]*\)", "", expr)
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError:
        return None
    return _eval_const(tree.body)


def _eval_const(n) -> Fraction | None:
    if isinstance(n, ast.Constant) and isinstance(n.value, (int, float)) and not isinstance(n.value, bool):
        return Fraction(n.value)
    if isinstance(n, ast.UnaryOp) and isinstance(n.op, (ast.USub, ast.UAdd)):
        v = _eval_const(n.operand)
        return None if v is None else (-v if isinstance(n.op, ast.USub) else v)
    if isinstance(n, ast.BinOp):
        a, b = _eval_const(n.left), _eval_const(n.right)
        if a is None or b is None:
            return None
        try:
            if isinstance(n.op, ast.Add):
                return a + b
            if isinstance(n.op, ast.Sub):
                return a - b
            if isinstance(n.op, ast.Mult):
                return a * b
            if isinstance(n.op, (ast.Div, ast.FloorDiv)):
                return Fraction(int(a) // int(b)) if a.denominator == b.denominator == 1 else a / b
            if isinstance(n.op, ast.Mod):
                return Fraction(int(a) % int(b))
            if isinstance(n.op, ast.LShift):
                return Fraction(int(a) << int(b))
            if isinstance(n.op, ast.RShift):
                return Fraction(int(a) >> int(b))
        except (ZeroDivisionError, ValueError):
            return None
    return None


def macros_of(root) -> dict[str, str]:
    """`#define NAME value` (object-like) and file-scope `constexpr`/`const` integers: name -> text."""
    out: dict[str, str] = {}
    for n in walk(root):
        if n.type == "preproc_def":
            name, arg = n.child_by_field_name("name"), n.child_by_field_name("value")
            if name is not None and arg is not None:
                out[text(name)] = text(arg).strip()
        elif n.type == "declaration" and re.match(r"\s*(static\s+)?(constexpr|const)\b", text(n)):
            for d in n.children_by_field_name("declarator"):
                if d.type == "init_declarator":
                    nm, val = d.child_by_field_name("declarator"), d.child_by_field_name("value")
                    if nm is not None and nm.type == "identifier" and val is not None:
                        out.setdefault(text(nm), text(val))
    return out


@dataclasses.dataclass
class KernelDef:
    name: str
    node: object                      # the function_definition
    params: list                      # [(name, type text, is_pointer, is_const, is_restrict)]
    launch_bounds: tuple = ()         # numbers given to __launch_bounds__
    template: bool = False


def _functions(root, qualifier: str) -> list[KernelDef]:
    out = []
    for n in walk(root):
        if n.type != "function_definition" or not any(c.type == qualifier or (c.type == "attribute_specifier" and
                                                                              qualifier in text(c)) for c in n.children):
            continue
        if qualifier == "__device__" and any(c.type == "__global__" for c in n.children):
            continue
        decl = n.child_by_field_name("declarator")
        while decl is not None and decl.type != "function_declarator":
            decl = decl.child_by_field_name("declarator")
        if decl is None or decl.child_by_field_name("declarator") is None:
            continue
        name = text(decl.child_by_field_name("declarator")).split("::")[-1]
        params = []
        plist = decl.child_by_field_name("parameters")
        for p in (plist.named_children if plist is not None else []):
            if p.type != "parameter_declaration":
                continue
            ptxt = text(p)
            d = p.child_by_field_name("declarator")
            is_ptr = d is not None and d.type == "pointer_declarator"
            while d is not None and d.type not in ("identifier",):
                d = d.child_by_field_name("declarator")
            pname = text(d) if d is not None else ""
            ty = p.child_by_field_name("type")
            params.append((pname, text(ty) if ty is not None else "", is_ptr,
                           bool(re.search(r"\bconst\b", ptxt.split("*")[0])),
                           "__restrict__" in ptxt or "restrict" in ptxt))
        lb = tuple(text(c) for c in n.children if c.type == "launch_bounds")
        nums = tuple(int(x) for x in re.findall(r"\d+", lb[0])) if lb else ()
        out.append(KernelDef(name=name, node=n, params=params, launch_bounds=nums,
                             template=n.parent is not None and n.parent.type == "template_declaration"))
    return out


def kernels_of(root) -> list[KernelDef]:
    """Every __global__ function definition, templates included."""
    return _functions(root, "__global__")


def device_functions_of(root) -> dict[str, KernelDef]:
    """__device__ helper functions by name (their accesses are analysed where they are called)."""
    return {f.name: f for f in _functions(root, "__device__")}


@dataclasses.dataclass
class StaticLaunch:
    """A `kernel<<<grid, block, smem, stream>>>` in host code, with what could be evaluated."""
    kernel: str
    line: int
    grid: list | None                 # [x, y, z] when known
    block: list | None                # [x, y, z] when known
    smem: int | None                  # dynamic shared memory bytes when known
    text: str = ""


def node_eval(n, values: dict) -> Fraction | None:
    """Integer value of a host expression node from `values` (name -> Fraction), or None.

    Numbers, names, + - * / % << >>, comparisons, && ||, ?:, casts, parentheses, min/max and
    sizeof(type) are understood; / and % truncate like C integer arithmetic.
    """
    t = n.type
    if t == "number_literal":
        try:
            return Fraction(int(strip_literal(text(n)), 0)) if re.fullmatch(r"(0[xX][0-9a-fA-F]+|\d+)[uUlL]*", text(n)) \
                else Fraction(strip_literal(text(n)))
        except (ValueError, ZeroDivisionError):
            return None
    if t == "identifier":
        return values.get(text(n))
    if t in ("parenthesized_expression", "cast_expression"):
        kids = [c for c in n.named_children if c.type != "type_descriptor"]
        return node_eval(kids[-1], values) if kids else None
    if t == "sizeof_expression":
        m = re.search(r"sizeof\s*\(\s*([\w\s]+?)\s*\)", text(n))
        return Fraction(SIZEOF[m.group(1)]) if m and m.group(1) in SIZEOF else None
    if t == "conditional_expression":
        c = node_eval(n.child_by_field_name("condition"), values)
        if c is None:
            return None
        return node_eval(n.child_by_field_name("consequence" if c else "alternative"), values)
    if t == "unary_expression":
        v = node_eval(n.child_by_field_name("argument"), values)
        op = text(n.children[0])
        return None if v is None else (-v if op == "-" else v if op == "+" else Fraction(int(not v)) if op == "!" else None)
    if t == "call_expression":
        fn = text(n.child_by_field_name("function") or n).split("::")[-1]
        args = [node_eval(a, values) for a in n.child_by_field_name("arguments").named_children]
        if fn in ("min", "max", "std::min", "std::max") and len(args) == 2 and None not in args:
            return min(args) if fn.endswith("min") else max(args)
        if re.match(r"(static_cast|int|size_t)", fn) and len(args) == 1:
            return args[0]
        return None
    if t == "binary_expression":
        a, b = node_eval(n.child_by_field_name("left"), values), node_eval(n.child_by_field_name("right"), values)
        if a is None or b is None:
            return None
        op = text(n.child_by_field_name("operator"))
        ops = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
               "/": lambda: Fraction(int(a / b)) if b else None, "%": lambda: Fraction(int(a) % int(b)) if b else None,
               "<<": lambda: Fraction(int(a) << int(b)), ">>": lambda: Fraction(int(a) >> int(b)),
               "<": lambda: Fraction(a < b), ">": lambda: Fraction(a > b), "<=": lambda: Fraction(a <= b),
               ">=": lambda: Fraction(a >= b), "==": lambda: Fraction(a == b), "!=": lambda: Fraction(a != b),
               "&&": lambda: Fraction(bool(a) and bool(b)), "||": lambda: Fraction(bool(a) or bool(b))}
        return ops[op]() if op in ops else None
    return None


def _macro_values(macros: dict) -> dict:
    out = {}
    for k in macros:
        v = const_eval(k, macros)
        if v is not None:
            out[k] = v
    return out


def launches_of(root, macros: dict, entry: str | None = None, args: list | None = None) -> list[StaticLaunch]:
    """Launches in host code. Inside the function `entry`, whose parameters take the values `args`
    (by position; None where unknown), grid, block and shared memory are evaluated through the local
    variables declared before the launch; elsewhere only constant expressions are."""
    out = []
    base = _macro_values(macros)
    for n in walk(root):
        if n.type != "call_expression":
            continue
        kcs = next((c for c in n.children if c.type == "kernel_call_syntax"), None)
        if kcs is None:
            continue
        fn = n.child_by_field_name("function")
        name = text(fn).split("<")[0].split("::")[-1] if fn is not None else "?"
        host = _enclosing_function(n)
        values = dict(base)
        if host is not None and entry is not None and args is not None and _function_name(host) == entry:
            params = _param_names(host)
            values.update({p: Fraction(v) for p, v in zip(params, args) if p and v is not None})
        dim3s = _host_locals(host, n, values) if host is not None else {}
        kargs = list(kcs.named_children)
        dims = [_dims(a, values, dim3s) for a in kargs[:2]]
        smem = node_eval(kargs[2], values) if len(kargs) > 2 else Fraction(0)
        out.append(StaticLaunch(kernel=name, line=line(n), grid=dims[0] if dims else None,
                                block=dims[1] if len(dims) > 1 else None,
                                smem=int(smem) if smem is not None else None, text=text(n)[:120]))
    return out


def _function_name(fn) -> str:
    d = fn.child_by_field_name("declarator")
    while d is not None and d.type != "function_declarator":
        d = d.child_by_field_name("declarator")
    return text(d.child_by_field_name("declarator")) if d is not None else ""


def _param_names(fn) -> list[str]:
    d = fn.child_by_field_name("declarator")
    while d is not None and d.type != "function_declarator":
        d = d.child_by_field_name("declarator")
    names = []
    plist = d.child_by_field_name("parameters") if d is not None else None
    for p in (plist.named_children if plist is not None else []):
        x = p.child_by_field_name("declarator")
        while x is not None and x.type != "identifier":
            x = x.child_by_field_name("declarator")
        names.append(text(x) if x is not None else "")
    return names


def _host_locals(host, launch, values: dict) -> dict:
    """Evaluates (into `values`) the scalar locals declared before `launch`; returns dim3 locals."""
    dim3s = {}
    for d in walk(host):
        if d.start_byte >= launch.start_byte:
            break
        if d.type != "declaration":
            continue
        ty = text(d.child_by_field_name("type") or d)
        for init in d.children_by_field_name("declarator"):
            if ty == "dim3" and init.type == "function_declarator":  # `dim3 block(T, T);` parses as a prototype
                plist = init.child_by_field_name("parameters")
                env = {k: str(v) for k, v in values.items()}
                vals = [const_eval(text(p), env) for p in (plist.named_children if plist is not None else [])]
                dim3s[text(init.child_by_field_name("declarator"))] = (
                    ([int(v) for v in vals] + [1, 1, 1])[:3] if vals and None not in vals else None)
                continue
            if init.type != "init_declarator":
                continue
            nm, val = init.child_by_field_name("declarator"), init.child_by_field_name("value")
            if nm is None or val is None or nm.type != "identifier":
                continue
            if ty == "dim3":
                parts = val.child_by_field_name("arguments") if val.type == "call_expression" else val
                dim3s[text(nm)] = _dims_of(parts.named_children if parts is not None else [], values)
            else:
                v = node_eval(val, values)
                if v is not None:
                    values[text(nm)] = v
                else:
                    values.pop(text(nm), None)
    return dim3s


def _dims_of(nodes, values) -> list | None:
    vals = [node_eval(x, values) for x in nodes]
    if not vals or any(v is None for v in vals):
        return None
    return ([int(v) for v in vals] + [1, 1, 1])[:3]


def _dims(arg, values: dict, dim3s: dict) -> list | None:
    """[x, y, z] of a launch argument: a number or expression, `dim3(a, b)` or a dim3 variable."""
    if arg.type == "identifier" and text(arg) in dim3s:
        return dim3s[text(arg)]
    if arg.type == "call_expression" and text(arg.child_by_field_name("function")) == "dim3":
        return _dims_of(arg.child_by_field_name("arguments").named_children, values)
    v = node_eval(arg, values)
    return [int(v), 1, 1] if v is not None else None


def _enclosing_function(n):
    while n is not None and n.type != "function_definition":
        n = n.parent
    return n


def sizeof_eval(expr: str, macros: dict) -> Fraction | None:
    """A constant expression that may use sizeof(type), e.g. `64 * sizeof(float)`."""
    expr = re.sub(r"sizeof\s*\(\s*([\w\s]+?)\s*\)", lambda m: str(SIZEOF.get(m.group(1).strip(), "x")), expr)
    return const_eval(expr, macros)
