"""The module-level constants of a PyTorch problem file, and running the file with some of them changed.

    consts = module_constants(source)          # {"batch_size": Const(16, ()), "bias_shape": ...}
    ns = exec_module(source, {"batch_size": 4}, name="level1_3")

A constant is a top-level `NAME = <expression>` whose value is an int or float computed from literals
and earlier constants (`N = 2048 * 2`, `num_channels = embed_dim`). `exec_module` substitutes the
overridden values into those assignments before running the file, so constants derived from them
(`bias_shape = (out_channels, 1, 1)`) follow; an override of a name the file does not assign at top
level is set in the namespace after the run. The importer (kernels_harness.tasks.kernelbench) and the
harness's PyTorch reference (kernels_harness.run.references) both run problem files this way, so the
shapes the importer records are the shapes the reference produces.
"""
from __future__ import annotations

import ast
import dataclasses
import operator

from kernels_harness.tasks.errors import TaskError

_BIN = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
        ast.Div: operator.truediv, ast.Mod: operator.mod, ast.Pow: operator.pow}


@dataclasses.dataclass(frozen=True)
class Const:
    """A numeric module constant: its value in the file and the constants its expression reads."""
    value: int | float
    depends: tuple = ()

    @property
    def derived(self) -> bool:
        return bool(self.depends)


def _parse(source: str) -> ast.Module:
    try:
        return ast.parse(source)
    except SyntaxError as e:
        raise TaskError(f"the module source is not valid Python (line {e.lineno}: {e.msg})") from None
    except (ValueError, MemoryError, RecursionError) as e:  # NUL bytes, nesting deeper than the parser takes
        raise TaskError(f"the module source is not valid Python ({type(e).__name__})") from None


def _eval(node, env: dict, reads: list):
    """Value of a constant arithmetic expression over `env`, or None when it is not one."""
    if isinstance(node, ast.Constant):
        v = node.value
        return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None
    if isinstance(node, ast.Name):
        if node.id in env:
            reads.append(node.id)
            return env[node.id]
        return None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _eval(node.operand, env, reads)
        return None if v is None else (-v if isinstance(node.op, ast.USub) else v)
    if isinstance(node, ast.BinOp) and type(node.op) in _BIN:
        a, b = _eval(node.left, env, reads), _eval(node.right, env, reads)
        if a is None or b is None:
            return None
        try:
            v = _BIN[type(node.op)](a, b)
        except (ZeroDivisionError, OverflowError, ValueError):
            return None
        return v if isinstance(v, (int, float)) and abs(v) < 1e18 else None
    return None


def _assign_target(node) -> str | None:
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        return node.targets[0].id
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
        return node.target.id
    return None


def module_constants(source: str) -> dict[str, Const]:
    """Top-level numeric constants in file order (a name assigned twice keeps its last value)."""
    env: dict = {}
    out: dict[str, Const] = {}
    for node in _parse(source).body:
        name = _assign_target(node)
        if name is None:
            continue
        reads: list = []
        v = _eval(node.value, env, reads)
        if v is None:
            env.pop(name, None)
            out.pop(name, None)
            continue
        env[name] = v
        deps = tuple(dict.fromkeys(d for r in reads for d in (out[r].depends or (r,))))
        out[name] = Const(v, deps)
    return out


def exec_module(source: str, overrides: dict | None = None, name: str = "kernelbench_module",
                filename: str = "<module>") -> dict:
    """Runs the module with `overrides` substituted for its constants; returns its namespace.

    Raises whatever the module raises (callers turn that into a one-line error).
    """
    overrides = dict(overrides or {})
    tree = _parse(source)
    substituted = set()
    for node in tree.body:
        target = _assign_target(node)
        if target in overrides:
            node.value = ast.copy_location(ast.Constant(overrides[target]), node.value)
            substituted.add(target)
    ns: dict = {"__name__": name}
    exec(compile(ast.fix_missing_locations(tree), filename, "exec"), ns)  # noqa: S102 - running the problem
    for k, v in overrides.items():
        if k not in substituted:
            ns[k] = v
    return ns


MODULE_MODES = ("train", "eval")   # the first is the default


def module_mode(task) -> str:
    """The mode `task`'s reference module runs in: its `module_mode` field, else train (KernelBench's)."""
    return task.extra.get("module_mode", MODULE_MODES[0])


def set_module_mode(model, mode: str = "train"):
    """Puts a torch2cuda reference module in the mode its outputs are judged in; returns it.

    `train` (the default, a task's `module_mode` field may say `eval`) is how KernelBench runs the reference: it
    builds Model(*get_init_inputs()) and never calls .eval(), so BatchNorm normalises with the batch's own
    statistics. Stochastic modules (Dropout, an RNN's or attention's dropout) are put in eval mode even so: no kernel
    can reproduce PyTorch's random mask, and at p = 0, KernelBench's usual setting, the two modes agree.
    """
    if mode not in MODULE_MODES:
        raise TaskError(f"module_mode {mode!r} must be one of {', '.join(MODULE_MODES)}")
    model.train(mode == "train")
    if mode == "train":
        import torch
        for m in model.modules():
            if isinstance(m, torch.nn.modules.dropout._DropoutNd) or (
                    isinstance(m, (torch.nn.RNNBase, torch.nn.MultiheadAttention)) and getattr(m, "dropout", 0)):
                m.eval()
    return model
