"""Fresh inputs for every trial: seeds, host generation (numpy) and device generation (cupy).

The pool draws one master seed per candidate from the OS (`secrets`); trial (config i, trial t)
uses `trial_seed(master, i, t)`. The same seed gives the same inputs on both paths of one backend, so
the reference and the candidate see identical data, but the candidate cannot predict it.
"""
from __future__ import annotations

import secrets

import numpy as np

from kernels_harness.run.arrays import np_dtype
from kernels_harness.tasks import inits
from kernels_harness.tasks.schema import Task, config_env

# inits that cupy can draw on the device (others are drawn on the host and uploaded)
_DEVICE_INITS = {"uniform", "normal", "randint", "zeros", "ones", "constant", "arange", "bernoulli"}


def master_seed() -> int:
    """A seed nobody can predict (63 bits from the OS)."""
    return secrets.randbits(63)


def trial_seed(master: int, config_index: int, trial: int) -> int:
    """The seed of one trial, derived from the master seed."""
    return int(np.random.SeedSequence([master, config_index, trial]).generate_state(1, np.uint64)[0] >> 1)


def scalars(task: Task, config: dict) -> dict:
    """name -> Python int/float of every scalar argument at `config`."""
    env = config_env(config)
    return {a.name: task.scalar(a, env) for a in task.signature if not a.is_array}


def host_inputs(task: Task, config: dict, seed: int) -> dict:
    """name -> numpy array for every `in` and `inout` array of a c2cuda task at `config`."""
    env = config_env(config)
    out = {}
    for k, a in enumerate(task.signature):
        if a.role not in ("in", "inout"):
            continue
        rng = np.random.default_rng([seed, k])
        out[a.name] = inits.generate(a.init, rng, task.shape(a, env), np_dtype(a.dtype), env)
    return out


def device_inputs(task: Task, config: dict, seed: int, cp) -> dict:
    """name -> cupy array for every `in`/`inout` array, drawn on the device where the init allows."""
    env = config_env(config)
    out = {}
    for k, a in enumerate(task.signature):
        if a.role not in ("in", "inout"):
            continue
        dtype = np_dtype(a.dtype)
        shape = task.shape(a, env)
        init = a.init or ("randint(0, 100)" if dtype.kind in "iub" else "uniform(-1, 1)")
        name, args = inits.parse(init)
        if name not in _DEVICE_INITS or dtype.name == "bfloat16":
            rng = np.random.default_rng([seed, k])
            host = inits.generate(a.init, rng, shape, dtype, env)
            out[a.name] = cp.asarray(host.view(np.uint16) if dtype.name == "bfloat16" else host)
            continue
        from kernels_harness.tasks import expr
        vals = [expr.evaluate(x, env) for x in args]
        rs = cp.random.RandomState(seed=(seed * 1000003 + k) % (2**63))
        n = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if name == "uniform":
            lo, hi = (vals + [-1.0, 1.0][len(vals):])[:2]
            arr = (rs.randint(int(lo), int(hi), size=n) if dtype.kind in "iub"
                   else rs.uniform(lo, hi, size=n, dtype=np.float64 if dtype.itemsize == 8 else np.float32))
        elif name == "normal":
            mean, std = (vals + [0.0, 1.0][len(vals):])[:2]
            arr = rs.normal(mean, std, size=n, dtype=np.float64 if dtype.itemsize == 8 else np.float32)
        elif name == "randint":
            lo, hi = (vals + [0, 100][len(vals):])[:2]
            arr = rs.randint(int(lo), int(hi), size=n, dtype=np.int64)
        elif name == "zeros":
            arr = cp.zeros(n)
        elif name == "ones":
            arr = cp.ones(n)
        elif name == "constant":
            arr = cp.full(n, vals[0])
        elif name == "arange":
            arr = cp.arange(n)
        else:  # bernoulli
            p = vals[0] if vals else 0.5
            arr = rs.random_sample(size=n) < p
        out[a.name] = arr.astype(dtype).reshape(shape)
    return out
