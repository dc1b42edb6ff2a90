"""The CUDA FFI matvec (cuda_matvec.py) on a real GPU against XLA: every decode shape, with and without
programmatic dependent launch, and chains in which each launch reads the previous one's partials."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cudaperf_jax.models import cuda_matvec as cm

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(jax.default_backend() != "gpu", reason="needs a GPU backend for JAX")]

SHAPES = [(1536, 2048, 12), (1536, 1536, 6), (1536, 17920, 4), (8960, 1536, 35), (8960, 1536, 1), (576, 960, 2),
          (576, 576, 1), (1536, 192, 3)]


def _reference(xp, w):
    x = xp.sum(axis=0)[: w.shape[0]].astype(jnp.bfloat16).astype(jnp.float32)
    return jnp.dot(x, w.astype(jnp.float32), precision="highest")


@pytest.mark.parametrize("pdl", [False, True])
@pytest.mark.parametrize("k,n,split", SHAPES)
def test_matches_xla(k, n, split, pdl):
    ks = jax.random.split(jax.random.key(k + n + split), 2)
    xp = jax.random.normal(ks[0], (3, k + 64), jnp.float32)
    w = jax.random.normal(ks[1], (k, n), jnp.bfloat16)
    got = jax.jit(lambda a, b: cm.matvec(a, b, split_k=split, pdl=pdl))(xp, w)
    assert got.shape == (split, n) and got.dtype == jnp.float32
    want = _reference(xp, w)
    np.testing.assert_allclose(np.asarray(got.sum(axis=0)), np.asarray(want), rtol=1e-4,
                               atol=1e-4 * float(jnp.abs(want).max()))


@pytest.mark.parametrize("pdl", [False, True])
def test_a_chain_of_launches_reads_each_producers_finished_partials(pdl):
    """Each launch consumes the previous one's partials directly: with PDL it starts before its producer has
    finished and must wait for it before reading (a missing wait gives stale or mixed inputs)."""
    d, steps = 1536, 12
    # separate arrays: slicing one stacked array would make each weight the output of a copy kernel just
    # before the launch, which the PDL prefetch may not read (cuda_matvec.matvec's contract)
    ws = tuple(jax.random.normal(k, (d, d), jnp.bfloat16) * (1.0 / np.sqrt(d))
               for k in jax.random.split(jax.random.key(0), steps))
    x0 = jax.random.normal(jax.random.key(1), (1, d), jnp.float32)

    @jax.jit
    def chain(x, ws):
        for i in range(steps):
            x = cm.matvec(x, ws[i], split_k=6 if i % 2 else 4, pdl=pdl)
        return x.sum(axis=0)

    @jax.jit
    def reference(x, ws):
        for i in range(steps):
            x = _reference(x, ws[i])[None, :]
        return x[0]

    got, want = chain(x0, ws), reference(x0, ws)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=3e-2, atol=3e-2 * float(jnp.abs(want).max()))
