"""Typed configs: one frozen dataclass tree per stage, and the ml_collections ConfigDict that absl's --config edits.

    @dataclasses.dataclass(frozen=True)
    class HarnessConfig:
        backend: str = "auto"          # auto | cpu | cuda          <- the comment is the field's help text
        workers: int = 0               # harness worker processes (0: the pool's default)

    cd = to_configdict(RLConfig())               # a config file starts from the defaults and sets what differs
    cfg = from_configdict(RLConfig, cd)          # typed and validated; an unknown field is refused in one sentence
    field_docs(RLConfig)                         # {"harness.backend": "auto | cpu | cuda", ...}
    flat_fields(cd)                              # {"harness.backend": "auto", ...}

Each dataclass validates its own values in `__post_init__` (raising ValueError, TypeError or ConfigFieldError);
`from_configdict` adds the checks every config shares: unknown fields (naming the nearest real one), and values of
the wrong type (an int where a float goes is taken as a float; a list or a comma-separated string where a tuple goes
is taken as a tuple). Every message is one sentence that names the field.
"""
from __future__ import annotations

import ast
import dataclasses
import difflib
import inspect
import math
import textwrap
import types
import typing
from typing import Any


class ConfigFieldError(ValueError):
    """A config field that cannot be used; the message names it and says what to pass."""


def nearest(name: str, choices) -> str | None:
    """The choice closest to `name` (difflib), or None when nothing is close."""
    choices = list(choices)
    got = difflib.get_close_matches(name, choices, n=1, cutoff=0.6)
    if got:
        return got[0]
    leaf = name.rsplit(".", 1)[-1]   # a right leaf under the wrong section: `max_tasks` for `tasks.max_tasks`
    same = [c for c in choices if c.rsplit(".", 1)[-1] == leaf]
    return same[0] if same else None


def unknown_field_message(name: str, choices) -> str:
    near = nearest(name, choices)
    hint = f"; did you mean {near}?" if near else "; see --help for the fields"
    return f"unknown config field {name}{hint}"


def _hints(cls) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except Exception:  # noqa: BLE001 - an unresolvable annotation: fall back to the defaults' types
        return {}


def _default(f: dataclasses.Field):
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return f.default_factory()  # type: ignore[misc]
    return None


def _is_dataclass_type(t) -> bool:
    return isinstance(t, type) and dataclasses.is_dataclass(t)


def to_configdict(obj):
    """A ConfigDict of a dataclass instance (nested dataclasses become nested ConfigDicts; tuples stay tuples)."""
    import ml_collections
    out = ml_collections.ConfigDict()
    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        out[f.name] = to_configdict(v) if dataclasses.is_dataclass(v) else v
    return out


def to_dict(obj) -> dict:
    """A plain dict of a dataclass instance (what run directories record)."""
    return {f.name: (to_dict(v) if dataclasses.is_dataclass(v := getattr(obj, f.name)) else
                     list(v) if isinstance(v, tuple) else v) for f in dataclasses.fields(obj)}


def _plain(values) -> dict:
    if values is None:
        return {}
    if hasattr(values, "to_dict"):
        return values.to_dict()
    if dataclasses.is_dataclass(values):
        return to_dict(values)
    return dict(values)


def from_configdict(cls, values, prefix: str = "", base=None):
    """A `cls` instance from a ConfigDict / dict holding a subset of its fields (the rest default: the class's
    defaults, or those of `base`, an instance; a section takes the rest from its parent's default instance, e.g.
    EvalConfig.rollout = RolloutConfig(samples_per_task=1, ...)).

    Raises ConfigFieldError (one sentence naming the field) for an unknown field or a value of the wrong type, and
    passes on the dataclass's own validation errors with the field's section named."""
    values = _plain(values)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = _hints(cls)
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ConfigFieldError(unknown_field_message(prefix + unknown[0], [prefix + n for n in all_fields(cls)]))
    kw = {}
    for name, v in values.items():
        f = fields[name]
        t = hints.get(name, type(_default(f)))
        default = getattr(base, name) if base is not None else _default(f)
        sub = _dataclass_of(t, default)
        if sub is not None:
            kw[name] = from_configdict(sub, v, f"{prefix}{name}.",
                                       base=default if dataclasses.is_dataclass(default) else None)
        else:
            kw[name] = coerce(prefix + name, t, default, v)
    try:
        return dataclasses.replace(base, **kw) if base is not None else cls(**kw)
    except ConfigFieldError:
        raise
    except (ValueError, TypeError) as e:
        where = f"config.{prefix.rstrip('.')}: " if prefix else ""
        raise ConfigFieldError(where + " ".join(str(e).split())) from None


def _dataclass_of(t, default):
    if _is_dataclass_type(t):
        return t
    if dataclasses.is_dataclass(default) and not isinstance(default, type):
        return type(default)
    return None


def _args(t) -> tuple:
    return typing.get_args(t)


def _is_optional(t) -> bool:
    return (typing.get_origin(t) in (typing.Union, types.UnionType)) and type(None) in _args(t)


def coerce(name: str, t, default, v):
    """v checked against the field's type `t` (its default's type where `t` is unknown)."""
    if v is None and (_is_optional(t) or default is None):
        return None
    if _is_optional(t):
        t = next(a for a in _args(t) if a is not type(None))
    origin = typing.get_origin(t) or t
    want = origin if isinstance(origin, type) else type(default)
    if want is tuple or isinstance(default, tuple):
        if isinstance(v, str):
            v = tuple(x.strip() for x in v.split(",") if x.strip())
        if not isinstance(v, (list, tuple)):
            raise ConfigFieldError(f"{name}={v!r}: give a tuple (or a comma-separated string), like the default "
                                   f"{default!r}")
        args = [a for a in _args(t) if a is not Ellipsis]
        inner = args[0] if args else None
        return tuple(coerce(name, inner, None, x) if inner is not None else x for x in v)
    if want is bool:
        ok = isinstance(v, bool)
    elif want is int:
        ok = isinstance(v, int) and not isinstance(v, bool)
    elif want is float:
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        v = float(v) if ok else v
    elif want is str:
        ok = isinstance(v, str)
    else:
        ok = True
    if not ok:
        kind = {float: "a finite number", int: "an integer", bool: "True or False", str: "a string"}.get(want, want)
        raise ConfigFieldError(f"{name}={v!r}: must be {kind}, like the default {default!r}")
    return v


def all_fields(cls, prefix: str = "") -> list[str]:
    """Dotted names of every leaf field of a dataclass tree."""
    out = []
    hints = _hints(cls)
    for f in dataclasses.fields(cls):
        sub = _dataclass_of(hints.get(f.name), _default(f))
        out += all_fields(sub, f"{prefix}{f.name}.") if sub is not None else [prefix + f.name]
    return out


def flat_fields(cd, prefix: str = "") -> dict[str, Any]:
    """{dotted name: value} of every leaf of a ConfigDict (or dict)."""
    out = {}
    for k, v in _plain(cd).items():
        if isinstance(v, dict):
            out.update(flat_fields(v, f"{prefix}{k}."))
        else:
            out[prefix + k] = v
    return out


def field_docs(cls, prefix: str = "") -> dict[str, str]:
    """{dotted name: the comment after the field in the dataclass source} for a dataclass tree."""
    out = {}
    try:
        src = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        src = ""
    comments = _trailing_comments(src)
    hints = _hints(cls)
    for f in dataclasses.fields(cls):
        sub = _dataclass_of(hints.get(f.name), _default(f))
        if sub is not None:
            out.update(field_docs(sub, f"{prefix}{f.name}."))
        elif f.name in comments:
            out[prefix + f.name] = comments[f.name]
    return out


def _trailing_comments(src: str) -> dict[str, str]:
    """{name: comment} for `name: type = value  # comment` lines (and their continuation comment lines)."""
    out: dict[str, str] = {}
    if not src:
        return out
    lines = src.splitlines()
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return out
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out.update(_comment_at(lines, node.target.id, node.lineno, node.end_lineno))
    return out


def _comment_at(lines: list[str], name: str, first: int, last: int) -> dict[str, str]:
    text = []
    for ln in range(first, last + 1):
        line = lines[ln - 1]
        if "#" in line:
            text.append(line.split("#", 1)[1].strip())
    col = len(lines[first - 1]) - len(lines[first - 1].lstrip())
    nxt = last
    while nxt < len(lines):   # comment-only lines indented past the field continue its comment
        line = lines[nxt]
        stripped = line.lstrip()
        if not stripped.startswith("#") or len(line) - len(stripped) <= col:
            break
        text.append(stripped[1:].strip())
        nxt += 1
    return {name: " ".join(t for t in text if t)} if text else {}


def config_file_comments(path) -> dict[str, str]:
    """{dotted name: comment} for the assignments of a config file (`c.a.b = v  # comment`,
    `c.a.update(b=v)` / `ConfigDict({"b": v})` entries with a comment on their line)."""
    from pathlib import Path
    src = Path(path).read_text()
    lines = src.splitlines()
    out: dict[str, str] = {}
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return out
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            name = _dotted(node.targets[0])
            if name is None:
                continue
            entries = _dict_entries(lines, node.value, name) if isinstance(node.value, ast.Call) else {}
            got = None if entries else _comment_at(lines, "x", node.lineno, node.end_lineno).get("x")
            out.update(entries)
            if got:
                out[name] = got
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            call = node.value
            if isinstance(call.func, ast.Attribute) and call.func.attr == "update":
                base = _dotted(call.func.value)
                if base is not None:
                    for kw in call.keywords:
                        got = _comment_at(lines, "x", kw.value.lineno, kw.value.end_lineno).get("x")
                        if kw.arg and got:
                            out[f"{base}.{kw.arg}"] = got
    return out


def _dict_entries(lines, call: ast.Call, base: str) -> dict[str, str]:
    out = {}
    for arg in call.args:
        if isinstance(arg, ast.Dict):
            for k, v in zip(arg.keys, arg.values):
                if isinstance(k, ast.Constant) and isinstance(k.value, str):
                    got = _comment_at(lines, "x", v.lineno, v.end_lineno).get("x")
                    if got:
                        out[f"{base}.{k.value}"] = got
    return out


def _dotted(node) -> str | None:
    """`c.a.b` -> "a.b" (the config object's own name dropped)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or not parts:
        return None
    return ".".join(reversed(parts))
