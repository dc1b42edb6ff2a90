"""Running candidates: the pool, its worker processes, the correctness protocol and timing.

Public API: `HarnessPool(backend, ...)` with `.evaluate([(task, source), ...]) -> list[EvalResult]`,
`evaluate(task, source, **pool_kwargs)` for a single candidate, `PoolConfig` (batching, build cache,
workers per GPU; `PoolConfig.legacy()` is the pool before batching) and `HarnessSetupError`.
"""
from kernels_harness.run.pool import HarnessPool, HarnessSetupError, resolve_backend
from kernels_harness.run.pool_config import PoolConfig


def evaluate(task, source: str, **pool_kwargs):
    """Evaluates one candidate in a fresh pool (convenient, not fast: use HarnessPool for many)."""
    pool_kwargs.setdefault("workers", 1)
    with HarnessPool(**pool_kwargs) as pool:
        return pool.evaluate([(task, source)])[0]


__all__ = ["HarnessPool", "HarnessSetupError", "PoolConfig", "evaluate", "resolve_backend"]
