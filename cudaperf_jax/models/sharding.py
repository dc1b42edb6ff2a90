"""Device mesh (axes data, fsdp, tensor) and placement of parameters, caches and batches on it.

Parameters carry logical axes from `nnx.with_partitioning` (see decoder.py). A mesh axis is dropped
from a dimension it does not divide (e.g. 3 KV heads on a tensor axis of 2), so any model fits any
mesh; on one device every array is simply placed there.
"""
from __future__ import annotations

import jax
import numpy as np
from flax import nnx
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

AXES = ("data", "fsdp", "tensor")
BATCH_AXES = ("data", "fsdp")


def make_mesh(data: int = 1, fsdp: int | None = None, tensor: int = 1, devices=None) -> Mesh:
    """A (data, fsdp, tensor) mesh; fsdp defaults to all devices left over."""
    devices = list(devices if devices is not None else jax.devices())
    if fsdp is None:
        fsdp = len(devices) // (data * tensor)
    n = data * fsdp * tensor
    if n < 1 or n > len(devices) or len(devices) % (data * tensor):
        raise ValueError(f"mesh data={data} fsdp={fsdp} tensor={tensor} needs {n} devices but "
                         f"{len(devices)} are visible; choose sizes whose product is at most that")
    return Mesh(np.array(devices[:n]).reshape(data, fsdp, tensor), AXES)


def fit_spec(spec, shape, mesh: Mesh) -> P:
    """PartitionSpec `spec` with every mesh axis that does not divide its dimension removed."""
    out = []
    entries = tuple(spec) + (None,) * (len(shape) - len(tuple(spec)))
    for dim, entry in zip(shape, entries):
        names = () if entry is None else (entry,) if isinstance(entry, str) else tuple(entry)
        kept, size = [], 1
        for name in names:
            if name in mesh.shape and dim % (size * mesh.shape[name]) == 0:
                kept.append(name)
                size *= mesh.shape[name]
        out.append(None if not kept else kept[0] if len(kept) == 1 else tuple(kept))
    return P(*out)


def shard_model(model: nnx.Module, mesh: Mesh) -> nnx.Module:
    """Places every parameter of `model` on `mesh` by its logical axes (in place; returns model)."""
    state = nnx.state(model)
    specs = nnx.get_partition_spec(state)
    shardings = jax.tree.map(lambda s, x: NamedSharding(mesh, fit_spec(s, x.shape, mesh)), specs, state,
                             is_leaf=lambda x: isinstance(x, P))
    nnx.update(model, jax.device_put(state, shardings))
    return model


def array_sharding(mesh: Mesh, spec, shape) -> NamedSharding:
    return NamedSharding(mesh, fit_spec(spec, shape, mesh))


def batch_sharding(mesh: Mesh, shape) -> NamedSharding:
    """Batch-major arrays [B, ...]: batch over (data, fsdp), the rest replicated."""
    return array_sharding(mesh, (BATCH_AXES,), shape)


def cache_shardings(mesh: Mesh, cache):
    """Shardings for a KVCache (buffers [B, Hkv, S, Dh]): batch over (data, fsdp), heads over tensor."""
    from cudaperf_jax.models.decoder import CACHE_AXES
    return jax.tree.map(lambda x: array_sharding(mesh, CACHE_AXES, x.shape), cache)
