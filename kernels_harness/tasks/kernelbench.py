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

import inspect
import json
import re
import time
from collections.abc import Iterable
from pathlib import Path

from kernels_harness.tasks import kernelbench_shrink as shrink
from kernels_harness.tasks import reserved, torch_source
from kernels_harness.tasks.errors import TaskError
from kernels_harness.tasks.schema import Arg, Task

_TORCH_DTYPES = {"float32": "float32", "float64": "float64", "float16": "float16", "bfloat16": "bfloat16",
                 "int8": "int8", "uint8": "uint8", "int16": "int16", "int32": "int32", "int64": "int64",
                 "bool": "bool"}
_FILE = re.compile(r"^(\d+)_(.+)\.py$")


def _torch():
    try:
        import torch
    except ImportError:
        raise TaskError("importing KernelBench problems needs PyTorch; run `pip install 'cudaperf-jax[torch]'`") from None
    return torch


def entry_name(filename: str) -> str:
    """`3_Scaled_GELU_RowSum.py` -> `scaled_gelu_rowsum` (a C identifier; `22_Tanh.py` -> `tanh_op`, since
    nvcc's headers declare `tanh`: kernels_harness.tasks.reserved)."""
    stem = Path(filename).name
    m = _FILE.match(stem)
    name = m.group(2) if m else Path(stem).stem
    name = re.sub(r"[^A-Za-z0-9_]", "_", name).lower().strip("_") or "kernel"
    return reserved.safe_entry(("k_" + name) if name[0].isdigit() else name)


def module_constants(source: str) -> dict:
    """Module-level numeric constants (literals and arithmetic of earlier ones), in file order."""
    return {k: c.value for k, c in torch_source.module_constants(source).items()}


def default_configs(constants: dict) -> list[dict]:
    """Unverified proposals (integer size constants / 16, / 4, the file's values); the importer itself
    verifies each by running the module (kernels_harness.tasks.kernelbench_shrink)."""
    consts = {k: torch_source.Const(v) for k, v in constants.items()}
    sizes = shrink.size_candidates(consts)
    mods = shrink._moduli(consts)
    return [{k: shrink.shrunk_value(constants[k], div, mods) for k in sizes} for div in (16, 4, 1)]


def _dtype(t, where: str) -> str:
    name = str(t.dtype).replace("torch.", "")
    if name not in _TORCH_DTYPES:
        raise TaskError(f"{where} has dtype {name}, which the harness does not support")
    return _TORCH_DTYPES[name]


def _load(source: str, overrides: dict, tag: str) -> dict:
    try:
        ns = torch_source.exec_module(source, overrides, name=f"kernelbench_{tag}", filename=f"<{tag}>")
    except ImportError as e:
        raise TaskError(f"{tag}: the module needs the package {e.name or e}; install it (einops comes with "
                        "`pip install 'cudaperf-jax[torch]'`)") from None
    except Exception as e:  # noqa: BLE001 - a user's module may raise anything
        raise TaskError(f"{tag}: the module raised {type(e).__name__} when loaded: {e}") from None
    for need in ("Model", "get_inputs", "get_init_inputs"):
        if need not in ns:
            raise TaskError(f"{tag}: the module defines no {need}; KernelBench files need Model, get_inputs "
                            "and get_init_inputs")
    return ns


def probe(source: str, overrides: dict, name: str, device: str) -> shrink.Probe:
    """Runs the module once at `overrides` on `device` ("meta" or "cpu"); its signature pieces.

    Raises TaskError for a broken file and whatever the module raises for sizes it does not accept.
    """
    torch = _torch()
    tag = re.sub(r"[^A-Za-z0-9_]", "_", Path(name).stem)
    ns = _load(source, overrides, tag)
    torch.manual_seed(0)
    with torch.device(device), torch.no_grad():
        model = ns["Model"](*ns["get_init_inputs"]()).eval()  # as the harness's reference runs it
        inputs = list(ns["get_inputs"]())
        out = model(*inputs)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    values: dict = {}
    args: list[Arg] = []
    nbytes = 0
    fwd_names = [p for p in inspect.signature(model.forward).parameters if p != "self"][:len(inputs)]
    fwd_names += [f"in{i}" for i in range(len(fwd_names), len(inputs))]
    dims: list[str] = []

    def array(cname, t, role, where, torch_name=None):
        nonlocal nbytes
        syms = [f"{cname}_d{k}" for k in range(t.dim())]
        values.update(zip(syms, (int(s) for s in t.shape)))
        nbytes += t.numel() * t.element_size()
        args.append(Arg(cname, role, _dtype(t, where), shape=tuple(syms), torch_name=torch_name))
        return syms

    for pname, val in zip(fwd_names, inputs):
        cname = re.sub(r"[^A-Za-z0-9_]", "_", pname)
        if hasattr(val, "shape"):
            dims += array(cname, val, "in", f"{name}: input {pname}")
        else:
            values[cname] = val
            args.append(Arg(cname, "scalar", "float32" if isinstance(val, float) else "int32", value=cname))
    for tname, val in list(model.named_parameters()) + list(model.named_buffers()):
        array(tname.replace(".", "_"), val, "in", f"{name}: {tname}", torch_name=tname)
    for k, o in enumerate(outs):
        if not hasattr(o, "shape"):
            raise TaskError(f"{name}: forward() returns a {type(o).__name__}; outputs must be tensors")
        dims += array("out" if len(outs) == 1 else f"out{k}", o, "out", f"{name}: output {k}")
    args += [Arg(d, "scalar", "int32", value=d) for d in dims]
    key = tuple((a.name, a.role, a.dtype, len(a.shape)) for a in args)
    return shrink.Probe(args=args, values=values, nbytes=int(nbytes), key=key)


def _explicit(source: str, name: str, cfgs: list[dict], consts: dict) -> list[shrink.Found]:
    bad = [k for c in cfgs for k in c if k not in consts and k != "name"]
    if bad:
        raise TaskError(f"{name}: configs set {sorted(set(bad))}, which are not module constants "
                        f"(constants: {', '.join(consts) or 'none'})")
    found = []
    for ci, cfg in enumerate(cfgs):
        env = {k: v for k, v in cfg.items() if k != "name"}
        errs = []
        for device in ("meta", "cpu"):
            try:
                p = probe(source, env, name, device)
                break
            except TaskError:
                raise
            except Exception as e:  # noqa: BLE001 - e.g. an op without a meta kernel: retry on the cpu
                errs.append(shrink._short(e))
        else:
            raise TaskError(f"{name}: running the module failed at config {ci} ({errs[-1]})")
        if found and p.key != found[0].probe.key:
            raise TaskError(f"{name}: config {ci} changes the module's arguments (names, dtypes or ranks); "
                            "configs may only change sizes")
        default = ("small", "medium", "large")[ci] if len(cfgs) == 3 else f"c{ci}"
        found.append(shrink.Found(cfg.get("name", default), 0, env, [], p))
    return found


def import_with_report(source: str, name: str, configs: list[dict] | None = None, task_id: str | None = None,
                       family: str = "kernelbench", tolerance: dict | None = None) -> tuple[Task, dict]:
    """(Task, report): the report lists the configs made and every dropped candidate with its reason."""
    t0 = time.perf_counter()
    consts = torch_source.module_constants(source)
    if configs is not None and len(configs) < 1:
        raise TaskError(f"{name}: give at least one config")
    if configs:
        found, dropped = _explicit(source, name, [dict(c) for c in configs], consts), []
    else:
        search = shrink.ConfigSearch(consts, name, lambda ov, dev: probe(source, ov, name, dev))
        found, dropped = search.configs(), search.dropped
    sig = found[0].probe.args
    full_cfgs = []
    for f in found:
        full = {"name": f.name, **f.overrides}
        full.update({k: v if isinstance(v, float) else int(v) for k, v in f.probe.values.items()})
        full_cfgs.append(full)
    nbytes = " + ".join(f"{_ITEMSIZE[a.dtype]}*" + "*".join(a.shape) if a.shape else str(_ITEMSIZE[a.dtype])
                        for a in sig if a.is_array)
    level = Path(name).parent.name
    tid = task_id or re.sub(r"[^A-Za-z0-9_.\-]", "_", (f"{level}_" if level else "") + Path(name).stem).lower()
    extra = {"constants": sorted({k for f in found for k in f.overrides})}
    if re.fullmatch(r"level\d+", level):
        extra["level"] = int(level[5:])
    task = Task(id=tid, track="torch2cuda", entry=entry_name(name), source=source, signature=tuple(sig),
                configs=tuple(full_cfgs), tolerance=dict(tolerance or {"atol": 1e-4, "rtol": 1e-4}), flops=0,
                min_bytes=nbytes or 0, family=family, extra=extra)
    report = {"file": name, "task": tid, "candidates": shrink.size_candidates(consts),
              "configs": [{"name": f.name, "divisor": f.divisor, "overrides": f.overrides, "shrunk": f.shrunk,
                           "bytes": f.probe.nbytes} for f in found],
              "dropped": dropped, "seconds": round(time.perf_counter() - t0, 2)}
    return task, report


def import_source(source: str, name: str, configs: list[dict] | None = None, task_id: str | None = None,
                  family: str = "kernelbench", tolerance: dict | None = None) -> Task:
    """A torch2cuda Task from the text of a KernelBench-layout module (`name` is its file name)."""
    return import_with_report(source, name, configs, task_id, family, tolerance)[0]


_ITEMSIZE = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int8": 1, "uint8": 1, "int16": 2,
             "int32": 4, "int64": 8, "bool": 1}


def import_file(path: str | Path, configs: list[dict] | None = None, **kw) -> Task:
    return import_file_report(path, configs, **kw)[0]


def import_file_report(path: str | Path, configs: list[dict] | None = None, **kw) -> tuple[Task, dict]:
    p = Path(path)
    if not p.is_file():
        raise TaskError(f"{p} does not exist")
    try:
        source = p.read_text()
    except UnicodeDecodeError:
        raise TaskError(f"{p} is not UTF-8 text; KernelBench problems are Python source files") from None
    return import_with_report(source, str(Path(p.parent.name) / p.name), configs=configs, **kw)


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
    fail to import are left out (import_report returns their errors)."""
    tasks, _ = import_report(root, configs, skip_errors)
    return tasks


def import_report(root: str | Path, configs: dict | None = None, skip_errors: bool = True,
                  reports: list | None = None, progress: bool = False) -> tuple[list[Task], list[str]]:
    """(tasks, one-line errors of the files that could not be imported); per-file reports are appended
    to `reports` when given (see write_report)."""
    tasks, errors = [], []
    files = find_problems(root)
    if progress:
        from tqdm import tqdm
        files = tqdm(files, desc="kernelbench import", unit="file")
    for p in files:
        try:
            task, rep = import_file_report(p, configs=(configs or {}).get(p.name))
            tasks.append(task)
        except TaskError as e:
            if not skip_errors:
                raise
            errors.append(f"{p}: {e}")
            rep = {"file": str(Path(p.parent.name) / p.name), "task": None, "error": str(e), "configs": [],
                   "dropped": []}
        if reports is not None:
            reports.append(rep)
    return tasks, errors


def write_report(reports: list[dict], out_dir: str | Path) -> tuple[Path, Path]:
    """import_report.json and import_report.md: per problem the configs made and the dropped candidates."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ok = [r for r in reports if r.get("task")]
    summary = {"files": len(reports), "imported": len(ok), "failed": len(reports) - len(ok),
               "configs": {str(n): sum(len(r["configs"]) == n for r in ok) for n in sorted({len(r["configs"])
                                                                                              for r in ok})},
               "with_dropped_candidates": sum(bool(r["dropped"]) for r in ok)}
    jp = out / "import_report.json"
    jp.write_text(json.dumps({"summary": summary, "problems": reports}, indent=1, default=str))
    lines = ["# KernelBench import report", "",
             f"{summary['imported']} of {summary['files']} files imported; configs per task: "
             + ", ".join(f"{k}: {v}" for k, v in summary["configs"].items())
             + f"; {summary['with_dropped_candidates']} tasks had candidate configs dropped.", "",
             "| file | configs (name: shrunk constants = value) | dropped candidates (why) |", "| --- | --- | --- |"]
    for r in reports:
        if not r.get("task"):
            lines.append(f"| {r['file']} | **not imported**: {_md(r.get('error', ''))} | |")
            continue
        made = "; ".join(f"{c['name']}: " + (", ".join(f"{k}={c['overrides'][k]}" for k in c["shrunk"]) or "file sizes")
                         for c in r["configs"])
        dropped = "; ".join(f"/{d['divisor']} " + (", ".join(f"{k}={v}" for k, v in d["overrides"].items()) or "-")
                            + f" ({_md(d['reason'])})" for d in r["dropped"])
        lines.append(f"| {r['file']} | {_md(made)} | {dropped or '-'} |")
    mp = out / "import_report.md"
    mp.write_text("\n".join(lines) + "\n")
    return jp, mp


def _md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")[:300]


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
    """python -m kernels_harness.tasks.kernelbench data/kernelbench --out tasks/kernelbench --report DIR"""
    import argparse
    import sys
    ap = argparse.ArgumentParser(description="Import KernelBench-layout problems as torch2cuda task files.")
    ap.add_argument("root", help="a problem file or a directory of <id>_<Name>.py files")
    ap.add_argument("--out", required=True, help="directory for the <id>.json task files")
    ap.add_argument("--report", default=None, help="directory for import_report.json/.md (default: --out)")
    a = ap.parse_args(argv)
    reports: list = []
    try:
        tasks, errors = import_report(a.root, reports=reports, progress=True)
    except TaskError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    write_tasks(tasks, a.out)
    jp, _ = write_report(reports, a.report or a.out)
    for e in errors:
        print(f"skipped: {e}", file=sys.stderr)
    print(f"imported {len(tasks)} problems into {a.out} ({len(errors)} skipped); report {jp}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
