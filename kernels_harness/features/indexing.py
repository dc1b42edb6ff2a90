"""Abstract values of index expressions: how an integer depends on the thread index.

A Form records, for each of threadIdx.x/y/z, the coefficient with which the value changes from one
thread to the next: a pair (a, b) meaning a + b*BIG, where `a` is a known stride and BIG a stride that
is uniform across the block but unknown at compile time (a kernel parameter such as `cols`, taken as
at least a sector); SYM = (0, 1). Each part is applied with its own floor, so `(tid / 16) * ld +
tid % 16` keeps its two 16-element row segments. None means not affine in the thread index. `indirect` marks values read from memory (gathers). Everything uniform across a block
(parameters, blockIdx, blockDim, gridDim, loop counters with uniform bounds) has zero coefficients.
"""
from __future__ import annotations

import dataclasses
import re
from fractions import Fraction

from kernels_harness.features.parse import SIZEOF, const_eval, strip_literal, text

ZERO = (Fraction(0), Fraction(0))
ONE = (Fraction(1), Fraction(0))
SYM = (Fraction(0), Fraction(1))
AXES = ("x", "y", "z")


def c_add(a, b):
    if a is None or b is None:
        return None
    return (a[0] + b[0], a[1] + b[1])


def c_scale(c, k):
    """Coefficient c times a uniform factor k (a Fraction, or SYM when unknown)."""
    if c == ZERO or (isinstance(k, Fraction) and k == 0):
        return ZERO
    if c is None:
        return None
    if isinstance(k, Fraction):
        return (c[0] * k, c[1] * k)
    return (Fraction(0), c[1] if c[1] else c[0])  # times an unknown large value: large (BIG*BIG ~ BIG)


def is_sym(c) -> bool:
    return c is not None and c[1] != 0


@dataclasses.dataclass(frozen=True)
class Form:
    t: tuple = (ZERO, ZERO, ZERO)     # coefficients of threadIdx.x, .y, .z
    const: Fraction | None = None     # the value, when a compile-time constant
    indirect: bool = False            # depends on a value loaded from memory

    @property
    def uniform(self) -> bool:
        return all(c == ZERO for c in self.t)

    @property
    def affine(self) -> bool:
        return all(c is not None for c in self.t)

    @property
    def tx(self):
        return self.t[0]


UNIFORM = Form()
NONLINEAR = Form(t=(None, None, None))


def constant(v) -> Form:
    return Form(const=Fraction(v))


def add(a: Form, b: Form, sign: int = 1) -> Form:
    const = a.const + sign * b.const if a.const is not None and b.const is not None else None
    return Form(tuple(c_add(x, c_scale(y, Fraction(sign))) for x, y in zip(a.t, b.t)), const, a.indirect or b.indirect)


def scale(a: Form, k) -> Form:
    """a times a uniform factor k (Fraction or SYM)."""
    const = a.const * k if a.const is not None and isinstance(k, Fraction) else None
    return Form(tuple(c_scale(c, k) for c in a.t), const, a.indirect)


def mul(a: Form, b: Form) -> Form:
    if a.uniform and b.uniform:
        const = a.const * b.const if a.const is not None and b.const is not None else None
        return Form(const=const, indirect=a.indirect or b.indirect)
    if a.uniform or b.uniform:
        u, v = (a, b) if a.uniform else (b, a)
        out = scale(v, u.const if u.const is not None else SYM)
        return dataclasses.replace(out, indirect=out.indirect or u.indirect)
    return dataclasses.replace(NONLINEAR, indirect=a.indirect or b.indirect)


def div(a: Form, b: Form) -> Form:
    if a.uniform and b.uniform:
        const = None
        if a.const is not None and b.const:
            const = Fraction(int(a.const) // int(b.const)) if a.const.denominator == 1 == b.const.denominator else a.const / b.const
        return Form(const=const, indirect=a.indirect or b.indirect)
    if b.uniform and b.const:
        out = scale(a, 1 / b.const)
        # integer division: a thread stride of at most 1/32 gives one value per (aligned) warp
        tx = out.t[0]
        if tx is not None and tx[1] == 0 and abs(tx[0]) <= Fraction(1, 32):
            out = Form((ZERO,) + out.t[1:], out.const, out.indirect)
        return out
    if b.uniform:
        # idx / cols with a runtime divisor: taken as large (>= 32), so one value per warp
        return Form((ZERO,) + tuple(c_scale(c, SYM) for c in a.t[1:]), None, a.indirect or b.indirect)
    return dataclasses.replace(NONLINEAR, indirect=a.indirect or b.indirect)


def join(a: Form, b: Form) -> Form:
    """Either of two values (a ternary, a variable assigned on two paths)."""
    if a.t == b.t:
        return Form(a.t, a.const if a.const == b.const else None, a.indirect or b.indirect)
    return dataclasses.replace(NONLINEAR, indirect=a.indirect or b.indirect)


def depends_on_thread(f: Form) -> bool:
    return not f.uniform


class Evaluator:
    """Evaluates expression nodes to Forms in an environment of variables.

    env: name -> Form (locals assigned so far); macros: name -> text (#define / constexpr);
    pointers: names of global-memory pointers and shared arrays (reading them makes a value indirect).
    """

    def __init__(self, macros: dict, env: dict | None = None):
        self.macros = macros
        self.env: dict[str, Form] = dict(env or {})

    def __call__(self, n) -> Form:
        t = n.type
        if t in ("parenthesized_expression", "condition_clause"):
            kids = [c for c in n.named_children if c.type != "comment"]
            return self(kids[-1]) if kids else UNIFORM
        if t == "number_literal":
            try:
                return constant(Fraction(strip_literal(text(n)).lower().replace("'", ""))) if "x" not in text(n).lower() \
                    else constant(int(strip_literal(text(n)), 16))
            except (ValueError, ZeroDivisionError):
                return UNIFORM
        if t in ("true", "false", "char_literal", "string_literal", "null", "nullptr"):
            return UNIFORM
        if t == "identifier":
            name = text(n)
            if name in self.env:
                return self.env[name]
            if name in self.macros:
                v = const_eval(name, self.macros)
                return constant(v) if v is not None else UNIFORM
            if name == "warpSize":
                return constant(32)
            return UNIFORM
        if t == "field_expression":
            arg, field = n.child_by_field_name("argument"), n.child_by_field_name("field")
            base = text(arg) if arg is not None else ""
            f = text(field) if field is not None else ""
            if base == "threadIdx" and f in AXES:
                t3 = [ZERO, ZERO, ZERO]
                t3[AXES.index(f)] = ONE
                return Form(tuple(t3))
            if base in ("blockIdx", "blockDim", "gridDim"):
                return UNIFORM
            return self(arg) if arg is not None and arg.type != "identifier" else UNIFORM
        if t in ("cast_expression",):
            v = n.child_by_field_name("value")
            return self(v) if v is not None else UNIFORM
        if t == "sizeof_expression":
            m = re.search(r"sizeof\s*\(\s*([\w\s]+?)\s*\)", text(n))
            return constant(SIZEOF[m.group(1)]) if m and m.group(1) in SIZEOF else UNIFORM
        if t == "unary_expression":
            op, arg = text(n.children[0]), n.child_by_field_name("argument")
            v = self(arg) if arg is not None else UNIFORM
            if op == "-":
                return scale(v, Fraction(-1))
            if op == "+":
                return v
            return v if v.uniform else dataclasses.replace(NONLINEAR, indirect=v.indirect)
        if t == "binary_expression":
            return self._binary(n)
        if t == "conditional_expression":
            c = self(n.child_by_field_name("condition"))
            a, b = self(n.child_by_field_name("consequence")), self(n.child_by_field_name("alternative"))
            if a.uniform != b.uniform:  # a clamp (i < 0 ? 0 : i): the thread-dependent branch decides
                return a if not a.uniform else b
            out = join(a, b)
            if not c.uniform and a.const != b.const and out.uniform:
                out = dataclasses.replace(NONLINEAR, indirect=out.indirect)
            return out
        if t in ("subscript_expression", "pointer_expression") and not text(n).startswith("&"):
            inner = n.child_by_field_name("indices") if t == "subscript_expression" else n.child_by_field_name("argument")
            v = self(inner) if inner is not None else UNIFORM
            return Form(const=None, indirect=True) if v.uniform else dataclasses.replace(NONLINEAR, indirect=True)
        if t == "subscript_argument_list":
            kids = n.named_children
            return self(kids[0]) if kids else UNIFORM
        if t == "call_expression":
            return self._call(n)
        if t in ("assignment_expression",):
            return self(n.child_by_field_name("right"))
        if t == "comma_expression":
            return self(n.named_children[-1])
        # anything else: uniform if all its parts are
        parts = [self(c) for c in n.named_children]
        if all(p.uniform for p in parts):
            return Form(indirect=any(p.indirect for p in parts))
        return dataclasses.replace(NONLINEAR, indirect=any(p.indirect for p in parts))

    def _binary(self, n) -> Form:
        op = text(n.child_by_field_name("operator"))
        a, b = self(n.child_by_field_name("left")), self(n.child_by_field_name("right"))
        if op == "+":
            return add(a, b)
        if op == "-":
            return add(a, b, -1)
        if op == "*":
            return mul(a, b)
        if op == "/":
            return div(a, b)
        if op == "<<" and b.uniform:
            return mul(a, constant(2 ** int(b.const)) if b.const is not None and 0 <= b.const < 64 else UNIFORM)
        if op == ">>" and b.uniform:
            return div(a, constant(2 ** int(b.const)) if b.const is not None and 0 <= b.const < 64 else UNIFORM)
        if op in ("%", "&") and b.uniform:
            # lane = tid % 32 or tid & 31: the low bits keep the thread's stride
            if a.uniform:
                const = None
                if a.const is not None and b.const is not None and b.const != 0:
                    const = Fraction(int(a.const) % int(b.const)) if op == "%" else Fraction(int(a.const) & int(b.const))
                return Form(const=const, indirect=a.indirect or b.indirect)
            return Form(a.t, None, a.indirect or b.indirect)
        if a.uniform and b.uniform:
            return Form(indirect=a.indirect or b.indirect)
        return dataclasses.replace(NONLINEAR, indirect=a.indirect or b.indirect)

    def _call(self, n) -> Form:
        fn = n.child_by_field_name("function")
        name = text(fn) if fn is not None else ""
        base = re.sub(r"<.*", "", name).split("::")[-1]
        argl = n.child_by_field_name("arguments")
        args = [self(a) for a in (argl.named_children if argl is not None else [])]
        if base in ("static_cast", "reinterpret_cast", "__float2int_rz", "int", "size_t") and len(args) == 1:
            return args[0]
        if base in ("__mul24", "__umul24") and len(args) == 2:
            return mul(*args)
        if base in ("min", "max", "umin", "umax", "imin", "imax", "fminf", "fmaxf") and len(args) == 2:
            a, b = args
            if a.uniform and not b.uniform:
                return b
            if b.uniform and not a.uniform:
                return a
            return join(a, b)
        if base.startswith(("__ldg", "__ldcs", "__ldca", "__ldcg", "__ldlu", "__ldcv")):
            u = all(a.uniform for a in args)
            return Form(indirect=True) if u else dataclasses.replace(NONLINEAR, indirect=True)
        if all(a.uniform for a in args):
            return Form(indirect=any(a.indirect for a in args))
        return dataclasses.replace(NONLINEAR, indirect=any(a.indirect for a in args))
