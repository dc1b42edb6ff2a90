"""The one typed config of the decode kernels, and the tilings table they read.

    kc = DecodeKernels()                       # auto: the fastest path this machine runs
    kc = DecodeKernels(path="pallas", interpret=True)   # the Pallas kernels on the CPU (tests)
    run = kc.resolve(batch=1)                  # every `auto` replaced by what runs here

The Sampler takes one (its programs are compiled per config: it is static in jit), records it in the run
directory through the experiment config (`from_config`), and falls back to `path="xla"` itself when a kernel
fails to build or run. Nothing here reads the environment.
"""
from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path

import jax

PATHS = ("auto", "xla", "pallas", "cuda")
LM_HEADS = ("auto", "xla", "pallas")
TOP_KS = ("auto", "xla", "cuda")
TABLE = Path(__file__).with_name("tables") / "h200.json"   # the packaged tilings (measured on an H200)


@dataclasses.dataclass(frozen=True)
class DecodeKernels:
    """How a one-token decode step runs (frozen, hashable: a static argument of the sampler's programs).

    path      auto (one GPU: cuda on compute capability 9.x when nvcc builds the library, else pallas; xla
              elsewhere), xla (XLA's dots only), pallas (the Pallas matvecs and fused layers), cuda (pallas, with
              the CUDA matvecs and, for hidden sizes >= 1024, the whole step from one FFI call).
    lm_head   auto (the Pallas batch-1 matvec whenever the path is not xla), xla or pallas.
    top_k     auto (the CUDA top-k where the CUDA kernels are on), xla or cuda: the sampler's top-k of long rows.
    unroll    decode steps per iteration of the sampler's loop; 0: 4 on a GPU up to batch 32, else 1.
    tilings   a JSON file of tilings records (the format of tables/h200.json) read after the packaged ones;
              "" for the packaged table only.
    interpret run the Pallas kernels in Pallas' interpreter (tests on the CPU; never the CUDA kernels).
    """
    path: str = "auto"
    lm_head: str = "auto"
    top_k: str = "auto"
    unroll: int = 0
    tilings: str = ""
    interpret: bool = False

    def __post_init__(self):
        for name, allowed in (("path", PATHS), ("lm_head", LM_HEADS), ("top_k", TOP_KS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"DecodeKernels.{name}={getattr(self, name)!r}: use one of {', '.join(allowed)}")
        if not isinstance(self.unroll, int) or self.unroll < 0:
            raise ValueError(f"DecodeKernels.unroll={self.unroll!r}: use 0 (auto) or a whole number >= 1")
        if self.tilings and not Path(self.tilings).is_file():
            raise ValueError(f"DecodeKernels.tilings={self.tilings!r} is not a file; give a JSON tilings table or ''")

    @classmethod
    def from_config(cls, c) -> DecodeKernels:
        """From a mapping (an ml_collections ConfigDict or a dict) with any of the fields; None gives the default."""
        if c is None:
            return cls()
        fields = {f.name for f in dataclasses.fields(cls)}
        items = dict(c.items() if hasattr(c, "items") else c)
        unknown = set(items) - fields
        if unknown:
            raise ValueError(f"decode_kernels: unknown fields {sorted(unknown)}; the fields are {sorted(fields)}")
        return cls(**items)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def resolve(self, batch: int = 1) -> DecodeKernels:
        """This config with every `auto` replaced by what runs on this machine for `batch` sequences."""
        return _resolve(self, batch)

    @property
    def on(self) -> bool:
        """Whether the batch-1 kernels run (after resolve: path pallas or cuda)."""
        return self.path in ("pallas", "cuda")

    @property
    def cuda(self) -> bool:
        return self.path == "cuda" and not self.interpret


XLA = DecodeKernels(path="xla", lm_head="xla", top_k="xla", unroll=1)


@functools.cache
def _resolve(kc: DecodeKernels, batch: int) -> DecodeKernels:
    gpu = jax.default_backend() == "gpu"
    path = kc.path
    if path == "auto":
        if kc.interpret:
            path = "pallas"
        elif gpu and jax.device_count() == 1:
            path = "cuda" if cuda_available() else "pallas"
        else:
            path = "xla"
    if kc.interpret and path == "cuda":
        path = "pallas"
    lm_head = kc.lm_head if kc.lm_head != "auto" else ("xla" if path == "xla" else "pallas")
    top_k = kc.top_k
    if top_k == "auto":
        top_k = "cuda" if kc.path in ("auto", "cuda") and not kc.interpret and cuda_available() else "xla"
    unroll = kc.unroll or (4 if gpu and batch <= 32 else 1)
    return dataclasses.replace(kc, path=path, lm_head=lm_head, top_k=top_k, unroll=unroll)


@functools.cache
def cuda_available() -> bool:
    """The first JAX device is a GPU of compute capability 9.x (the library is built for sm_90) and the CUDA library
    builds and registers; a failed build warns once and gives False (the Pallas kernels still run)."""
    import warnings
    dev = jax.devices()[0]
    if dev.platform != "gpu" or not str(getattr(dev, "compute_capability", "")).startswith("9."):
        return False
    from cudaperf_jax.kernels import cuda_build
    try:
        cuda_build.register()
    except Exception as e:  # noqa: BLE001 - no nvcc, a failed build: the Pallas matvecs still work
        warnings.warn(f"the CUDA decode kernels are off ({type(e).__name__}: {str(e)[:300]}); install the CUDA "
                      "toolkit's nvcc, or pass DecodeKernels(path='pallas') to silence this", stacklevel=2)
        return False
    return True


@functools.cache
def tilings(path: str = "") -> dict:
    """{(kernel, K, N): config dict} from the packaged table, then the file `path` (its records win). A record is
    {"kernel", "K", "N", "config", "measured"?}; kernel is gemv / gemv_t (the Pallas matvec, w [K, N] / [N, K]),
    fused_<prologue> (the fused layer's matvecs: norm, attn, plain, swiglu), fused_attend (K the head dim, N the
    group), cuda (the CUDA matvec: split_k, cols, unroll) or cuda_step (the step launch's own, over cuda's)."""
    rows = []
    for p in (TABLE, path):
        if p:
            with open(p) as f:
                rows += json.load(f)
    return {(r["kernel"], int(r["K"]), int(r["N"])): r["config"] for r in rows}
