"""A batch-1 matvec written in CUDA C++ (cuda/matvec.cu), called from JAX through the XLA FFI.

Why: on the H200 the Triton (Pallas) matvecs of the fused decode path stream gate_up at 3.1 TB/s, down at 2.3,
o at 1.0 and qkv at 1.6 TB/s, and each of the ~7 kernels per layer pays its launch and tail
(WORKSPACE_NOTES.md, 2026-12-02); batch-1 decode of the 1.5B model stays at 0.40 of the HBM datasheet. This
kernel keeps four 16-byte weight loads in flight per thread, and with `pdl=True` it is launched with
programmatic dependent launch: it starts streaming its weights while the kernel before it drains and waits
for that kernel's results only before reading its input.

    y = matvec(xp, w, split_k=4)   # xp [P, >= K] float32 partials of x, w [K, N] bf16 -> y [4, N] float32
    y = matvec_norm(x, ss, scale, w, n_chunks=12, eps=1e-6)     # decode_fused's "norm" prologue
    y = matvec_swiglu(gate_up_parts, bias, w_down)              # decode_fused's "swiglu" prologue
    y = matvec_attn(acc, ml, w_o, group=6)                      # decode_fused's "attn" prologue

The input is the sum of xp's P rows over the first K columns, rounded to bf16 (a producer's split-K partials
pass straight through); the result is float32 split-K partials (sum them, or feed them to the next matvec), or
with epilogue="sum"/"residual" the splits summed by the last block of each column tile (see _DOC_EPILOGUE).
The shared library is built with nvcc (kernels_harness.build.nvcc.find_nvcc) on first use, into
$CUDAPERF_CACHE/cuda_ffi/, keyed by the source, the FFI headers, the nvcc version and CUDAPERF_CUDA_CMDBUF.

Status (H200, 2026-12-03; WORKSPACE_NOTES.md): correct (35 GPU tests, the fused decoder's 57), and on by default
on compute capability 9.x GPUs (CUDAPERF_DECODE_CUDA=auto): the batch-1 step of the random Qwen2.5-1.5B takes
1.475-1.486 ms against 1.559 with the Pallas matvecs (generation.py: 1.556 ms/step, 0.41 of the HBM
datasheet). Per shape it streams gate_up at 2.95 TB/s, down 2.41, qkv 1.40, o 0.94 (Pallas 2.24/2.14/1.01/0.81).
The split-K epilogues are correct but slower in the step than decode_fused.finish (1.601 vs 1.475 ms: the
last block's serial fence/atomic/load chain costs more than a finish launch), so CUDAPERF_CUDA_EPILOGUE
defaults to partials. Also written, correct on the H200 and off by default because they were slower there: the
finish in CUDA (CUDAPERF_CUDA_FINISH), the sampler's top-k in CUDA (CUDAPERF_CUDA_TOPK), a whole layer as one
persistent kernel (`layer`, CUDAPERF_CUDA_LAYER=on) and the layer's or the whole step's kernels from one FFI call,
chained by PDL (CUDAPERF_CUDA_LAYER=kernels|step; `step`). Note that the PDL of the separate matvec calls does nothing
inside XLA's command buffers: each FFI call is captured as its own child graph (benchmarks/pdl_chain.cu, 2026-12-03).
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import subprocess
import uuid
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

SOURCE = Path(__file__).with_name("cuda") / "matvec.cu"
KERNEL = SOURCE.with_name("matvec_kernel.cuh")   # the kernel alone (matvec.cu includes it; tests emulate it)
TOPK_KERNEL = SOURCE.with_name("topk_kernel.cuh")
LAYER_KERNEL = SOURCE.with_name("layer_kernel.cuh")   # one decoder layer in one persistent kernel
ARCH = "sm_90"


class BuildError(RuntimeError):
    """nvcc could not build the FFI library; the message holds its output."""


def cmd_buffer() -> bool:
    """CUDAPERF_CUDA_CMDBUF (on by default): the handlers declare themselves command-buffer compatible, so XLA may
    capture them into its CUDA graphs together with the kernels around them; `off` builds without that trait."""
    from cudaperf_jax.models.ops import env_choice
    return env_choice("CUDAPERF_CUDA_CMDBUF", "on", ("off", "on")) == "on"


def _nvcc_cmd(out: Path) -> list[str]:
    from kernels_harness.build.nvcc import find_nvcc
    flags = [] if cmd_buffer() else ["-DMATVEC_NO_CMD_BUFFER"]
    return [str(find_nvcc()), "-O3", *flags, "-std=c++17", f"-gencode=arch=compute_{ARCH[3:]},code={ARCH}", "-Xcompiler",
            "-fPIC", "-shared", "-cudart", "static", "-diag-suppress", "940,2473", f"-I{jax.ffi.include_dir()}",
            str(SOURCE), "-o", str(out)]


def build(cache: Path | None = None) -> Path:
    """The shared library's path, compiling it if this source/headers/compiler combination is not cached."""
    from cudaperf_jax.assets import cache_dir
    from kernels_harness.build.nvcc import find_nvcc
    version = subprocess.run([str(find_nvcc()), "--version"], check=False, capture_output=True, text=True).stdout
    sources = b"".join(f.read_bytes() for f in sorted(SOURCE.parent.glob("*.cu*")))   # matvec.cu and its headers
    h = hashlib.sha256(sources + str(jax.ffi.include_dir()).encode() + version.encode()
                       + bytes([cmd_buffer()])
                       + (Path(jax.ffi.include_dir()) / "xla/ffi/api/api.h").read_bytes()).hexdigest()[:16]
    out = (cache or cache_dir() / "cuda_ffi") / f"matvec_{ARCH}_{h}.so"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".tmp{os.getpid()}_{uuid.uuid4().hex[:8]}.so")
    r = subprocess.run(_nvcc_cmd(tmp), check=False, capture_output=True, text=True)
    if r.returncode != 0:
        raise BuildError(f"nvcc failed to build {SOURCE.name} (exit {r.returncode}): {r.stderr[-2000:]}")
    tmp.replace(out)   # atomic: concurrent builders never load a half-written file
    return out


TARGETS = {"parts": ("cudaperf_matvec", "CudaperfMatvec"), "norm": ("cudaperf_matvec_norm", "CudaperfMatvecNorm"),
           "swiglu": ("cudaperf_matvec_swiglu", "CudaperfMatvecSwiglu"), "attn": ("cudaperf_matvec_attn", "CudaperfMatvecAttn"),
           "finish": ("cudaperf_finish", "CudaperfFinish"), "topk": ("cudaperf_topk", "CudaperfTopk"),
           "layer": ("cudaperf_layer", "CudaperfLayer"), "step": ("cudaperf_step", "CudaperfStep")}


@functools.cache
def register() -> Path:
    """Builds (if needed), loads and registers the FFI targets for CUDA; returns the library's path."""
    path = build()
    lib = ctypes.cdll.LoadLibrary(str(path))
    for name, symbol in TARGETS.values():
        jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(getattr(lib, symbol)), platform="CUDA")
    return path


def supported(k: int, n: int, split_k: int, cols: int | None = None) -> bool:
    """Shapes the kernel takes: N a multiple of 64 (of cols, the columns per block, when given), split_k
    dividing K, a K slice that fits shared memory."""
    return (n % 64 == 0 and (cols is None or (cols in COLS and n % cols == 0)) and split_k >= 1 and k % split_k == 0
            and (k // split_k) * 4 <= 200 * 1024)


COLS = (64, 128, 256)          # output columns per block (32, 16 or 8 threads per weight row)
EPILOGUES = ("partials", "sum", "residual")
_DUMMY_BF16 = np.zeros((1,), jnp.bfloat16)


def default_cols(n: int) -> int:
    return 256 if n % 256 == 0 else 128 if n % 128 == 0 else 64


def _unroll() -> int:
    """CUDAPERF_CUDA_UNROLL: 16-byte weight loads each thread keeps in flight, 4 (default) or 8."""
    from cudaperf_jax.models.ops import env_choice
    return int(env_choice("CUDAPERF_CUDA_UNROLL", "4", ("4", "8")))


def _call(kind: str, w: jax.Array, args: list, split_k: int, pdl: bool, out_cols: int | None, *,
          epilogue: str = "partials", residual=None, cols: int | None = None, unroll: int | None = None, **attrs):
    k, n = w.shape
    cols = cols or default_cols(n)
    if w.dtype != jnp.bfloat16 or not supported(k, n, split_k, cols) or (out_cols or n) < n:
        raise ValueError(f"cuda_matvec: needs w bf16 [K, N] with N a multiple of cols (64, 128 or 256), split_k "
                         f"dividing K (K / split_k <= 51200) and out_cols >= N; got w {w.dtype}{list(w.shape)}, "
                         f"split_k {split_k}, cols {cols}, out_cols {out_cols}")
    if epilogue not in EPILOGUES or (epilogue == "residual") != (residual is not None):
        raise ValueError(f"cuda_matvec: epilogue must be one of {EPILOGUES}, with residual=(x, bias) exactly when "
                         f"it is 'residual'; got {epilogue!r}")
    if epilogue == "residual" and (residual[0].shape != (n,) or (residual[1] is not None and residual[1].shape != (n,))):
        raise ValueError(f"cuda_matvec: the residual stream and its bias must be [N={n}]; got "
                         f"{residual[0].shape} and {None if residual[1] is None else residual[1].shape}")
    if jax.default_backend() != "gpu":
        raise RuntimeError(f"cuda_matvec runs on an NVIDIA GPU only; JAX's backend here is {jax.default_backend()}")
    register()
    width = out_cols or n
    rx, rb = (_DUMMY_BF16, _DUMMY_BF16) if residual is None else (
        residual[0].astype(jnp.bfloat16), _DUMMY_BF16 if residual[1] is None else residual[1].astype(jnp.bfloat16))
    shapes = [jax.ShapeDtypeStruct((split_k, width), jnp.float32),
              jax.ShapeDtypeStruct((width if epilogue == "sum" else 1,), jnp.float32),
              jax.ShapeDtypeStruct((n if epilogue == "residual" else 1,), jnp.bfloat16),
              jax.ShapeDtypeStruct((n // cols if epilogue == "residual" else 1,), jnp.float32)]
    y, total, xo, ss = jax.ffi.ffi_call(TARGETS[kind][0], shapes)(
        *args, w, rx, rb, split_k=np.int64(split_k), pdl=np.int64(int(pdl)), epi=np.int64(EPILOGUES.index(epilogue)),
        has_rbias=np.int64(residual is not None and residual[1] is not None), unroll=np.int64(unroll or _unroll()),
        cols=np.int64(cols), **attrs)
    if epilogue == "sum":
        return total[None, :]
    if epilogue == "residual":
        return xo, ss
    return y


_DOC_EPILOGUE = """
    epilogue: "partials" (the default) returns the float32 split-K partials [split_k, out_cols or N] (columns
    past N unwritten); "sum" returns them summed, [1, out_cols or N], by the last block of each column tile;
    "residual" (with residual=(x [N], bias [N] or None)) returns (x + round(round(y) + bias) in bf16 [N], its
    sums of squares per column tile [N / cols]) with decode_fused.finish's roundings. cols: output columns per
    block, 64, 128 or 256 (default the largest dividing N); unroll: 16-byte weight loads in flight per thread, 4
    or 8 (default CUDAPERF_CUDA_UNROLL, else 4)."""


def matvec(xp: jax.Array, w: jax.Array, *, split_k: int = 1, pdl: bool = False, out_cols: int | None = None,
           **epilogue):
    """round_bf16(xp.sum(0)[:K]) @ w for xp [P, >= K] float32 (a vector [>= K] is taken as P = 1) and w [K, N]
    bf16. pdl=True launches with programmatic dependent launch: only for weights that no kernel of the same
    program writes (weights passed into the jitted function as they are, not converted or sliced inside it)."""
    if xp.ndim == 1:
        xp = xp[None, :]
    if xp.shape[1] < w.shape[0]:
        raise ValueError(f"cuda_matvec: xp must be [P, >= K]; got xp {list(xp.shape)} for w {list(w.shape)}")
    return _call("parts", w, [xp.astype(jnp.float32)], split_k, pdl, out_cols, **epilogue)


def matvec_norm(x: jax.Array, ss: jax.Array, scale: jax.Array, w: jax.Array, *, n_chunks: int, eps: float,
                split_k: int = 1, pdl: bool = False, out_cols: int | None = None, **epilogue):
    """As `matvec`, the input RMSNorm(x) * scale from x bf16 [K] and the first n_chunks entries of ss (its
    chunks' sums of squares, decode_fused.finish); the roundings of decode_fused's "norm" prologue."""
    if x.shape != (w.shape[0],) or scale.shape != x.shape or ss.shape[0] < n_chunks:
        raise ValueError(f"cuda_matvec_norm: x and scale must be [K] and ss >= n_chunks; got {x.shape}, {scale.shape}, "
                         f"{ss.shape} for w {list(w.shape)}")
    return _call("norm", w, [x.astype(jnp.bfloat16), ss.astype(jnp.float32), scale.astype(jnp.bfloat16)], split_k, pdl,
                 out_cols, n_chunks=np.int64(n_chunks), eps=np.float32(eps), **epilogue)


def matvec_swiglu(parts: jax.Array, bias: jax.Array | None, w: jax.Array, *, split_k: int = 1, pdl: bool = False,
                  out_cols: int | None = None, **epilogue):
    """As `matvec`, the input silu(gate) * up from gate/up split-K partials [P, 2K] float32 (+ bias [2K]); the
    roundings of decode_fused's "swiglu" prologue."""
    k = w.shape[0]
    if parts.ndim != 2 or parts.shape[1] != 2 * k or (bias is not None and bias.shape != (2 * k,)):
        raise ValueError(f"cuda_matvec_swiglu: parts must be [P, 2K] and bias [2K]; got {parts.shape}, "
                         f"{None if bias is None else bias.shape} for w {list(w.shape)}")
    b = _DUMMY_BF16 if bias is None else bias.astype(jnp.bfloat16)
    return _call("swiglu", w, [parts.astype(jnp.float32), b], split_k, pdl, out_cols,
                 has_bias=np.int64(bias is not None), **epilogue)


def matvec_attn(acc: jax.Array, ml: jax.Array, w: jax.Array, *, group: int, split_k: int = 1, pdl: bool = False,
                out_cols: int | None = None, **epilogue):
    """As `matvec`, the input the attention output merged from decode_fused.attend's splits (acc [Hkv, S, Gp, Dh],
    ml [Hkv, S, 2, Gp]; group heads per KV head); the roundings of decode_fused's "attn" prologue."""
    if acc.ndim != 4 or ml.shape != (acc.shape[0], acc.shape[1], 2, acc.shape[2]) or \
            acc.shape[0] * group * acc.shape[3] != w.shape[0]:
        raise ValueError(f"cuda_matvec_attn: acc must be [Hkv, S, Gp, Dh], ml [Hkv, S, 2, Gp] and Hkv * group * Dh "
                         f"== K; got {acc.shape}, {ml.shape}, group {group} for w {list(w.shape)}")
    return _call("attn", w, [acc.astype(jnp.float32), ml.astype(jnp.float32)], split_k, pdl, out_cols,
                 group=np.int64(group), **epilogue)


FINISH_CHUNK = 128   # entries of the residual stream per finish block (decode_fused.FINISH_CHUNK)


def finish(x: jax.Array, parts: jax.Array | None, bias: jax.Array | None, *, pdl: bool = True):
    """decode_fused.finish as a CUDA kernel (same roundings): (x + round(round(sum(parts)) + bias) in bf16 [N], its
    sums of squares per 128 entries [N / 128]) for x [N] (N % 128 == 0), float32 partials [P, >= N] or None and
    bias [N] or None. With pdl (the default; it reads nothing before waiting) the kernel after it may launch at
    once and prefetch its weights while this one runs."""
    n = x.shape[0]
    if x.ndim != 1 or n % FINISH_CHUNK or (parts is not None and (parts.ndim != 2 or parts.shape[1] < n)) or \
            (bias is not None and bias.shape != (n,)):
        raise ValueError(f"cuda_matvec.finish: needs x [N] with N % {FINISH_CHUNK} == 0, parts [P, >= N] and bias [N]; "
                         f"got {x.shape}, {None if parts is None else parts.shape}, {None if bias is None else bias.shape}")
    if jax.default_backend() != "gpu":
        raise RuntimeError(f"cuda_matvec runs on an NVIDIA GPU only; JAX's backend here is {jax.default_backend()}")
    register()
    p = jnp.zeros((1, 1), jnp.float32) if parts is None else parts.astype(jnp.float32)
    b = _DUMMY_BF16 if bias is None or parts is None else bias.astype(jnp.bfloat16)
    shapes = [jax.ShapeDtypeStruct((n,), jnp.bfloat16), jax.ShapeDtypeStruct((n // FINISH_CHUNK,), jnp.float32)]
    xo, ss = jax.ffi.ffi_call(TARGETS["finish"][0], shapes)(
        x.astype(jnp.bfloat16), p, b, n_parts=np.int64(0 if parts is None else parts.shape[0]),
        has_bias=np.int64(bias is not None and parts is not None), pdl=np.int64(int(pdl)))
    return xo, ss


TOPK_CHUNK, TOPK_MAX_K, TOPK_MAX_CHUNKS = 64, 64, 4096   # topk_kernel.cuh's kChunk, kMaxK, kMaxChunks


def topk_supported(v: int, k: int) -> bool:
    """Rows the CUDA top-k takes: 1 <= k <= 64 and k <= V <= 262,144 (4096 chunks of 64 in one select block)."""
    return 1 <= k <= TOPK_MAX_K and k <= v and -(-v // TOPK_CHUNK) <= TOPK_MAX_CHUNKS


def top_k(x: jax.Array, k: int, *, with_lse: bool = False):
    """lax.top_k(x, k) for float32 x [B, V] without sorting the rows (cuda/topk_kernel.cuh: the maxima of 64-entry
    chunks, then per row a radix selection over the chunks whose maximum reaches the k-th largest maximum):
    (values [B, k] descending, int32 indices [B, k]); among equal values the smaller index first. with_lse: also each
    row's logsumexp [B] (jax.nn.logsumexp(x, -1) up to summation order), from the same passes over the row."""
    out = _topk_call(x, k, with_lse=with_lse)
    return (out[0], out[1], out[4]) if with_lse else (out[0], out[1])


def top_k_sample(x: jax.Array, k: int, noise: jax.Array, temperature, top_p, *, use_top_p: bool):
    """The sampler's draw from the top k of float32 logits x [B, V] inside the top-k kernels
    (generation.sampling._draw_from_top_k with the top-k's logsumexp, in topk_select's block): (tokens int32 [B],
    their log-probabilities float32 [B] = raw logit - the row's logsumexp). noise [B, k]: the Gumbel noise
    jax.random.categorical would add to the k candidates (same key, shape (k,)); temperature divides the k values;
    with use_top_p the candidates outside the top_p nucleus are masked to -1e30 first. The same tokens as the XLA
    ops up to the rounding of the nucleus's softmax and running sum (a warp scan, not XLA's order)."""
    f32 = jnp.float32
    out = _topk_call(x, k, with_lse=True, sample=(noise.astype(f32), jnp.reshape(jnp.asarray(temperature, f32), (1,)),
                                                  jnp.reshape(jnp.asarray(top_p, f32), (1,))), use_top_p=use_top_p)
    return out[5], out[6]


def _topk_call(x, k, *, with_lse, sample=None, use_top_p=False):
    """The CudaperfTopk FFI call: (vals, idx, maxima, ms, lse, tok, logprob); sample = (noise, temperature, top_p)."""
    if x.ndim != 2 or not topk_supported(x.shape[1], k):
        raise ValueError(f"cuda_matvec.top_k: needs x [B, V] with 1 <= k <= 64 and k <= V <= 262144; "
                         f"got x {x.shape}, k {k}")
    if jax.default_backend() != "gpu":
        raise RuntimeError(f"cuda_matvec runs on an NVIDIA GPU only; JAX's backend here is {jax.default_backend()}")
    register()
    b, v = x.shape
    n_chunks = -(-v // TOPK_CHUNK)
    f32 = jnp.float32
    shapes = [jax.ShapeDtypeStruct((b, k), f32), jax.ShapeDtypeStruct((b, k), jnp.int32),
              jax.ShapeDtypeStruct((b, n_chunks), jnp.uint32),
              jax.ShapeDtypeStruct((b, 2 * n_chunks) if with_lse else (1,), f32),
              jax.ShapeDtypeStruct((b,) if with_lse else (1,), f32),
              jax.ShapeDtypeStruct((b,) if sample is not None else (1,), jnp.int32),
              jax.ShapeDtypeStruct((b,) if sample is not None else (1,), f32)]
    if sample is not None and sample[0].shape != (b, k):
        raise ValueError(f"cuda_matvec.top_k_sample: noise must be [B, k] = {(b, k)}; got {sample[0].shape}")
    one = jnp.zeros((1,), f32)
    noise, temperature, top_p = sample if sample is not None else (one, one, one)
    return jax.ffi.ffi_call(TARGETS["topk"][0], shapes)(
        x.astype(f32), noise, temperature, top_p, k=np.int64(k), with_lse=np.int64(int(with_lse)),
        sample=np.int64(int(sample is not None)), use_top_p=np.int64(int(use_top_p)))


def topk_lse_enabled() -> bool:
    """CUDAPERF_CUDA_TOPK_LSE: `on` - where the sampler takes the CUDA top-k, the chosen tokens' log-probabilities
    come from the logsumexp the top-k kernels compute on their way (no log_softmax over the vocabulary) and the top-k
    runs on the raw logits (the temperature divides only the k values); default `on` (H200, 2026-12-03: -2.5 us a
    step, benchmarks/results/decode_ab_h200_2026-12-03_fold256.json); `off` - XLA's log_softmax."""
    from cudaperf_jax.models.ops import env_choice
    return env_choice("CUDAPERF_CUDA_TOPK_LSE", "on", ("on", "off")) == "on"


def topk_sample_enabled() -> bool:
    """CUDAPERF_CUDA_SAMPLE: `on` - with CUDAPERF_CUDA_TOPK_LSE's path, the sampler's draw from the top k (temperature,
    top-p, the Gumbel argmax and the log-probability) runs at the end of the top-k kernel (top_k_sample) instead of as
    XLA ops; `off` (default until timed on the H200)."""
    from cudaperf_jax.models.ops import env_choice
    return env_choice("CUDAPERF_CUDA_SAMPLE", "off", ("on", "off")) == "on"


def topk_enabled() -> bool:
    """CUDAPERF_CUDA_TOPK: `auto` (default) and `on` - the sampler's top-k of long rows (generation.sampling.top_k)
    runs cuda_matvec.top_k when the CUDA kernels are enabled(); `off` keeps the chunked lax.top_k. On the H200
    (2026-12-03, benchmarks/results/topk_h200_radix_staged.json): top 50 of 151,936 in 38.1 us a call at batch 1 and
    48.5 at batch 32 (launch included) against the chunked sorts' 58.9 / 315 and the chunk-maxima screen's 62.2 / 67.0;
    the decode step of separate calls 1.439 ms with its first version (topk_h200_radix.json) against 1.466."""
    from cudaperf_jax.models.ops import env_choice
    return env_choice("CUDAPERF_CUDA_TOPK", "auto", ("off", "auto", "on")) != "off"


def call_pdl() -> bool:
    """CUDAPERF_CUDA_CALL_PDL: `on` - the fused step's separate matvec/finish calls are launched with programmatic
    dependent launch; `off` (default). Inside XLA's command buffers every FFI call is its own child graph, where PDL
    does nothing (benchmarks/pdl_chain.cu, H200 2026-12-03: 1250 us a step with and without); outside them it lets a
    kernel start before the one before it has finished, and kernels chained that way must read each other's outputs
    from L2 (with L1-cached loads, Qwen3-shaped steps gave wrong tokens in the chained layer launch). The one-kernel
    calls read with plain loads, so they are not chained by default (CUDAPERF_CUDA_LAYER=kernels|step chain theirs,
    reading from L2)."""
    from cudaperf_jax.models.ops import env_choice
    return env_choice("CUDAPERF_CUDA_CALL_PDL", "off", ("off", "on")) == "on"


def finish_enabled() -> bool:
    """CUDAPERF_CUDA_FINISH: `on` - with the CUDA matvecs on, the fused step's finish kernels are
    cuda_matvec.finish (PDL) instead of decode_fused's Pallas one; `off` (default) keeps the Pallas finish. Correct
    on the H200 but no faster in the step (1.522 against 1.513 ms, 2026-12-03)."""
    from cudaperf_jax.models.ops import env_choice
    return env_choice("CUDAPERF_CUDA_FINISH", "off", ("off", "on")) == "on"


for _f in (matvec, matvec_norm, matvec_swiglu, matvec_attn):
    _f.__doc__ += _DOC_EPILOGUE


def default_split(k: int, n: int, sms: int = 132, min_rows: int = 64, cols: int | None = None) -> int:
    """The smallest split giving >= 2 blocks per SM (a block owns `cols` columns, default_cols(n) by default)
    with >= min_rows rows per slice, else the largest split that keeps min_rows."""
    cols = cols or default_cols(n)
    best = 1
    for s in range(1, k // min_rows + 1):
        if k % s:
            continue
        best = s
        if (n // cols) * s >= 2 * sms:
            break
    return best


# (K, N) -> (split_k, cols, unroll): the fastest per-shape tilings of benchmarks/decode_gemv.py's CUDA sweep on
# the H200 (2026-12-03, benchmarks/results/decode_gemv_cuda_h200_1p5b.json; Qwen2.5-1.5B's shapes)
TUNED = {(1536, 2048): (12, 64, 8), (1536, 1536): (16, 64, 4), (1536, 17920): (3, 128, 4), (8960, 1536): (40, 128, 8)}


# The `kernels`/`step` launches' own entries over TUNED: gate_up with 8 loads in flight (in the PDL chain the next
# kernel's weight prefetch overlaps it): on the H200 (2026-12-03) the step 1.507 -> 1.444 and 1.523 -> 1.418 ms with
# it, while the fused step of separate calls got slower (1.464 -> 1.483); pdl_chain.cu 1143 -> 1111 us.
STEP_TUNED = {(1536, 17920): (3, 128, 8)}


def tiling_for(k: int, n: int, tuned: dict | None = None) -> tuple[int, int, int]:
    """(split_k, cols, unroll) for a [K, N] weight: CUDAPERF_CUDA_SPLIT ("KxN=S", "KxN=S:C" or "KxN=S:C:U" entries,
    comma-separated, e.g. "8960x1536=28:64:8") if it names this shape, else `tuned`'s, else TUNED's, else
    (default_split, default_cols, CUDAPERF_CUDA_UNROLL)."""
    spec = os.environ.get("CUDAPERF_CUDA_SPLIT", "").strip()
    for entry in filter(None, (e.strip() for e in spec.split(","))):
        try:
            shape, tiling = entry.split("=")
            kk, nn = (int(v) for v in shape.lower().split("x"))
            fields = [int(v) for v in tiling.split(":")]
            if not 1 <= len(fields) <= 3:
                raise ValueError
            split, cols, u = fields + [default_cols(n), _unroll()][len(fields) - 1:]
        except ValueError:
            raise ValueError(f"CUDAPERF_CUDA_SPLIT entry {entry!r}: write KxN=S, KxN=S:C or KxN=S:C:U, e.g. "
                             f"8960x1536=28:64:8") from None
        if (kk, nn) == (k, n):
            if not supported(k, n, split, cols) or u not in (4, 8):
                raise ValueError(f"CUDAPERF_CUDA_SPLIT {entry!r}: split {split} must divide K={k}, cols (64, 128 "
                                 f"or 256) must divide N={n}, and the unroll is 4 or 8")
            return split, cols, u
    return (tuned or {}).get((k, n)) or TUNED.get((k, n)) or (default_split(k, n), default_cols(n), _unroll())


def split_for(k: int, n: int) -> int:
    """The split of tiling_for."""
    return tiling_for(k, n)[0]


def mode() -> str:
    """CUDAPERF_DECODE_CUDA: `auto` (default: on for compute capability 9.x GPUs when nvcc builds the library),
    `on` or `off` - whether the fused decode path's qkv, o, gate_up and down matvecs run this kernel (bf16
    weights only), with PDL when the weights need no conversion."""
    from cudaperf_jax.models.ops import env_choice
    return env_choice("CUDAPERF_DECODE_CUDA", "auto", ("off", "auto", "on"))


def enabled() -> bool:
    """mode() resolved: `auto` is on when the first JAX device is a GPU of compute capability 9.x (the library is
    built for sm_90) and the library builds and registers; otherwise (with a warning for a failed build) off."""
    m = mode()
    return m == "on" or (m == "auto" and _auto())


@functools.cache
def _auto() -> bool:
    dev = jax.devices()[0]
    if dev.platform != "gpu" or not str(getattr(dev, "compute_capability", "")).startswith("9."):
        return False
    try:
        register()
    except Exception as e:  # noqa: BLE001 - no nvcc, a failed build: the Pallas matvecs still work
        warnings.warn(f"cuda_matvec: the CUDA decode matvecs are off ({type(e).__name__}: {str(e)[:300]}); set "
                      f"CUDAPERF_DECODE_CUDA=off to silence this, or install the CUDA toolkit's nvcc", stacklevel=2)
        return False
    return True


def epilogues() -> str:
    """CUDAPERF_CUDA_EPILOGUE: how the fused step combines split-K partials. `partials` (default; measured best on
    the H200, 2026-12-03): qkv's go to attention as they are, o's and down's through decode_fused.finish;
    `fused`: qkv sums its splits for attention and o and down add into the residual stream in their own last
    blocks (no finish kernels); `qkv`: only qkv's sum epilogue."""
    from cudaperf_jax.models.ops import env_choice
    return env_choice("CUDAPERF_CUDA_EPILOGUE", "partials", ("partials", "fused", "qkv"))


# ------------------------------------------------------------------------------------------ one layer, one kernel
LAYER_MAX_GROUP, LAYER_MAX_SMEM = 16, 200 * 1024   # layer_kernel.cuh's kMaxGroup; the handler's shared-memory cap
LAYER_RED_FLOATS, LAYER_THREADS = 2080, 256


def layer_mode() -> str:
    """CUDAPERF_CUDA_LAYER, how the batch-1 bf16 step's layers run when the CUDA matvecs are on: `auto` (default) -
    `step` for hidden sizes of at least STEP_AUTO_MIN_D where the shapes fit (layer_kernels_supported), else the fused
    step's separate calls; `step` - every layer's standalone kernels (qkv, attend_kernel, o, finish, gate_up, down,
    finish; kernels_tilings; five a layer with fold_finish, four with one_kernel_mlp) launched by ONE FFI call and
    chained by programmatic dependent launch across the layer boundaries too (cuda_matvec.step); `kernels` - the same
    with one FFI call per layer (separate FFI calls land in separate child graphs of XLA's command buffer, where PDL
    does nothing); `off` - the fused step's separate FFI and Pallas calls; `on` - each layer ONE persistent kernel
    (cuda/layer_kernel.cuh, phases separated by grid barriers); `phases` - that kernel launched once per phase (a
    cross-check, and a kernel name per phase in profiles). On the H200 (2026-12-03, decode_tune.py): Qwen2.5-1.5B step 1.394-1.418 ms/step (gate_up unrolled 8,
    2-3 attention head groups) against 1.464-1.483 for `off`; SmolLM2-135M (D 576, untuned shapes, g = 3) step 0.732
    against 0.701 for `off`, hence the size threshold; step and kernels are correct there (GPU tests; PDL's wait is
    followed by an acquire fence, without which L1 served stale activations). `on` is correct but about 2x slower
    (2.6-3.9 ms; WORKSPACE_NOTES.md 2026-12-03)."""
    from cudaperf_jax.models.ops import env_choice
    return env_choice("CUDAPERF_CUDA_LAYER", "auto", ("auto", "off", "on", "phases", "kernels", "step"))


STEP_AUTO_MIN_D = 1024   # layer_mode "auto" takes the step launch from this hidden size on (see layer_mode)


PDL_FLAGS = {"off": 0, "on": 1, "late": 3}   # matvec_kernel.cuh's kPdlOn (1) | kPdlLate (2)


def pdl_flags() -> int:
    """CUDAPERF_CUDA_PDL: `late` (default) - the layer and step launches chain their kernels by programmatic dependent
    launch, each kernel letting the next one launch once its own wait for the kernel before it has returned (at most
    one kernel runs ahead, prefetching its first weights); `on` - as soon as it starts (every kernel of the chain may
    become resident early, holding SM slots while it waits); `off` - plain launches (a diagnostic: same results, no
    overlap). On the H200 (2026-12-03, decode_ab.py in one process, random Qwen2.5-1.5B) `late` against `on`: -14 us a
    step at 256 new tokens, -8 at 64; with 6 attention head groups -43 / -23 us. Returns the kernels' pdl argument."""
    from cudaperf_jax.models.ops import env_choice
    flags = PDL_FLAGS[env_choice("CUDAPERF_CUDA_PDL", "late", tuple(PDL_FLAGS))]
    return flags | PDL_EARLY_KV if flags and attend_early() else flags


PDL_EARLY_KV = 4   # matvec_kernel.cuh's kPdlEarlyKV


def attend_early() -> bool:
    """CUDAPERF_CUDA_ATTEND_EARLY: `on` - in PDL chains the standalone attention kernel loads the slot index and the
    first batch of its cache split's key and value rows (through L2) before its wait for the qkv kernel, so that one
    round trip of loads is left after the wait instead of two; the FFI call's first kernel then launches as an
    ordinary kernel. `off` (default): on the H200 (2026-12-03, decode_ab.py) it was even (+4.5 us a step at 256 new
    tokens, -4.4 at 64; a cp.async form of it, which also cut the kernel's registers, was 0.22 ms slower)."""
    from cudaperf_jax.models.ops import env_choice
    return env_choice("CUDAPERF_CUDA_ATTEND_EARLY", "off", ("on", "off")) == "on"


def layer_blocks_per_sm() -> int:
    """CUDAPERF_CUDA_LAYER_BLOCKS: resident blocks per SM of the layer kernel's grid (default 3, what it is compiled
    for: layer_kernel.cuh's kLayerMinBlocks; the handler takes fewer if the occupancy calculator says so)."""
    v = os.environ.get("CUDAPERF_CUDA_LAYER_BLOCKS", "3")
    if not v.isdigit() or not 1 <= int(v) <= 8:
        raise ValueError(f"CUDAPERF_CUDA_LAYER_BLOCKS={v!r}: give an integer from 1 to 8")
    return int(v)


def sm_count() -> int:
    """Streaming multiprocessors of the first JAX device (132 on an H200; 132 when JAX does not say)."""
    return int(getattr(jax.devices()[0], "core_count", 0) or 132)


LAYER_MAX_SPLIT = 16   # a consumer sums every split's partials


def _grid_tiling(k: int, n: int, grid: int) -> tuple[int, int]:
    """(split, cols) with the most work items (column tiles x K slices) that still fit one wave of `grid` blocks,
    K slices of >= 32 rows, at most LAYER_MAX_SPLIT slices; among equals the wider tile. If even one slice per tile overflows the grid: (1, 128|64)."""
    best = None
    for cols in (128, 64):
        if n % cols:
            continue
        tiles = n // cols
        for split in range(1, min(k // 32, LAYER_MAX_SPLIT) + 1):
            if k % split or tiles * split > grid:
                continue
            if best is None or tiles * split > best[0]:
                best = (tiles * split, split, cols)
    if best is None:
        return 1, 128 if n % 128 == 0 else 64
    return best[1], best[2]


def layer_tiling(d: int, n_qkv: int, hdh: int, f: int, grid: int | None = None) -> tuple[tuple[int, int], ...]:
    """((split, cols) of qkv, o, gate_up, down) for the layer kernel: CUDAPERF_CUDA_LAYER_TILING ("S:C,S:C,S:C,S:C")
    if set, else for each matvec the most work items that fit one wave of the grid (SMs x layer_blocks_per_sm()):
    a second wave would leave most blocks idle while a few finish it."""
    shapes = ((d, n_qkv), (hdh, d), (d, 2 * f), (f, d))
    spec = os.environ.get("CUDAPERF_CUDA_LAYER_TILING", "").strip()
    if spec:
        try:
            out = tuple(tuple(int(v) for v in e.split(":")) for e in spec.split(","))
            assert len(out) == 4 and all(len(t) == 2 for t in out)
        except (ValueError, AssertionError):
            raise ValueError(f"CUDAPERF_CUDA_LAYER_TILING={spec!r}: write four split:cols pairs for qkv, o, gate_up and "
                             f"down, e.g. 12:64,16:64,2:128,32:128") from None
        return out
    grid = grid or sm_count() * layer_blocks_per_sm()
    return tuple(_grid_tiling(k, n, grid) for k, n in shapes)


def layer_attn_splits() -> int:
    """CUDAPERF_CUDA_LAYER_ATTN_SPLITS: cache splits per KV head in the layer kernel's attention (default 4)."""
    v = os.environ.get("CUDAPERF_CUDA_LAYER_ATTN_SPLITS", "4")
    if not v.isdigit() or int(v) < 1:
        raise ValueError(f"CUDAPERF_CUDA_LAYER_ATTN_SPLITS={v!r}: give a positive integer")
    return int(v)


def _layer_heads_ok(heads: int, kv_heads: int, head_dim: int) -> bool:
    """The attention shapes the layer kernels take: heads a multiple of the KV heads, at most LAYER_MAX_GROUP per KV
    head, a power-of-two head dim from 32 to 256."""
    return (kv_heads >= 1 and heads % kv_heads == 0 and heads // kv_heads <= LAYER_MAX_GROUP and 32 <= head_dim <= 256
            and head_dim & (head_dim - 1) == 0)


def layer_supported(d: int, heads: int, kv_heads: int, head_dim: int, f: int, s_len: int, chunk: int,
                    tiling=None, attn_splits: int | None = None) -> bool:
    """Shapes the layer kernel takes (as its FFI handler checks them)."""
    if not _layer_heads_ok(heads, kv_heads, head_dim) or chunk < 1 or chunk > 256 or d % chunk:
        return False
    g = heads // kv_heads
    n_qkv = (heads + 2 * kv_heads) * head_dim
    tiling = tiling or layer_tiling(d, n_qkv, heads * head_dim, f)
    ks, ns = (d, heads * head_dim, d, f), (n_qkv, d, 2 * f, d)
    if any(s < 1 or k % s or c not in (64, 128) or n % c for (s, c), k, n in zip(tiling, ks, ns)):
        return False
    span = -(-s_len // (attn_splits or layer_attn_splits()))
    att = (g + 2) * head_dim + (g + 1) * head_dim + 32 + 3 * LAYER_MAX_GROUP + (g + 1) * (span + 1) + \
        (LAYER_THREADS // head_dim) * g * head_dim
    need = max([att] + [LAYER_RED_FLOATS + k // s for (s, _), k in zip(tiling, ks)])
    return need * 4 <= LAYER_MAX_SMEM


def kernels_tilings(d: int, n_qkv: int, hdh: int, f: int) -> list[tuple[int, int, int, int, int]]:
    """(K, N, split_k, cols, unroll) of the `kernels`/`step` launches' qkv, o, gate_up and down matvecs: tiling_for
    with STEP_TUNED."""
    return [(k, n, *tiling_for(k, n, STEP_TUNED)) for k, n in ((d, n_qkv), (hdh, d), (d, 2 * f), (f, d))]


def layer_kernels_supported(d: int, heads: int, kv_heads: int, head_dim: int, f: int, s_len: int, chunk: int,
                            attn_splits: int | None = None) -> bool:
    """Shapes the `kernels` launch of the layer takes: the layer kernel's head limits, chunk 128 dividing D, its
    tilings (kernels_tilings), and the attention split in shared memory."""
    if not _layer_heads_ok(heads, kv_heads, head_dim) or chunk != FINISH_CHUNK or d % chunk:
        return False
    g = heads // kv_heads
    n_qkv = (heads + 2 * kv_heads) * head_dim
    for k, n, split, cols, _ in kernels_tilings(d, n_qkv, heads * head_dim, f):
        if not supported(k, n, split, cols):
            return False
    if head_dim not in (32, 64, 128, 256):   # attend_kernel_for
        return False
    span = -(-s_len // kernels_attn_splits(s_len, attn_splits))
    kv = span * (head_dim + (0 if head_dim == 32 else 32)) * 2   # layer_kernel.cuh attend_smem_bytes
    att = max(kv, 2 * 256 * g * 4) + kv + ((g + 2) * head_dim + (g + 1) * head_dim + 32 + g * span + span +
                                           3 * LAYER_MAX_GROUP + 2 * head_dim) * 4
    return att <= LAYER_MAX_SMEM


ATTEND_MAX_SLOTS = 128   # layer_kernel.cuh kAttendMaxSlots


KERNELS_ATTN_SPLITS = 8   # H200, 2026-12-03, 192-slot cache: step 1.641 ms with 8 splits, 1.696 with 4, 2.243 with 2


def attend_head_groups(g: int) -> int:
    """CUDAPERF_CUDA_ATTEND_HEAD_GROUPS: blocks of the `kernels`/`step` attention per (KV head, cache split), each
    taking g / this of the KV head's g query heads (less work per block, more blocks: attend_kernel is
    instruction-latency bound, ncu 2026-12-03). `auto` (default): g (one query head per block) when g >= 4, else 1.
    On the H200, Qwen2.5-1.5B (g = 6): 28 attentions took 229 us with 1 group, 180 with 2, 166 with 3
    (benchmarks/results/pdl_chain_h200_hg.json); decode_ab.py in one process (2026-12-03, 5 rounds,
    benchmarks/results/decode_ab_h200_2026-12-03_hg6.json) 6 groups against 3: -12 us a step at 256 new tokens, -24
    at 64, and with CUDAPERF_CUDA_PDL=late -43 / -23 us. A count not dividing g gives 1."""
    v = os.environ.get("CUDAPERF_CUDA_ATTEND_HEAD_GROUPS", "auto")
    if v == "auto":
        return g if g >= 4 else 1
    if not v.isdigit() or not 1 <= int(v) <= LAYER_MAX_GROUP:
        raise ValueError(f"CUDAPERF_CUDA_ATTEND_HEAD_GROUPS={v!r}: give auto or an integer from 1 to {LAYER_MAX_GROUP}")
    return int(v) if g % int(v) == 0 else 1


L2_PREFETCH_DEFAULT = "off"


def l2_prefetch() -> tuple[int, int, int, int]:
    """CUDAPERF_CUDA_L2_PREFETCH: what the `kernels`/`step` launches pull into L2 ahead of use - `off`, or
    comma-separated (or "+"-separated) entries:
      `kv` - each layer's qkv kernel, right after its PDL wait, the key and value cache rows its attention reads next
        (slots below the new token's; the step streams ~3 GB of weights through the 50 MB L2, so the caches are
        never there otherwise); `kv=early`: before the wait instead (while the previous MLP still streams);
      `gu=P` - the first P % of each K band of gate_up (the rows its split-K blocks stream first), `down=P` (of
        down's, by the o kernel), `o=P` (of o's, by the qkv kernel) and `from=o|qkv` (which kernel issues gate_up's:
        o, default, or qkv), e.g. "gu=40,o=100"; requested before the PDL waits. Measured slower on the H200
        (2026-12-03, medians of interleaved runs): gate_up 30 % 1.449 ms, with o 100 % 1.445, against 1.427 without
        - the extra traffic lengthens the latency-bound chain more than gate_up gains.
    Bulk L2 prefetches (matvec_kernel.cuh l2_prefetch_share, l2_prefetch_kv). Returns the handler's ints (gate_up %,
    flags: 1 gate_up's by the qkv kernel, 2 kv, 4 kv=early; o %, down %)."""
    spec = os.environ.get("CUDAPERF_CUDA_L2_PREFETCH", L2_PREFETCH_DEFAULT).strip().lower()
    out = {"gu": 0, "flags": 0, "o": 0, "down": 0}
    if spec in ("", "off"):
        return (0, 0, 0, 0)
    for entry in filter(None, (e.strip() for e in spec.replace("+", ",").split(","))):
        key, _, val = entry.partition("=")
        if key == "from" and val in ("o", "qkv"):
            out["flags"] = out["flags"] & ~1 | int(val == "qkv")
        elif key == "kv" and val in ("", "early"):
            out["flags"] = out["flags"] & 1 | (4 if val else 2)
        elif key in ("gu", "o", "down") and val.isdigit() and int(val) <= 100:
            out[key] = int(val)
        else:
            raise ValueError(f"CUDAPERF_CUDA_L2_PREFETCH entry {entry!r}: write off, or kv, kv=early, gu=P, down=P, o=P "
                             f"(percent, 0-100) and from=o|qkv, comma-separated, e.g. kv,gu=40")
    return (out["gu"], out["flags"], out["o"], out["down"])


def kernels_attn_splits(s_len: int, attn_splits: int | None = None) -> int:
    """Cache splits per KV head of the `kernels` launch's attention: attn_splits, else CUDAPERF_CUDA_LAYER_ATTN_SPLITS,
    else KERNELS_ATTN_SPLITS; raised until a split's slots (staged in shared memory) are at most ATTEND_MAX_SLOTS."""
    if attn_splits is None and "CUDAPERF_CUDA_LAYER_ATTN_SPLITS" not in os.environ:
        attn_splits = KERNELS_ATTN_SPLITS
    return max(attn_splits or layer_attn_splits(), -(-s_len // ATTEND_MAX_SLOTS))


def layer(x, ss, *, attn_scale, mlp_scale, w_qkv, b_qkv, q_norm, k_norm, cos, sin, kv_mask, cache_index, k_cache,
          v_cache, w_o, b_o, w_gu, b_gu, w_down, b_down, heads: int, chunk: int, eps_attn: float, eps_mlp: float,
          eps_qk: float, tiling=None, attn_splits: int | None = None, pdl: int = 1, per_phase: bool = False,
          blocks_per_sm: int | None = None, kernels: bool = False):
    """One decoder layer of a batch-1 decode step as one CUDA kernel (cuda/layer_kernel.cuh), with decode_fused's
    roundings: (x_out bf16 [D], its per-chunk sums of squares [D / chunk], new k cache, new v cache).

    x bf16 [D] and ss (its sums of squares per `chunk` entries, decode_fused.finish's) are the layer's input; weights
    bf16 w_qkv [D, (H + 2 Hkv) Dh], w_o [H Dh, D], w_gu [D, 2F] (gate, then up), w_down [F, D]; biases, q_norm and
    k_norm may be None; cos/sin float32 [Dh] of the new token's position; kv_mask [S]; cache_index int32 (the new
    token's slot); caches [1, Hkv, S, Dh] bf16, updated in place (donate them). pdl (0 off, else pdl_flags()'s
    values): the kernel prefetches its first weights before waiting for the previous kernel, so no kernel of the same
    program may write the weights (pass them as the jitted function receives them). per_phase: seven launches without
    the grid barrier (a cross-check). kernels: seven standalone kernels (kernels_tilings), chained by PDL
    (layer_mode)."""
    ints, scratch = _layer_plan(x.shape[0], k_cache.shape, w_qkv.shape[1], w_o.shape[0], w_down.shape[0], heads, chunk,
                                tiling, attn_splits, kernels, (b_qkv, q_norm, b_o, b_gu, b_down), pdl, per_phase,
                                blocks_per_sm)
    bf, f32 = jnp.bfloat16, jnp.float32
    shapes = scratch[:2] + [jax.ShapeDtypeStruct(k_cache.shape, bf), jax.ShapeDtypeStruct(v_cache.shape, bf)] + scratch[2:]
    args = [x.astype(bf), ss.astype(f32), attn_scale.astype(bf), mlp_scale.astype(bf), w_qkv.astype(bf), _opt(b_qkv),
            _opt(q_norm), _opt(k_norm), cos.astype(f32), sin.astype(f32), kv_mask.astype(jnp.int32),
            jnp.asarray(cache_index, jnp.int32).reshape(1), k_cache, v_cache, w_o.astype(bf), _opt(b_o), w_gu.astype(bf),
            _opt(b_gu), w_down.astype(bf), _opt(b_down)]
    out = jax.ffi.ffi_call(TARGETS["layer"][0], shapes, input_output_aliases={12: 2, 13: 3})(
        *args, ints=np.asarray(ints, np.int64), floats=_layer_floats(eps_attn, eps_mlp, eps_qk, k_cache.shape[3]))
    return out[0], out[1], out[2], out[3]


def _opt(a):
    """An optional bf16 parameter, or the 1-element dummy the handlers ignore."""
    return _DUMMY_BF16 if a is None else a.astype(jnp.bfloat16)


def _layer_floats(eps_attn, eps_mlp, eps_qk, dh):
    return np.asarray([eps_attn, eps_mlp, eps_qk, head_dim_scale(dh)], np.float32)


def _layer_plan(d, cache_shape, n_qkv, hdh, f, heads, chunk, tiling, attn_splits, kernels, optional, pdl, per_phase,
                blocks_per_sm):
    """The layer handler's int attributes and its outputs other than the caches (x_out, ss_out, then the scratch),
    after checking that the launch takes these shapes."""
    _, hkv, s_len, dh = cache_shape
    splits = kernels_attn_splits(s_len, attn_splits) if kernels else attn_splits or layer_attn_splits()
    unrolls = [4, 4, 4, 4]
    if kernels:
        full = kernels_tilings(d, n_qkv, hdh, f)
        tiling, unrolls = tuple((s, c) for _, _, s, c, _ in full), [u for *_, u in full]
        ok = layer_kernels_supported(d, heads, hkv, dh, f, s_len, chunk, splits)
    else:
        tiling = tiling or layer_tiling(d, n_qkv, hdh, f)
        ok = layer_supported(d, heads, hkv, dh, f, s_len, chunk, tiling, splits)
    if not ok:
        raise ValueError(f"cuda_matvec.layer: shapes not taken (D {d}, heads {heads}/{hkv}, head dim {dh}, F {f}, cache "
                         f"{s_len}, chunk {chunk}, tiling {tiling}, attention splits {splits}); check layer_supported "
                         f"or layer_kernels_supported")
    if jax.default_backend() != "gpu":
        raise RuntimeError(f"cuda_matvec runs on an NVIDIA GPU only; JAX's backend here is {jax.default_backend()}")
    register()
    g = heads // hkv
    bf, f32 = jnp.bfloat16, jnp.float32
    scratch = [jax.ShapeDtypeStruct((d,), bf), jax.ShapeDtypeStruct((d // chunk,), f32),
               jax.ShapeDtypeStruct((tiling[0][0] * n_qkv,), f32), jax.ShapeDtypeStruct((hkv * splits * g * dh,), f32),
               jax.ShapeDtypeStruct((hkv * splits * 2 * g,), f32), jax.ShapeDtypeStruct((tiling[1][0] * d,), f32),
               jax.ShapeDtypeStruct((d,), bf), jax.ShapeDtypeStruct((d // chunk,), f32),
               jax.ShapeDtypeStruct((tiling[2][0] * 2 * f,), f32), jax.ShapeDtypeStruct((tiling[3][0] * d,), f32)]
    ints = [heads, splits, *(s for s, _ in tiling), *(c for _, c in tiling), chunk,
            *(a is not None for a in optional), 0 if per_phase else int(pdl), 2 if kernels else int(per_phase),
            blocks_per_sm or layer_blocks_per_sm(), *unrolls, attend_head_groups(g) if kernels else 1,
            *(l2_prefetch() if kernels else (0, 0, 0, 0))]
    return ints, scratch


LAYER_KEYS = ("attn_scale", "mlp_scale", "w_qkv", "b_qkv", "q_norm", "k_norm", "k_cache", "v_cache", "w_o", "b_o",
              "w_gu", "b_gu", "w_down", "b_down")
LAYER_OPTIONAL = ("b_qkv", "q_norm", "b_o", "b_gu", "b_down")   # in the order of the handler's has_* ints


def step(x, ss, layers, *, cos, sin, kv_mask, cache_index, heads: int, chunk: int, eps_attn: float, eps_mlp: float,
         eps_qk: float, attn_splits: int | None = None, pdl: int = 1):
    """Every decoder layer of a batch-1 decode step from ONE FFI call (CUDAPERF_CUDA_LAYER=step): each layer as the
    `kernels` launch of `layer` (seven kernels, five with fold_finish, four with one_kernel_mlp as well), chained by
    PDL across the layer boundaries too. layers: one dict per layer with LAYER_KEYS (the arguments of `layer`; optional
    ones None, the same ones None in every layer). Returns (x_out, ss_out, new k caches, new v caches); the caches are
    updated in place (donate them)."""
    if not layers:
        raise ValueError("cuda_matvec.step: needs at least one layer")
    first = layers[0]
    optional = tuple(first[k] for k in LAYER_OPTIONAL)
    if any((l[k] is None) != (first[k] is None) for l in layers for k in LAYER_OPTIONAL):
        raise ValueError("cuda_matvec.step: every layer must have the same optional parameters")
    ints, scratch = _layer_plan(x.shape[0], first["k_cache"].shape, first["w_qkv"].shape[1], first["w_o"].shape[0],
                                first["w_down"].shape[0], heads, chunk, None, attn_splits, True, optional, pdl, False,
                                None)
    bf, f32 = jnp.bfloat16, jnp.float32
    fold = fold_finish(ints[3], ints[5])
    if fold and qkv_fixed() and ints[2] >= 2:
        ints[25] |= 8   # layer_kernel.cuh kPfQkvFixed
    d, f = x.shape[0], first["w_down"].shape[0]
    mlp = fold and one_kernel_mlp() and d % 8 == 0 and f % 8 == 0 and d <= 8192   # mlp_kernel's shapes (matvec.cu)
    gm = first["w_gu"].ndim == 3   # group-major gate_up (mlp_gm_layout): codes 4-6; [D, 2F] with those set: on / lean
    if gm and not mlp:   # prepared for a one-kernel MLP that does not run (e.g. the finishes not folded): row-major
        layers = [dict(l, w_gu=mlp_row_major(l["w_gu"])) for l in layers]
        gm = False
    code = mlp_kernel_code()
    code = (code if code >= 4 else 5) if gm else (1 if code == 4 else 3 if code > 4 else code)
    args = [x.astype(bf), ss.astype(f32), cos.astype(f32), sin.astype(f32), kv_mask.astype(jnp.int32),
            jnp.asarray(cache_index, jnp.int32).reshape(1)]
    aliases, cache_shapes = {}, []
    for l in layers:
        for key in LAYER_KEYS:
            if key in ("k_cache", "v_cache"):
                aliases[len(args)] = len(scratch) + len(cache_shapes)
                cache_shapes.append(jax.ShapeDtypeStruct(l[key].shape, bf))
                args.append(l[key])
            else:
                args.append(_opt(l[key]))
    out = jax.ffi.ffi_call(TARGETS["step"][0], scratch + cache_shapes, input_output_aliases=aliases)(
        *args, ints=np.asarray(ints + [len(layers), int(fold), code if mlp else 0], np.int64),
        floats=_layer_floats(eps_attn, eps_mlp, eps_qk, first["k_cache"].shape[3]))
    caches = out[len(scratch):]
    return out[0], out[1], list(caches[0::2]), list(caches[1::2])


def fold_finish(o_split: int, down_split: int) -> bool:
    """CUDAPERF_CUDA_FOLD_FINISH: `on` - the step launch runs five kernels a layer instead of seven: o and down add
    their split-K column sums to 64-bit fixed-point accumulators (deterministic in any order; matvec_kernel.cuh's
    to_fixed) and the next norm prologue rebuilds the residual stream from them in every block (no finish kernels; one
    finish after the last layer). Needs o and down split-K >= 2 (their scratch holds the accumulators). Default `on`
    (H200, 2026-12-03, decode_ab.py in one process: -27 us a step at 256 new tokens, -50 at 64;
    benchmarks/results/decode_ab_h200_2026-12-03_fold{256,64}.json); `off` - the two finish kernels a layer."""
    from cudaperf_jax.models.ops import env_choice
    on = env_choice("CUDAPERF_CUDA_FOLD_FINISH", "on", ("on", "off")) == "on"
    return on and o_split >= 2 and down_split >= 2


def qkv_fixed() -> bool:
    """CUDAPERF_CUDA_QKV_FIXED: `on` (default) - in the step launch with folded finishes, qkv adds its split-K column
    sums to 64-bit fixed-point accumulators (as o and down do) in every layer after the first, and the attention reads
    one sum a column instead of summing the split-K partials (attn_sum_parts; ~25% of attend_kernel's instructions, ncu
    2026-12-03); the o kernel clears the accumulators for the next layer. H200, random Qwen2.5-1.5B, decode_ab.py in
    one process (2026-12-04): -65.1 / -78.8 us a step at 256 / 64 new tokens (1.316 -> 1.252 ms;
    benchmarks/results/decode_ab_h200_2026-12-04_qkvfixed_*.json). `off`: the split-K partials."""
    from cudaperf_jax.models.ops import env_choice
    return env_choice("CUDAPERF_CUDA_QKV_FIXED", "on", ("on", "off")) == "on"


def one_kernel_mlp() -> bool:
    """CUDAPERF_CUDA_MLP (anything but `off`): with the folded finishes (fold_finish), each layer's gate_up and down run
    as ONE kernel (matvec_kernel.cuh's mlp_body; the variants: mlp_kernel_code): every block (one per SM) owns a range
    of intermediate features, streams their gate and up columns, applies SwiGLU and adds its share of down's product to
    the fixed-point sums - no dependency wait, launch or ramp between the two matrices (for hidden and intermediate
    sizes that are multiples of 8, hidden up to 8192; others keep two kernels). `on` against two kernels (H200,
    decode_ab.py in one process, 2026-12-03): -30.5 and -33.8 us a step at 256 new tokens, -2.0 at 64
    (benchmarks/results/decode_ab_h200_2026-12-03_mlp8_*.json, _mlp8b_*.json); `off` - gate_up and down as two
    kernels. The default is `gm768` (see mlp_kernel_code)."""
    return _mlp_choice() != "off"


# CUDAPERF_CUDA_MLP's values and their step launch codes (mlp_kernel_code; matvec.cu StepImpl's kMlpCodeFlags)
_MLP_CODES = {"off": 0, "on": 1, "rotate": 2, "lean": 3, "gm": 4, "gm_lean": 5, "gm768": 6}


def _mlp_choice() -> str:
    from cudaperf_jax.models.ops import env_choice
    return env_choice("CUDAPERF_CUDA_MLP", "gm768", tuple(_MLP_CODES))


def mlp_gm_layout(w_gu):
    """gate_up ([D, 2, F] or [D, 2F]: gate columns, then up columns) group-major for CUDAPERF_CUDA_MLP=gm: [F / 8, D,
    16], row r of group q holding gate columns 8q..8q+7 then up columns 8q..8q+7 - each 8-feature group one contiguous
    block (matvec_kernel.cuh mlp_body kGM). numpy or jax arrays."""
    d = w_gu.shape[0]
    f = w_gu.size // (2 * d)
    return w_gu.reshape(d, 2, f // 8, 8).transpose(2, 0, 1, 3).reshape(f // 8, d, 16)


def mlp_row_major(w_gm):
    """mlp_gm_layout's inverse: [F / 8, D, 16] -> [D, 2F] (gate columns, then up columns)."""
    q, d, _ = w_gm.shape
    return w_gm.reshape(q, d, 2, 8).transpose(1, 2, 0, 3).reshape(d, 16 * q)


def mlp_kernel_code() -> int:
    """The step launch's code for CUDAPERF_CUDA_MLP (matvec.cu StepImpl). H200 timings: decode_ab.py, interleaved
    rounds in one process, us a step at 256 / 64 new tokens (benchmarks/results/decode_ab_h200_2026-12-04_*.json).
      0 `off`; 1 `on` - mlp_kernel, 1024 threads, 58 registers, gate_up row-major [D, 2F];
      2 `rotate` - each block adds its column sums from a column that depends on the block (the ~130 blocks that end
        together spread their fixed-point atomics; the same sums): +2.2 / -9.1 against `on`, so not;
      3 `lean` - mlp_kernel_lean, held to 48 registers so that a block of the next layer's qkv kernel fits beside it and
        streams before the MLP ends; bit-equal to `on`: -8.9 / -23.0 against `on`;
      4 `gm` - `on` with gate_up group-major (mlp_gm_layout: each block's gate and up columns one contiguous region
        instead of two 144-byte pieces of each of D rows 35 KB apart) and six loads in flight a thread (64 registers):
        -3.7 / +1.3 against `lean` (with four: -17.7 / +2.5), so not;
      5 `gm_lean` - `lean` group-major (three loads in flight: 746 against 687 us in benchmarks/pdl_chain.cu's MLP
        chain), not timed in the step;
      6 `gm768` (the default) - group-major, blocks of 768 threads held to 64 registers (mlp_kernel_capped: six loads
        in flight, and room for a qkv block beside it): -13.9 / -15.5 against `lean` (every one of 5 rounds);
        Blocks that cannot take the capped width (D / 8 or a block's features above its threads) run the 1024-thread
        group-major kernel. (640 x 72 and 512 x 96 registers, eight and twelve loads in flight, were +9.2 / +15.4 and
        +85 / +98 us against it, 2026-12-04, and were dropped; so was a form with the weights through a ring of
        shared-memory slots filled by bulk copies, cp.async.bulk: +167 / +184 us, commit 2303663.)
    The group-major codes need the layout from decode_fused.prepared, which the sampler enters around its decode loop
    (a second copy of every gate_up while the decode program runs); a [D, 2F] gate_up (not prepared) runs `on` for 4,
    `lean` for 5-6. The gate and up sums then add in another order than `on`'s (near, not bit-equal)."""
    return _MLP_CODES[_mlp_choice()]


def head_dim_scale(dh: int) -> float:
    """The attention scale decode_fused.attend uses (dh ** -0.5)."""
    return dh ** -0.5
