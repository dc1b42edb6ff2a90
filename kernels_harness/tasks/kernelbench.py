"""Importer: PyTorch modules in the KernelBench layout -> torch2cuda Tasks (docs/torch2cuda_tasks.md).

A KernelBench problem file (`levelN/<id>_<Name>.py`) defines `class Model(nn.Module)`, module-level
size constants, `get_inputs()` and `get_init_inputs()`. The importer

- takes `source` verbatim and derives `entry` from the file name (`3_Scaled_GELU_RowSum.py` ->
  `scaled_gelu_rowsum`);
- builds the signature in the solution ABI order: forward inputs (role `in`; non-tensors become
  `scalar`), `named_parameters()` then `named_buffers()` (role `in`, `torch_name` the dotted name, C
  name with `_`), the outputs (`out`, or `out0`, `out1`, ...), and finally one int32 `scalar` per
  dimension symbol of the forward inputs and outputs, so that a solution knows its sizes (the
  harness takes scalars after the forward inputs from the config);
- gives every dimension its own symbol `<arg>_d<k>`, evaluated by running the module once per
  config on PyTorch's meta device (no compute; falls back to the CPU for ops without meta kernels);
- makes configs: the file's constants (the largest) and two smaller ones with the integer size
  constants divided by 4 and 16, unless configs are given.

    tasks = import_dir("KernelBench/level1")          # every <id>_<Name>.py below the directory
    task = import_file("level1/3_Scaled_GELU_RowSum.py", configs=[{"batch": 8}, ...])

PyTorch is needed (it is the source language of this track); without it a TaskError says so.
"""
from __future__ import annotations

import ast
import inspect
import re
from collections.abc import Iterable
from pathlib import Path

from kernels_harness.tasks.errors import TaskError
from kernels_harness.tasks.schema import Arg, Task

_TORCH_DTYPES = {"float32": "float32", "float64": "float64", "float16": "float16", "bfloat16": "bfloat16",
                 "int8": "int8", "uint8": "uint8", "int16": "int16", "int32": "int32", "int64": "int64",
                 "bool": "bool"}
_NOT_SIZE = re.compile(r"(kernel|stride|pad|dilation|group|eps|dim$|axis|^k$|_k$|ratio|scale|prob|alpha|beta|"
                       r"momentum|num_layers|heads)", re.IGNORECASE)
_FILE = re.compile(r"^(\d+)_(.+)\.py$")


def _torch():
    try:
        import torch
    except ImportError:
        raise TaskError("importing KernelBench problems needs PyTorch; run `pip install 'cudaperf-jax[torch]'`") from None
    return torch


def entry_name(filename: str) -> str:
    """`3_Scaled_GELU_RowSum.py` -> `scaled_gelu_rowsum` (a C identifier)."""
    stem = Path(filename).name
    m = _FILE.match(stem)
    name = m.group(2) if m else Path(stem).stem
    name = re.sub(r"[^A-Za-z0-9_]", "_", name).lower().strip("_") or "kernel"
    return ("k_" + name) if name[0].isdigit() else name


def module_constants(source: str) -> dict:
    """Module-level `NAME = <int or float literal>` assignments, in file order."""
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        raise TaskError(f"the module source is not valid Python (line {e.lineno}: {e.msg})") from None
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            v = node.value
            if isinstance(v, ast.UnaryOp) and isinstance(v.op, ast.USub) and isinstance(v.operand, ast.Constant):
                val = -v.operand.value
            elif isinstance(v, ast.Constant):
                val = v.value
            else:
                continue
            if isinstance(val, (int, float)) and not isinstance(val, bool):
                out[node.targets[0].id] = val
    return out


def default_configs(constants: dict) -> list[dict]:
    """Three configs: integer size constants / 16, / 4, and the file's values (smallest first)."""
    sizes = {k: v for k, v in constants.items() if isinstance(v, int) and v >= 8 and not _NOT_SIZE.search(k)}
    configs = []
    for div in (16, 4, 1):
        configs.append({k: max(1, v // div) for k, v in sizes.items()})
    return configs


def _run_module(source: str, constants: dict, tag: str):
    """(model, inputs, outputs list) of one config; on the meta device when every op supports it."""
    torch = _torch()
    last_err = None
    for device in ("meta", "cpu"):
        ns = {"__name__": f"kernelbench_{tag}"}
        try:
            exec(compile(source, f"<{tag}>", "exec"), ns)  # noqa: S102 - importing is running the module
        except Exception as e:  # noqa: BLE001 - a user's module may raise anything
            raise TaskError(f"{tag}: the module raised {type(e).__name__} when loaded: {e}") from None
        for need in ("Model", "get_inputs", "get_init_inputs"):
            if need not in ns:
                raise TaskError(f"{tag}: the module defines no {need}; KernelBench files need Model, get_inputs "
                                "and get_init_inputs")
        ns.update(constants)
        try:
            torch.manual_seed(0)
            with torch.device(device):
                model = ns["Model"](*ns["get_init_inputs"]())
                inputs = list(ns["get_inputs"]())
                with torch.no_grad():
                    out = model(*inputs)
            outs = list(out) if isinstance(out, (tuple, list)) else [out]
            return model, inputs, outs
        except TaskError:
            raise
        except Exception as e:  # noqa: BLE001 - e.g. an op without a meta kernel: retry on the cpu
            last_err = e
    raise TaskError(f"{tag}: running the module failed ({type(last_err).__name__}: {str(last_err)[:200]})")


def _dtype(t, where: str) -> str:
    name = str(t.dtype).replace("torch.", "")
    if name not in _TORCH_DTYPES:
        raise TaskError(f"{where} has dtype {name}, which the harness does not support")
    return _TORCH_DTYPES[name]


def import_source(source: str, name: str, configs: list[dict] | None = None, task_id: str | None = None,
                  family: str = "kernelbench", tolerance: dict | None = None) -> Task:
    """A torch2cuda Task from the text of a KernelBench-layout module (`name` is its file name)."""
    consts = module_constants(source)
    cfgs = [dict(c) for c in configs] if configs else default_configs(consts)
    if len(cfgs) < 1:
        raise TaskError(f"{name}: give at least one config")
    bad = [k for c in cfgs for k in c if k not in consts and k != "name"]
    if bad:
        raise TaskError(f"{name}: configs set {sorted(set(bad))}, which are not module constants "
                        f"(constants: {', '.join(consts) or 'none'})")
    tag = re.sub(r"[^A-Za-z0-9_]", "_", Path(name).stem)
    sig: list[Arg] | None = None
    full_cfgs = []
    for ci, cfg in enumerate(cfgs):
        env = {k: v for k, v in cfg.items() if k != "name"}
        model, inputs, outs = _run_module(source, env, tag)
        values: dict = {}
        args: list[Arg] = []
        fwd_names = [p for p in inspect.signature(model.forward).parameters
                     if p not in ("self",)][:len(inputs)]
        fwd_names += [f"in{i}" for i in range(len(fwd_names), len(inputs))]
        dims: list[str] = []
        for pname, val in zip(fwd_names, inputs):
            cname = re.sub(r"[^A-Za-z0-9_]", "_", pname)
            if hasattr(val, "shape"):
                syms = [f"{cname}_d{k}" for k in range(val.dim())]
                values.update(zip(syms, val.shape))
                dims += syms
                args.append(Arg(cname, "in", _dtype(val, f"{name}: input {pname}"), shape=tuple(syms)))
            else:
                values[cname] = val
                args.append(Arg(cname, "scalar", "float32" if isinstance(val, float) else "int32", value=cname))
        named = list(model.named_parameters()) + list(model.named_buffers())
        for tname, val in named:
            cname = tname.replace(".", "_")
            syms = [f"{cname}_d{k}" for k in range(val.dim())]
            values.update(zip(syms, val.shape))
            args.append(Arg(cname, "in", _dtype(val, f"{name}: {tname}"), shape=tuple(syms), torch_name=tname))
        for k, o in enumerate(outs):
            if not hasattr(o, "shape"):
                raise TaskError(f"{name}: forward() returns a {type(o).__name__}; outputs must be tensors")
            oname = "out" if len(outs) == 1 else f"out{k}"
            syms = [f"{oname}_d{j}" for j in range(o.dim())]
            values.update(zip(syms, o.shape))
            dims += syms
            args.append(Arg(oname, "out", _dtype(o, f"{name}: output {oname}"), shape=tuple(syms)))
        args += [Arg(d, "scalar", "int32", value=d) for d in dims]
        if sig is None:
            sig = args
        elif [(a.name, a.role, a.dtype, len(a.shape)) for a in sig] != [(a.name, a.role, a.dtype, len(a.shape))
                                                                         for a in args]:
            raise TaskError(f"{name}: config {ci} changes the module's arguments (names, dtypes or ranks); "
                            "configs may only change sizes")
        full = dict(cfg)
        full.setdefault("name", ("small", "medium", "large")[ci] if len(cfgs) == 3 else f"c{ci}")
        full.update({k: int(v) if not isinstance(v, float) else v for k, v in values.items()})
        full_cfgs.append(full)
    nbytes = " + ".join(f"{_ITEMSIZE[a.dtype]}*" + "*".join(a.shape) if a.shape else str(_ITEMSIZE[a.dtype])
                        for a in sig if a.is_array)
    level = Path(name).parent.name
    tid = task_id or re.sub(r"[^A-Za-z0-9_.\-]", "_", (f"{level}_" if level else "") + Path(name).stem).lower()
    return Task(id=tid, track="torch2cuda", entry=entry_name(name), source=source, signature=tuple(sig),
                configs=tuple(full_cfgs), tolerance=dict(tolerance or {"atol": 1e-4, "rtol": 1e-4}), flops=0,
                min_bytes=nbytes or 0, family=family, extra={"constants": sorted({k for c in cfgs for k in c
                                                                                 if k != "name"})})


_ITEMSIZE = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int8": 1, "uint8": 1, "int16": 2,
             "int32": 4, "int64": 8, "bool": 1}


def import_file(path: str | Path, configs: list[dict] | None = None, **kw) -> Task:
    p = Path(path)
    if not p.is_file():
        raise TaskError(f"{p} does not exist")
    return import_source(p.read_text(), str(Path(p.parent.name) / p.name), configs=configs, **kw)


def find_problems(root: str | Path) -> list[Path]:
    """`<id>_<Name>.py` files below root (sorted by level directory, then numeric id)."""
    r = Path(root)
    if r.is_file():
        return [r]
    if not r.is_dir():
        raise TaskError(f"{r} is neither a KernelBench problem file nor a directory of them")

    def key(p: Path):
        m = _FILE.match(p.name)
        return (str(p.parent), int(m.group(1)) if m else 0, p.name)
    return sorted((p for p in r.rglob("*.py") if _FILE.match(p.name)), key=key)


def import_dir(root: str | Path, configs: dict | None = None, skip_errors: bool = False) -> list[Task]:
    """Every problem below `root`; configs maps a file name to its configs. With skip_errors, files that
    fail to import are left out (their errors are returned in the tasks' absence, see import_report)."""
    tasks, _ = import_report(root, configs, skip_errors)
    return tasks


def import_report(root: str | Path, configs: dict | None = None, skip_errors: bool = True
                  ) -> tuple[list[Task], list[str]]:
    """(tasks, one-line errors of the files that could not be imported)."""
    tasks, errors = [], []
    for p in find_problems(root):
        try:
            tasks.append(import_file(p, configs=(configs or {}).get(p.name)))
        except TaskError as e:
            if not skip_errors:
                raise
            errors.append(f"{p}: {e}")
    return tasks, errors


def write_tasks(tasks: Iterable[Task], out_dir: str | Path) -> list[Path]:
    """One `<id>.json` task file per task."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for t in tasks:
        p = out / f"{t.id}.json"
        p.write_text(t.to_json(indent=1))
        paths.append(p)
    return paths


def main(argv=None) -> int:
    """python -m kernels_harness.tasks.kernelbench KernelBench/level1 --out tasks/level1"""
    import argparse
    import sys
    ap = argparse.ArgumentParser(description="Import KernelBench-layout problems as torch2cuda task files.")
    ap.add_argument("root", help="a problem file or a directory of <id>_<Name>.py files")
    ap.add_argument("--out", required=True, help="directory for the <id>.json task files")
    a = ap.parse_args(argv)
    try:
        tasks, errors = import_report(a.root)
    except TaskError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    write_tasks(tasks, a.out)
    for e in errors:
        print(f"skipped: {e}", file=sys.stderr)
    print(f"imported {len(tasks)} problems into {a.out} ({len(errors)} skipped)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
