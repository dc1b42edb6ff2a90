"""The Task: a program to translate into CUDA, as data (JSON version 1).

A task file looks like (see README.md, "Task files"):

    {"id": "saxpy", "track": "c2cuda", "entry": "saxpy",
     "source": "void saxpy(int n, float a, const float* x, float* y) {...}",
     "signature": [{"name": "n", "role": "scalar", "dtype": "int32", "value": "N"},
                   {"name": "x", "role": "in", "dtype": "float32", "shape": ["N"], "init": "uniform(-1,1)"},
                   {"name": "y", "role": "inout", "dtype": "float32", "shape": ["N"]}],
     "configs": [{"N": 1000}, {"N": 1000000}, {"N": 16777216}],
     "tolerance": {"atol": 1e-5, "rtol": 1e-5}, "flops": "2*N", "min_bytes": "12*N",
     "implementations": [{"name": "naive", "strategies": ["naive"], "baseline": true, "source": "..."}]}

A tolerance may also be an expression of the config, like flops: a sum of R terms has a rounding error
that grows with R, so the reduction family writes e.g. {"atol": "max(0.001, 2.75e-07*R)", "rtol": 0.001}.

Everything else (family, split, torch-specific fields) is optional. `load_task` / `Task.from_dict`
validate and raise TaskError with a one-sentence reason.
"""
from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path
from typing import Any

from kernels_harness.tasks import expr as expr_lib
from kernels_harness.tasks import reserved
from kernels_harness.tasks.errors import TaskError
from kernels_harness.tasks.torch_source import MODULE_MODES

TRACKS = ("c2cuda", "torch2cuda")
ROLES = ("in", "out", "inout", "scalar")
# dtype name -> (C type, bytes)
DTYPES = {
    "float32": ("float", 4), "float64": ("double", 8), "float16": ("__half", 2),
    "bfloat16": ("__nv_bfloat16", 2), "int8": ("int8_t", 1), "uint8": ("uint8_t", 1),
    "int16": ("int16_t", 2), "int32": ("int", 4), "uint32": ("unsigned int", 4),
    "int64": ("long long", 8), "uint64": ("unsigned long long", 8), "bool": ("bool", 1),
}
# Default tolerances by dtype, used when the task gives none.
DEFAULT_TOLERANCE = {
    "float32": (1e-5, 1e-5), "float64": (1e-10, 1e-10), "float16": (1e-2, 1e-2),
    "bfloat16": (2e-2, 2e-2),
}
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ID = re.compile(r"^[A-Za-z0-9_.\-]+$")
FORMAT_VERSION = 1


@dataclasses.dataclass(frozen=True)
class Arg:
    """One argument of the entry point, in signature order."""
    name: str
    role: str                       # in | out | inout | scalar
    dtype: str
    shape: tuple = ()               # expressions of the config, arrays only
    value: Any = None               # expression of the config, scalars only
    init: str | None = None         # input generator (see kernels_harness/tasks/inits.py)
    torch_name: str | None = None   # torch2cuda: the parameter/buffer name this argument carries

    @property
    def is_array(self) -> bool:
        return self.role != "scalar"

    @property
    def c_type(self) -> str:
        return DTYPES[self.dtype][0]

    @property
    def itemsize(self) -> int:
        return DTYPES[self.dtype][1]

    def to_dict(self) -> dict:
        d = {"name": self.name, "role": self.role, "dtype": self.dtype}
        if self.is_array:
            d["shape"] = list(self.shape)
        else:
            d["value"] = self.value
        if self.init is not None:
            d["init"] = self.init
        if self.torch_name is not None:
            d["torch_name"] = self.torch_name
        return d


@dataclasses.dataclass(frozen=True)
class Implementation:
    """A CUDA solution of the task, tagged with the strategies it uses."""
    name: str
    source: str
    strategies: tuple = ()
    baseline: bool = False
    expected: str = "correct"       # correct | wrong (a labelled negative)
    defect: str | None = None       # for wrong ones: what is wrong (off_by_one, missing_barrier, race, ...)

    def to_dict(self) -> dict:
        d = {"name": self.name, "strategies": list(self.strategies), "baseline": self.baseline,
             "source": self.source}
        if self.expected != "correct":
            d["expected"] = self.expected
        if self.defect:
            d["defect"] = self.defect
        return d


@dataclasses.dataclass(frozen=True)
class Task:
    id: str
    track: str
    entry: str
    source: str
    signature: tuple
    configs: tuple
    tolerance: dict
    flops: Any = 0
    min_bytes: Any = 0
    implementations: tuple = ()
    family: str = ""
    split: str = ""
    extra: dict = dataclasses.field(default_factory=dict)  # track-specific fields, kept verbatim

    # ---- derived views ---------------------------------------------------------------------
    @property
    def arrays(self) -> list[Arg]:
        return [a for a in self.signature if a.is_array]

    @property
    def outputs(self) -> list[Arg]:
        return [a for a in self.signature if a.role in ("out", "inout")]

    @property
    def baseline(self) -> Implementation | None:
        for impl in self.implementations:
            if impl.baseline:
                return impl
        return None

    def tolerance_for(self, dtype: str, config: dict | None = None) -> tuple[float, float]:
        """(atol, rtol) for outputs of `dtype` at `config`: the task's own, loosened to the dtype's floor.
        Either may be an expression of the config (a long sum's rounding error grows with its length);
        such a task needs `config`."""
        floor = DEFAULT_TOLERANCE.get(dtype, (0.0, 0.0))
        tol = []
        for key, low in zip(("atol", "rtol"), floor):
            v = self.tolerance.get(key, low)
            if isinstance(v, str):
                if config is None:
                    raise TaskError(f"task {self.id!r}: its {key} {v!r} depends on the config; pass one")
                v = expr_lib.evaluate(v, config_env(config))
            tol.append(max(float(v), low))
        return tol[0], tol[1]

    def shape(self, arg: Arg, config: dict) -> tuple[int, ...]:
        return tuple(int(expr_lib.evaluate(s, config)) for s in arg.shape)

    def scalar(self, arg: Arg, config: dict):
        v = expr_lib.evaluate(arg.value, config)
        return float(v) if arg.dtype.startswith(("float", "bfloat")) else int(v)

    def flops_at(self, config: dict) -> float:
        return float(expr_lib.evaluate(self.flops, config)) if self.flops else 0.0

    def min_bytes_at(self, config: dict) -> float:
        if self.min_bytes:
            return float(expr_lib.evaluate(self.min_bytes, config))
        return float(sum(_prod(self.shape(a, config)) * a.itemsize for a in self.arrays))

    def config_bytes(self, config: dict) -> int:
        """Bytes of all arrays of the task at `config` (what one trial allocates)."""
        return int(sum(_prod(self.shape(a, config)) * a.itemsize for a in self.arrays))

    def c_prototype(self, with_stream: bool = True) -> str:
        """The solution ABI: `extern "C" int entry(args..., cudaStream_t stream)`."""
        parts = []
        for a in self.signature:
            if a.is_array:
                const = "const " if a.role == "in" else ""
                parts.append(f"{const}{a.c_type}* {a.name}")
            else:
                parts.append(f"{a.c_type} {a.name}")
        if with_stream:
            parts.append("cudaStream_t stream")
        return f'extern "C" int {self.entry}({", ".join(parts)})'

    # ---- (de)serialisation --------------------------------------------------------------------
    def to_dict(self) -> dict:
        d = {"version": FORMAT_VERSION, "id": self.id, "track": self.track, "entry": self.entry,
             "source": self.source, "signature": [a.to_dict() for a in self.signature],
             "configs": [dict(c) for c in self.configs], "tolerance": dict(self.tolerance),
             "flops": self.flops, "min_bytes": self.min_bytes,
             "implementations": [i.to_dict() for i in self.implementations]}
        if self.family:
            d["family"] = self.family
        if self.split:
            d["split"] = self.split
        d.update(self.extra)
        return d

    def to_json(self, **kw) -> str:
        return json.dumps(self.to_dict(), **kw)

    @classmethod
    def from_dict(cls, d: dict) -> Task:
        return _parse_task(d)


_KNOWN_KEYS = {"version", "id", "track", "entry", "source", "signature", "configs", "tolerance", "flops",
               "min_bytes", "implementations", "family", "split"}


def _prod(shape) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n


def _need(d: dict, key: str, kind, where: str):
    if key not in d:
        raise TaskError(f"{where} is missing the field {key!r}")
    if not isinstance(d[key], kind):
        raise TaskError(f"{where}: field {key!r} must be {getattr(kind, '__name__', kind)}, "
                        f"not {type(d[key]).__name__}")
    return d[key]


def _parse_arg(d: Any, i: int, tid: str) -> Arg:
    where = f"task {tid!r}, signature[{i}]"
    if not isinstance(d, dict):
        raise TaskError(f"{where} must be an object with name, role and dtype")
    name = _need(d, "name", str, where)
    if not _IDENT.match(name):
        raise TaskError(f"{where}: name {name!r} is not a C identifier")
    role = _need(d, "role", str, where)
    if role not in ROLES:
        raise TaskError(f"{where}: role {role!r} must be one of {', '.join(ROLES)}")
    dtype = _need(d, "dtype", str, where)
    if dtype not in DTYPES:
        raise TaskError(f"{where}: dtype {dtype!r} must be one of {', '.join(DTYPES)}")
    if role == "scalar":
        if "value" not in d:
            raise TaskError(f"{where}: scalar {name!r} needs a 'value' (a number or an expression of the config)")
        if isinstance(d["value"], float) and not math.isfinite(d["value"]):
            raise TaskError(f"{where}: scalar {name!r} has the value {d['value']}; give a finite number or an "
                            "expression of the config")
        return Arg(name, role, dtype, value=d["value"], torch_name=d.get("torch_name"))
    shape = _need(d, "shape", list, where)
    if not all(isinstance(s, (str, int)) and not isinstance(s, bool) for s in shape):
        raise TaskError(f"{where}: shape of {name!r} must be a list of integers or config symbols")
    init = d.get("init")
    if init is not None:
        from kernels_harness.tasks import inits  # late import: inits imports numpy
        inits.parse(init, where=f"{where} ({name})")
    return Arg(name, role, dtype, shape=tuple(shape), init=init, torch_name=d.get("torch_name"))


def _parse_impl(d: Any, i: int, tid: str) -> Implementation:
    where = f"task {tid!r}, implementations[{i}]"
    if not isinstance(d, dict):
        raise TaskError(f"{where} must be an object with name and source")
    expected = d.get("expected", "correct")
    if expected not in ("correct", "wrong"):
        raise TaskError(f"{where}: expected must be 'correct' or 'wrong', not {expected!r}")
    strategies = d.get("strategies", [])
    if not isinstance(strategies, list) or not all(isinstance(s, str) for s in strategies):
        raise TaskError(f"{where}: strategies must be a list of strings")
    return Implementation(name=_need(d, "name", str, where), source=_need(d, "source", str, where),
                          strategies=tuple(strategies), baseline=bool(d.get("baseline", False)),
                          expected=expected, defect=d.get("defect"))


def _parse_task(d: Any) -> Task:
    if not isinstance(d, dict):
        raise TaskError("a task must be a JSON object with id, track, entry, source, signature and configs")
    tid = _need(d, "id", str, "the task")
    if not _ID.match(tid):
        raise TaskError(f"task id {tid!r} may only hold letters, digits, '_', '.' and '-'")
    where = f"task {tid!r}"
    version = d.get("version", FORMAT_VERSION)
    if version != FORMAT_VERSION:
        raise TaskError(f"{where} has format version {version!r}; this harness reads version {FORMAT_VERSION}")
    track = _need(d, "track", str, where)
    if track not in TRACKS:
        raise TaskError(f"{where}: track {track!r} must be one of {', '.join(TRACKS)}")
    entry = _need(d, "entry", str, where)
    if not _IDENT.match(entry):
        raise TaskError(f"{where}: entry {entry!r} is not a C identifier")
    if reserved.collides(entry):
        raise TaskError(f"{where}: entry {entry!r} is a name nvcc's headers already declare, so no solution could "
                        f"export it; rename it (e.g. {reserved.safe_entry(entry)!r})")
    source = _need(d, "source", str, where)
    if d.get("module_mode", MODULE_MODES[0]) not in MODULE_MODES:
        raise TaskError(f"{where}: module_mode {d['module_mode']!r} must be 'train' (KernelBench's: BatchNorm uses "
                        "the batch's statistics) or 'eval'")
    sig_raw = _need(d, "signature", list, where)
    signature = tuple(_parse_arg(a, i, tid) for i, a in enumerate(sig_raw))
    names = [a.name for a in signature]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise TaskError(f"{where}: argument names must be unique, {sorted(dup)} repeat")
    if not any(a.role in ("out", "inout") for a in signature):
        raise TaskError(f"{where}: the signature needs at least one 'out' or 'inout' array")
    configs = _need(d, "configs", list, where)
    if not configs:
        raise TaskError(f"{where}: configs must list at least one input configuration")
    for j, c in enumerate(configs):
        if not isinstance(c, dict) or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                              and math.isfinite(v) for k, v in c.items() if k != "name"):
            raise TaskError(f"{where}: configs[{j}] must map symbols to finite numbers, e.g. {{\"N\": 1024}}")
        env = {k: v for k, v in c.items() if k != "name"}
        for a in signature:
            for e in (a.shape if a.is_array else (a.value,)):
                missing = expr_lib.symbols(e) - set(env)
                if missing:
                    raise TaskError(f"{where}: configs[{j}] does not define {sorted(missing)}, "
                                    f"used by argument {a.name!r}")
            if a.is_array:
                try:
                    shape = [expr_lib.evaluate(s, env) for s in a.shape]
                except ZeroDivisionError:
                    raise TaskError(f"{where}: configs[{j}] divides by zero in the shape of {a.name!r}") from None
                if any(not math.isfinite(s) or int(s) != s or s < 0 for s in shape):
                    raise TaskError(f"{where}: configs[{j}] gives {a.name!r} the shape {shape}, "
                                    "which is not made of non-negative integers")
    tol = d.get("tolerance", {})
    if not isinstance(tol, dict) or not all(type(tol.get(k, 0)) in (int, float, str) for k in ("atol", "rtol")):
        raise TaskError(f"{where}: tolerance must be an object like {{\"atol\": 1e-5, \"rtol\": 1e-5}} "
                        "(numbers, or expressions of the config)")
    for k in ("atol", "rtol"):
        for j, c in enumerate(configs):
            try:
                v = expr_lib.evaluate(tol.get(k, 0), config_env(c))
            except TaskError as err:
                raise TaskError(f"{where}: tolerance {k} at configs[{j}]: {err}") from None
            if not math.isfinite(v) or v < 0:
                raise TaskError(f"{where}: tolerance {k} is {v} at configs[{j}]; it must be a finite number >= 0")
    for key in ("flops", "min_bytes"):
        e = d.get(key, 0)
        if e:
            try:
                expr_lib.evaluate(e, {k: v for k, v in configs[0].items() if k != "name"})
            except TaskError as err:
                raise TaskError(f"{where}: {key}: {err}") from None
    impls_raw = d.get("implementations", [])
    if not isinstance(impls_raw, list):
        raise TaskError(f"{where}: implementations must be a list")
    impls = tuple(_parse_impl(x, i, tid) for i, x in enumerate(impls_raw))
    if sum(i.baseline for i in impls) > 1:
        raise TaskError(f"{where}: at most one implementation may be marked baseline")
    extra = {k: v for k, v in d.items() if k not in _KNOWN_KEYS}
    return Task(id=tid, track=track, entry=entry, source=source, signature=signature,
                configs=tuple(dict(c) for c in configs), tolerance=dict(tol), flops=d.get("flops", 0),
                min_bytes=d.get("min_bytes", 0), implementations=impls, family=d.get("family", ""),
                split=d.get("split", ""), extra=extra)


def load_task(path: str | Path) -> Task:
    """Reads and validates a task file; raises TaskError with a one-sentence reason."""
    p = Path(path)
    if p.is_dir():
        some = sorted(p.glob("*.json"))[:1]
        raise TaskError(f"{str(p)!r} is a directory, not a task file; pass one task file"
                        + (f", such as {str(some[0])!r}" if some else " (a .json file)"))
    if not p.is_file():
        raise TaskError(f"task file {str(p)!r} does not exist")
    try:
        data = json.loads(p.read_text())
    except json.JSONDecodeError as e:
        raise TaskError(f"task file {str(p)!r} is not valid JSON (line {e.lineno}: {e.msg})") from None
    except UnicodeDecodeError:
        raise TaskError(f"task file {str(p)!r} is not UTF-8 text") from None
    return _parse_task(data)


def config_env(config: dict) -> dict:
    """The symbols of a config (without its optional 'name')."""
    return {k: v for k, v in config.items() if k != "name"}


def describe_config(config: dict) -> str:
    """A config as the harness's messages write it: "N=1000, M=64" (without its optional 'name')."""
    return ", ".join(f"{k}={v}" for k, v in config_env(config).items())
