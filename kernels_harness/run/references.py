"""Reference runners (worker side): the task's C reference and the PyTorch module of torch2cuda tasks.

C reference: the shared library built by kernels_harness.run.compile.build_c_reference, called with
host numpy arrays in signature order (no stream). Output arrays start zeroed; `inout` arrays start
with the inputs. PyTorch reference: the torch2cuda contract of docs/torch2cuda_tasks.md.
"""
from __future__ import annotations

import contextlib
import ctypes
import hashlib

import numpy as np

from kernels_harness.run.arrays import np_dtype
from kernels_harness.run.backends import scalar_arg, set_signature
from kernels_harness.tasks.schema import Task, config_env


class SetupError(RuntimeError):
    """Something the user must install or fix (one sentence); not a verdict on the candidate."""


_C_LIBS: dict[str, object] = {}


def c_reference_outputs(path: str, task: Task, config: dict, inputs: dict, scal: dict) -> dict:
    """Runs the C reference on host copies of `inputs`.

    inputs: name -> numpy array for `in`/`inout` arrays; scal: name -> scalar value.
    Returns name -> numpy array for every `out`/`inout` array (shapes from the task at `config`).
    """
    if path not in _C_LIBS:
        _C_LIBS[path] = ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)
    fn = set_signature(getattr(_C_LIBS[path], task.entry), task, with_stream=False)
    fn.restype = None
    env = config_env(config)
    bufs, args = {}, []
    for a in task.signature:
        if not a.is_array:
            args.append(scalar_arg(a.dtype, scal[a.name]))
            continue
        if a.role == "out":
            bufs[a.name] = np.zeros(task.shape(a, env), dtype=np_dtype(a.dtype))
        else:
            bufs[a.name] = np.array(inputs[a.name], copy=True, order="C")
        args.append(bufs[a.name].ctypes.data)
    fn(*args)
    return {a.name: bufs[a.name] for a in task.outputs}


_TORCH_NS: dict[tuple, dict] = {}


def _import_torch():
    try:
        import torch
    except ImportError:
        raise SetupError("this is a torch2cuda task and PyTorch is not installed; "
                         "run `pip install 'cudaperf-jax[torch]'` (or pip install torch)") from None
    # The reference is float32 arithmetic: PyTorch's default TF32 convolutions (cuDNN) would put
    # errors of ~1e-3 into the expected outputs and fail correct float32 solutions.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return torch


def torch_values(task: Task, config: dict, seed: int, device: str = "cpu", build_on_device: bool = False) -> dict:
    """Runs the module once: name -> torch tensor (or Python scalar) for every signature argument.

    Forward inputs come from get_inputs() under torch.manual_seed(seed); parameters and buffers from
    Model(*get_init_inputs()) under the same seed (their values before the forward pass); the module runs in the
    task's module_mode (torch_source.set_module_mode: KernelBench's train mode by default, BatchNorm on the
    batch's statistics, dropout off); `out` arguments hold the module's outputs. Scalar
    arguments after the forward inputs (e.g. sizes) take their value from the config. By default both are
    drawn on the CPU (the same values on every device); `build_on_device` draws them on `device` instead
    (other values, much faster for GiB-sized inputs: for timing, where the values do not matter).
    """
    torch = _import_torch()
    key = (task.id, hashlib.sha1(task.source.encode()).hexdigest(), tuple(sorted(config_env(config).items())))
    if key not in _TORCH_NS:
        # derived constants follow the config
        from kernels_harness.tasks.torch_source import exec_module
        ns = exec_module(task.source, {k: config[k] for k in task.extra.get("constants", []) if k in config},
                         name=f"cudaperf_task_{task.id.replace('.', '_').replace('-', '_')}",
                         filename=f"<task {task.id}>")
        for need in ("Model", "get_inputs", "get_init_inputs"):
            if need not in ns:
                raise SetupError(f"task {task.id!r}: the module source defines no {need}; "
                                 "torch2cuda sources need Model, get_inputs and get_init_inputs")
        _TORCH_NS.clear()  # one module at a time: the cache is for the trials of one config
        _TORCH_NS[key] = ns
    ns = _TORCH_NS[key]
    from kernels_harness.tasks.torch_source import module_mode, set_module_mode
    where = torch.device(device) if build_on_device else contextlib.nullcontext()
    with where:
        torch.manual_seed(seed)
        model = set_module_mode(ns["Model"](*ns["get_init_inputs"]()).to(device), module_mode(task))
        torch.manual_seed(seed ^ 0x5DEECE66D)
        inputs = [x.to(device) if hasattr(x, "to") else x for x in ns["get_inputs"]()]
    # the buffers as built: in train mode the forward pass updates BatchNorm's running statistics in place
    named = dict(model.named_parameters())
    named.update({k: v.detach().clone() for k, v in model.named_buffers()})
    with torch.no_grad():
        out = model(*inputs)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    it_in, it_out, values = iter(inputs), iter(outs), {}
    left = len(inputs)
    for a in task.signature:
        try:
            if a.torch_name:
                values[a.name] = named[a.torch_name].detach()
            elif a.role == "out":
                values[a.name] = next(it_out)
            elif left:
                values[a.name] = next(it_in)
                left -= 1
            elif a.role == "scalar":  # an extra size argument after the forward inputs
                values[a.name] = task.scalar(a, config_env(config))
            else:
                raise StopIteration
        except (StopIteration, KeyError):
            raise SetupError(f"task {task.id!r}: argument {a.name!r} has no matching module input, "
                             "parameter or output; regenerate the task with the importer") from None
    values["__model__"] = model
    values["__inputs__"] = inputs
    return values


def tensor_to_xp(t, xp, dtype_name: str, shape: tuple, share: bool = False):
    """A torch tensor as an xp array of the schema dtype and shape: a copy, or with `share` and a tensor on the
    GPU, a view of the tensor's memory (no copy; the array keeps the tensor alive; a copy only where the dtype
    differs from the schema's)."""
    torch = _import_torch()
    t = t.detach().contiguous()
    if dtype_name == "bfloat16":
        t = t.view(torch.int16)
    if xp is np:
        arr = t.cpu().numpy().copy()
    else:
        arr = (xp.from_dlpack(t) if share else xp.from_dlpack(t).copy()) if t.is_cuda else xp.asarray(t.cpu().numpy())
    if dtype_name == "bfloat16":  # numpy: ml_dtypes bfloat16; cupy: its uint16 bits
        arr = arr.view(np_dtype("bfloat16")) if xp is np else arr.view(xp.uint16)
    else:
        arr = arr.astype(np_dtype(dtype_name), copy=False)
    if int(np.prod(arr.shape, dtype=np.int64)) != int(np.prod(shape, dtype=np.int64)):
        raise SetupError(f"the PyTorch reference produced shape {tuple(arr.shape)} where the task says "
                         f"{tuple(shape)}; fix the task's signature")
    return arr.reshape(shape)
