"""Where a training run's arrays live: the mesh of its MeshConfig, and shardings named once by the parameters'
logical axes (cudaperf_jax.models.sharding), for parameters, optimizer state and batches alike.

    mesh = mesh_of(MeshConfig(fsdp=8))             # None for one device
    sh = shardings_of(params, mesh)                # NamedSharding per leaf, from the nnx Variables' axes
    params = place(params, mesh)                   # device_put by those shardings (identity without a mesh)
    batch_shardings(batch, mesh, axis=1)           # stacked micro-batches [n, b, ...]: b over (data, fsdp)

The optimizer state of an nnx State mirrors its Variables (Adam's mu and nu carry the same logical axes), so the
same `shardings_of` places it; counters and other plain arrays are replicated.
"""
from __future__ import annotations

import jax
from flax import nnx
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from cudaperf_jax.experiment.config import ConfigFieldError
from cudaperf_jax.models.sharding import BATCH_AXES, fit_spec, make_mesh
from cudaperf_jax.training.config import MeshConfig


def mesh_of(cfg: MeshConfig, devices=None) -> Mesh | None:
    """The (data, fsdp, tensor) mesh of `cfg` over the first devices, or None when it spans one device."""
    if cfg.devices == 1:
        return None
    devices = list(devices if devices is not None else jax.devices())
    if cfg.devices > len(devices):
        raise ConfigFieldError(f"config.mesh: data={cfg.data} fsdp={cfg.fsdp} tensor={cfg.tensor} needs "
                               f"{cfg.devices} devices but {len(devices)} are visible; choose sizes whose product "
                               "is at most that (all 1: one device)")
    return make_mesh(max(cfg.data, 1), max(cfg.fsdp, 1), max(cfg.tensor, 1), devices=devices)


def shardings_of(tree, mesh: Mesh):
    """A NamedSharding per array leaf of `tree` (an nnx State, an optimizer state over one, or plain arrays): the
    logical axes of its nnx Variable fitted to the mesh (an axis that does not divide a dimension is dropped),
    replicated for arrays without axes."""
    specs = nnx.get_partition_spec(tree)
    return jax.tree.map(lambda s, x: NamedSharding(mesh, fit_spec(s, x.shape, mesh)), specs, tree,
                        is_leaf=lambda x: isinstance(x, P))


def place(tree, mesh: Mesh | None):
    """`tree` on `mesh` by `shardings_of` (unchanged without a mesh)."""
    return tree if mesh is None else jax.device_put(tree, shardings_of(tree, mesh))


def replicated(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, P())


def batch_shardings(batch: dict, mesh: Mesh, axis: int = 0) -> dict:
    """Shardings of a batch dict whose arrays have their batch dimension at `axis` ([b, ...] or stacked
    micro-batches [n, b, ...] with axis=1): that dimension over (data, fsdp), the rest replicated."""
    def one(x):
        spec = (None,) * axis + (BATCH_AXES,)
        return NamedSharding(mesh, fit_spec(spec, x.shape, mesh))
    return {k: one(v) for k, v in batch.items()}


def place_batch(batch: dict, mesh: Mesh | None, axis: int = 0) -> dict:
    """`batch` on `mesh` by `batch_shardings` (unchanged without a mesh)."""
    return batch if mesh is None else jax.device_put(batch, batch_shardings(batch, mesh, axis))
