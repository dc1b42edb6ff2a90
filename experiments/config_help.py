"""What `--help` says about a config file's fields, and the argv checks that run before absl parses the flags.

    module, config = load_config_file("experiments/configs/evaluate.py")      # config: the file's ConfigDict
    fields = describe_fields("experiments/configs/evaluate.py")   # [(dotted name, default, comment)]
    check_overrides(argv, config)    # ConfigFieldError for --config.max_taks=1 (naming max_tasks) or a bad value

A field's comment is the one on the config file's line that sets it (or on the line of a config file it starts from,
`from experiments.configs import rl`), else the comment of the field in the dataclass of the module's `TYPED`
attribute (cudaperf_jax.experiment.config.field_docs). Nothing here imports JAX: `--help` answers in well under a
second.
"""
from __future__ import annotations

import ast
import importlib.util
import inspect
import re
import sys
import textwrap
from pathlib import Path
from typing import Any

from cudaperf_jax.experiment.config import (
    ConfigFieldError,
    config_file_comments,
    field_docs,
    flat_fields,
    unknown_field_message,
)

HELP_FLAGS = ("--help", "-help", "--helpshort", "-helpshort", "--helpfull", "-helpfull", "-?", "-h", "--h")
_OVERRIDE = re.compile(r"^--?(no)?config\.([A-Za-z0-9_.]+)(?:=(.*))?$", re.DOTALL)


def config_arg(argv: list[str], default: str) -> str:
    """The value of --config in argv (the last one), else `default`."""
    got = default
    for i, a in enumerate(argv):
        if a.startswith(("--config=", "-config=")):
            got = a.split("=", 1)[1]
        elif a in ("--config", "-config") and i + 1 < len(argv):
            got = argv[i + 1]
    return got


def _split(spec: str) -> tuple[Path, str | None]:
    """'path.py:variant' -> (path, 'variant'); 'path.py' -> (path, None)."""
    path, _, arg = spec.partition(":")
    return Path(path), (arg or None)


def load_config_file(spec: str, root: Path):
    """(module, ConfigDict) of a config file 'path.py[:arg]' (relative paths from `root`)."""
    path, arg = _split(spec)
    path = path if path.is_absolute() else root / path
    if not path.is_file():
        raise FileNotFoundError(f"config file {path} does not exist; pass --config=experiments/configs/<name>.py")
    name = "_cudaperf_config_" + re.sub(r"\W", "_", str(path.with_suffix("")))
    mod_spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(mod_spec)
    sys.modules[name] = module   # as an import would: dataclasses and inspect.getsource look the module up there
    mod_spec.loader.exec_module(module)
    config = module.get_config(arg) if arg is not None else module.get_config()
    return module, config


def _base_files(path: Path, root: Path) -> list[Path]:
    """Config files this one starts from (`from experiments.configs import rl`), nearest first, recursively."""
    out: list[Path] = []
    todo = [path]
    while todo:
        try:
            tree = ast.parse(todo.pop(0).read_text())
        except (OSError, SyntaxError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "experiments.configs":
                for alias in node.names:
                    p = root / "experiments" / "configs" / f"{alias.name}.py"
                    if p.is_file() and p not in out and p != path:
                        out.append(p)
                        todo.append(p)
    return out


def _leading_comments(path: Path) -> dict[str, str]:
    """{dotted name: the comment lines right above `c.name = ...`} (a section's or a field's own paragraph)."""
    src = path.read_text()
    lines = src.splitlines()
    out = {}
    for node in ast.walk(ast.parse(src)):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        parts, target = [], node.targets[0]
        while isinstance(target, ast.Attribute):
            parts.append(target.attr)
            target = target.value
        if not parts or not isinstance(target, ast.Name):
            continue
        text, ln = [], node.lineno - 2
        while ln >= 0 and lines[ln].strip().startswith("#"):
            text.insert(0, lines[ln].strip()[1:].strip())
            ln -= 1
        if text:
            out[".".join(reversed(parts))] = " ".join(text)
    return out


def _comments(path: Path, root: Path, typed) -> dict[str, str]:
    docs: dict[str, str] = {}
    if typed is not None:
        try:
            docs.update(field_docs(typed))
        except (TypeError, ValueError):   # not a dataclass: no field comments from it
            pass
    for p in reversed([path, *_base_files(path, root)]):   # the file's own comments win over its bases'
        try:
            docs.update(_leading_comments(p))
            docs.update(config_file_comments(p))
        except (OSError, SyntaxError):
            continue
    return docs


def describe_fields(spec: str, root: Path) -> tuple[list[tuple[str, Any, str]], dict[str, str]]:
    """([(dotted field name, default, comment or "")] of a config file (sorted, as ConfigDict keeps them),
    {section name: its comment})."""
    module, config = load_config_file(spec, root)
    path, _ = _split(spec)
    path = path if path.is_absolute() else root / path
    docs = _comments(path, root, getattr(module, "TYPED", None))
    fields = flat_fields(config)
    sections = {n.rsplit(".", 1)[0] for n in fields if "." in n}
    return ([(name, value, docs.get(name, "")) for name, value in fields.items()],
            {s: docs[s] for s in sections if s in docs})


def help_text(doc: str, spec: str, root: Path, flags_help: str) -> str:
    """The whole --help: the entry point's docstring, its own flags, then every config field with default and
    comment."""
    lines = [inspect.cleandoc(doc or "").rstrip(), "", "Flags:", flags_help.rstrip(), "",
             f"Config fields of {spec} (override any with --config.FIELD=value; dotted names for sections):"]
    fields, sections = describe_fields(spec, root)
    width = min(44, max((len(n) + len(repr(v)) for n, v, _ in fields), default=0) + 13)
    section = ""
    for name, value, comment in fields:
        here = name.rsplit(".", 1)[0] if "." in name else ""
        if here != section:
            section = here
            if section in sections:
                lines += textwrap.wrap(f"{section}: {sections[section]}", 110, initial_indent="  ",
                                       subsequent_indent="    ")
        head = f"  --config.{name}={value!r}"
        if not comment:
            lines.append(head)
            continue
        wrapped = textwrap.wrap(comment, 110 - width) or [""]
        if len(head) < width:
            lines.append(f"{head:<{width}} {wrapped[0]}")
            lines += [" " * (width + 1) + w for w in wrapped[1:]]
        else:
            lines.append(head)
            lines += [" " * 8 + w for w in textwrap.wrap(comment, 102)]
    return "\n".join(lines) + "\n"


def overrides(argv: list[str]) -> list[tuple[str, str | None, str]]:
    """[(dotted field name, value text or None, the argument as given)] of the --config.FIELD arguments."""
    out = []
    for i, a in enumerate(argv):
        m = _OVERRIDE.match(a)
        if not m:
            continue
        value = m.group(3)
        if value is None and not m.group(1) and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
            value = argv[i + 1]
        out.append((m.group(2), value, a))
    return out


_KINDS = {bool: "True or False", int: "an integer", float: "a number"}


def _parses(default, text: str | None) -> bool:
    """Whether ml_collections can read `text` for a field whose default is `default`."""
    if text is None or isinstance(default, (str, type(None))) or hasattr(default, "items"):
        return True
    if isinstance(default, bool):
        return text.lower() in ("true", "false", "1", "0", "t", "f", "yes", "no")
    if isinstance(default, int):
        try:
            int(text, 0)
            return True
        except ValueError:
            return False
    if isinstance(default, float):
        try:
            float(text)
            return True
        except ValueError:
            return False
    return True   # tuples and other types: ml_collections' own parser decides


def check_overrides(argv: list[str], config) -> None:
    """Raises ConfigFieldError (one sentence) for an override of a field the config does not have (naming the
    nearest real one) or a value its type cannot take."""
    fields = flat_fields(config)
    sections = {".".join(n.split(".")[:k]) for n in fields for k in range(1, n.count(".") + 1)}
    for name, value, given in overrides(argv):
        if name not in fields and name not in sections:
            raise ConfigFieldError(unknown_field_message(name, list(fields)))
        default = fields.get(name)
        if name in fields and not _parses(default, value):
            kind = next((k for t, k in _KINDS.items() if isinstance(default, t)), type(default).__name__)
            raise ConfigFieldError(f"{given}: config field {name} takes {kind}, like its default {default!r}")
