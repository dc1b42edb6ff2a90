"""cudaperf_jax: the JAX side of CudaPerf (policy, generation, SFT, ranker, rewards, RL, evaluation)."""
import importlib.util as _ilu
import os as _os

# XLA's CPU backend schedules for concurrency by default, which keeps every layer's backward temporaries alive at
# once: a rematerialised RL micro-batch of SmolLM2-135M (4 x 1,056 tokens) peaked at 22 GB of host memory with it
# and 3.2 GB without it (and ran in 28 s instead of 49 s), 2026-12-06. Written here, before JAX starts a backend,
# only where no GPU plugin is installed (the flag means nothing to the GPU backend).
_FLAG = "--xla_cpu_enable_concurrency_optimized_scheduler=false"


def gpu_plugin_installed() -> bool:
    """Whether a JAX GPU plugin is installed (found without importing JAX or starting a backend)."""
    return _ilu.find_spec("jax_plugins") is not None


if not gpu_plugin_installed() and "concurrency_optimized_scheduler" not in _os.environ.get("XLA_FLAGS", ""):
    _os.environ["XLA_FLAGS"] = (_os.environ.get("XLA_FLAGS", "") + " " + _FLAG).strip()
