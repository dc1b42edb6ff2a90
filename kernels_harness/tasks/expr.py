"""Safe arithmetic over config symbols: the `flops`, `min_bytes`, shape and scalar expressions of a task.

Only numbers, symbols of the config, + - * / // % **, unary minus, parentheses and the functions
min, max, ceil, floor, log2, sqrt, abs, int are allowed; anything else is a TaskError.
"""
from __future__ import annotations

import ast
import math
import warnings
from collections.abc import Mapping

from kernels_harness.tasks.errors import TaskError

_MAX_BITS = 1 << 16  # integers past this are not sizes or FLOP counts: refuse them before they take minutes


def _pow(a, b):
    if isinstance(a, int) and isinstance(b, int) and b > 0 and abs(a) > 1 and (
            b > _MAX_BITS or (abs(a).bit_length() - 1) * b > _MAX_BITS):
        raise OverflowError(f"{a}**{b} is too large" if b <= _MAX_BITS else "the power is too large")
    v = a ** b
    if isinstance(v, complex):
        raise ValueError("a negative number to a fractional power is not a real number")  # noqa: TRY004
    return v


_FUNCS = {"min": min, "max": max, "ceil": math.ceil, "floor": math.floor, "log2": math.log2,
          "sqrt": math.sqrt, "abs": abs, "int": int, "float": float}
_BINOPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
           ast.Div: lambda a, b: a / b, ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b,
           ast.Pow: _pow}


def evaluate(expr: str | float, env: Mapping[str, int | float]) -> int | float:
    """Evaluates `expr` with the config symbols in `env`; numbers pass through unchanged."""
    if isinstance(expr, (int, float)) and not isinstance(expr, bool):
        return expr
    if not isinstance(expr, str):
        raise TaskError(f"expression {expr!r} must be a string or a number")
    shown = expr if len(expr) <= 80 else expr[:77] + "..."
    try:
        tree = _parse(expr)
    except SyntaxError as e:
        raise TaskError(f"expression {shown!r} is not valid arithmetic ({e.msg})") from None
    except (ValueError, MemoryError, RecursionError) as e:  # NUL bytes, nesting deeper than the parser takes
        raise TaskError(f"expression {shown!r} is not valid arithmetic ({type(e).__name__})") from None
    try:
        return _eval(tree.body, env, shown)
    except (ArithmeticError, ValueError, TypeError, RecursionError) as e:  # 1/0, log2(0), max(), overflow
        raise TaskError(f"expression {shown!r} cannot be evaluated ({type(e).__name__}: {e})") from None


def _eval(node: ast.AST, env: Mapping[str, int | float], text: str):
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in env:
            raise TaskError(f"expression {text!r} uses {node.id!r}, which the config does not define "
                            f"(defined: {', '.join(sorted(env)) or 'nothing'})")
        return env[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        v = _BINOPS[type(node.op)](_eval(node.left, env, text), _eval(node.right, env, text))
        if isinstance(v, int) and v.bit_length() > _MAX_BITS:
            raise OverflowError("the result is too large")
        return v
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _eval(node.operand, env, text)
        return -v if isinstance(node.op, ast.USub) else v
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS
            and not node.keywords):
        return _FUNCS[node.func.id](*[_eval(a, env, text) for a in node.args])
    raise TaskError(f"expression {text!r} contains {ast.dump(node)[:40]}..., which is not allowed "
                    "(use numbers, config symbols, + - * / // % ** and min/max/ceil/floor/log2/sqrt)")


def _parse(expr: str) -> ast.Expression:
    """ast of `expr`; what Python only warns about (`2if`: "invalid decimal literal") is a SyntaxError here, so a
    malformed task file gets its one-line TaskError rather than a SyntaxWarning on stderr."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", SyntaxWarning)
        return ast.parse(expr.strip(), mode="eval")


def symbols(expr: str | float) -> set[str]:
    """The free symbols of an expression (function names excluded)."""
    if not isinstance(expr, str):
        return set()
    try:
        tree = _parse(expr)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return set()
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    return names - set(_FUNCS)
