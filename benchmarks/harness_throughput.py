"""Harness throughput and timing repeatability, new pool vs the per-candidate pool vs PyTorch's load_inline.

    OUT=out python benchmarks/harness_throughput.py                      # the H200 run (~5-6 min)
    OUT=out python benchmarks/harness_throughput.py --backend cpu --rl-candidates 48 \
        --legacy-candidates 48 --inline 0 --no-adversarial --quick          # the cpu backend, small

0. Adversarial kernels (tests/kernels_harness/adversarial): verdicts on this backend, pool health.
1. An RL-like mix (`make_rl_mix`): `--rl-candidates` candidates in groups of 8 samples per task over
   element-wise maps and row reductions (four implementation styles each, c2cuda tasks with a C
   reference and a naive baseline): a third fail to compile (three kinds of error), a fifth are wrong,
   the rest correct, and about a quarter of each group are exact duplicates within the group.
2. `legacy`: the first `--legacy-candidates` of the mix through PoolConfig.legacy() (one nvcc call a
   candidate, no disk cache, 2 workers a GPU) with today's timing budget (`--legacy-budget-s` 0.1).
3. `run1`, `run2`: the whole mix twice through the new pool (batches of `--batch-size`, the build
   cache, `--workers-per-gpu` workers), each with a fresh empty cache (cold; repeats within a run are
   built once). Every candidate is checked (3 configs x 2 trials, fresh inputs) and, when correct,
   timed against its baseline (events, L2 flush, adaptive repetitions, `--budget-s` a config; `--join`:
   the stream-joined times of kernels_harness.run.timing, or `device` for the legacy run's protocol;
   `--min-iqr-ms`: the IQR at which a few-microsecond call counts as stable, 0 in the legacy run);
   an exact repeat of a candidate is built once, checked on its own inputs and takes its first copy's
   times (PoolConfig.time_duplicates_once).
   Candidates per minute = candidates / wall time of `evaluate` (pool start-up reported apart; `phases`:
   when the builds were done, repeats that took a first copy's times, timing seconds per timed candidate);
   every verdict is compared with the expected one, and between the runs.
4. load_inline (the KernelBench path): `--inline` correct candidates, each built with
   torch.utils.cpp_extension.load_inline, checked on the same configs against a PyTorch reference and
   timed with CUDA events (100 repetitions per config); candidates per minute extrapolated.
5. Repeatability: per (kernel, config) timed in run1 and run2 with time >= 20 us: the ratio run2/run1
   (median, p10-p90, fraction within 3%; repeats that took a first copy's times left out); also legacy vs run1.
Writes harness_throughput.json and harness_repeatability.png under `--out` (default $OUT, else ./out);
prints a table last. Each
phase is guarded: a failure is recorded and the rest still runs.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernels_harness.tasks.schema import Task

# ---- the kernels ----------------------------------------------------------------------------------
# element-wise: z[i] = f(x[i], y[i]); (C expression, torch expression)
EW_OPS = {
    "add": ("x + y", "x + y"),
    "mul": ("x * y", "x * y"),
    "saxpy": ("2.5f * x + y", "2.5 * x + y"),
    "relu_add": ("fmaxf(x, 0.0f) + y", "torch.relu(x) + y"),
    "sigmoid": ("1.0f / (1.0f + expf(-x)) * y", "torch.sigmoid(x) * y"),
    "tanh_mul": ("tanhf(x) * y", "torch.tanh(x) * y"),
    "gelu_tanh": ("0.5f * x * (1.0f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x))) + y",
                  "torch.nn.functional.gelu(x, approximate='tanh') + y"),
    "silu": ("x / (1.0f + expf(-x)) + y", "torch.nn.functional.silu(x) + y"),
    "sq_diff": ("(x - y) * (x - y)", "(x - y) * (x - y)"),
    "lerp": ("x + 0.25f * (y - x)", "x + 0.25 * (y - x)"),
    "softplus": ("log1pf(expf(-fabsf(x))) + fmaxf(x, 0.0f) - y", "torch.nn.functional.softplus(x) - y"),
    "clamp": ("fminf(fmaxf(x + y, -0.5f), 0.5f)", "torch.clamp(x + y, -0.5, 0.5)"),
    "hypot": ("sqrtf(x * x + y * y)", "torch.sqrt(x * x + y * y)"),
    "fma3": ("x * y + x", "x * y + x"),
}
EW_CONFIGS = [{"N": 4096}, {"N": 1 << 20}, {"N": 1 << 24}]
RS_CONFIGS = [{"R": 64, "C": 64}, {"R": 4096, "C": 256}, {"R": 16384, "C": 1024}]


def _ew_kernel(style: str, expr: str) -> str:
    f = f"__device__ __forceinline__ float op(float x, float y) {{ return {expr}; }}\n"
    if style == "naive":
        return f + """__global__ void k(int n, const float* x, const float* y, float* z) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) z[i] = op(x[i], y[i]);
}
extern "C" int ENTRY(int n, const float* x, const float* y, float* z, cudaStream_t stream) {
  k<<<(n + 255) / 256, 256, 0, stream>>>(n, x, y, z);
  return (int)cudaGetLastError();
}
"""
    if style == "grid_stride":
        return f + """__global__ void k(int n, const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ z) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) z[i] = op(x[i], y[i]);
}
extern "C" int ENTRY(int n, const float* x, const float* y, float* z, cudaStream_t stream) {
  int blocks = (n + 255) / 256; if (blocks > 132 * 16) blocks = 132 * 16;
  k<<<blocks, 256, 0, stream>>>(n, x, y, z);
  return (int)cudaGetLastError();
}
"""
    if style == "vectorized":
        return f + """__global__ void k4(int n4, const float4* __restrict__ x, const float4* __restrict__ y, float4* __restrict__ z) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += gridDim.x * blockDim.x) {
    float4 a = x[i], b = y[i], c;
    c.x = op(a.x, b.x); c.y = op(a.y, b.y); c.z = op(a.z, b.z); c.w = op(a.w, b.w);
    z[i] = c;
  }
}
__global__ void tail(int n, int s, const float* x, const float* y, float* z) {
  int i = s + threadIdx.x;
  if (i < n) z[i] = op(x[i], y[i]);
}
extern "C" int ENTRY(int n, const float* x, const float* y, float* z, cudaStream_t stream) {
  int n4 = n / 4;
  if (n4) { int b = (n4 + 255) / 256; if (b > 132 * 16) b = 132 * 16;
            k4<<<b, 256, 0, stream>>>(n4, (const float4*)x, (const float4*)y, (float4*)z); }
  if (n % 4) tail<<<1, 4, 0, stream>>>(n, n4 * 4, x, y, z);
  return (int)cudaGetLastError();
}
"""
    # unrolled: 4 elements per thread, strided by blockDim
    return f + """__global__ void k(int n, const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ z) {
  int base = blockIdx.x * blockDim.x * 4 + threadIdx.x;
  #pragma unroll
  for (int u = 0; u < 4; u++) { int i = base + u * blockDim.x; if (i < n) z[i] = op(x[i], y[i]); }
}
extern "C" int ENTRY(int n, const float* x, const float* y, float* z, cudaStream_t stream) {
  k<<<(n + 1023) / 1024, 256, 0, stream>>>(n, x, y, z);
  return (int)cudaGetLastError();
}
"""


def _rs_kernel(style: str) -> str:
    if style == "naive":  # one thread per row
        return """__global__ void k(int R, int C, const float* x, float* out) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < R) { float s = 0.f; for (int j = 0; j < C; j++) s += x[(size_t)r * C + j]; out[r] = s; }
}
extern "C" int ENTRY(int R, int C, const float* x, float* out, cudaStream_t stream) {
  k<<<(R + 127) / 128, 128, 0, stream>>>(R, C, x, out);
  return (int)cudaGetLastError();
}
"""
    if style == "warp_shuffle":  # one warp per row
        return """__global__ void k(int R, int C, const float* __restrict__ x, float* __restrict__ out) {
  int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
  if (warp >= R) return;
  float s = 0.f;
  for (int j = lane; j < C; j += 32) s += x[(size_t)warp * C + j];
  for (int o = 16; o > 0; o /= 2) s += __shfl_down_sync(0xffffffffu, s, o);
  if (lane == 0) out[warp] = s;
}
extern "C" int ENTRY(int R, int C, const float* x, float* out, cudaStream_t stream) {
  k<<<(R * 32 + 255) / 256, 256, 0, stream>>>(R, C, x, out);
  return (int)cudaGetLastError();
}
"""
    if style == "smem_tree":  # one block per row, shared-memory tree
        return """__global__ void k(int R, int C, const float* __restrict__ x, float* __restrict__ out) {
  __shared__ float buf[256];
  int r = blockIdx.x; float s = 0.f;
  for (int j = threadIdx.x; j < C; j += blockDim.x) s += x[(size_t)r * C + j];
  buf[threadIdx.x] = s; __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) { if (threadIdx.x < w) buf[threadIdx.x] += buf[threadIdx.x + w]; __syncthreads(); }
  if (threadIdx.x == 0) out[r] = buf[0];
}
extern "C" int ENTRY(int R, int C, const float* x, float* out, cudaStream_t stream) {
  k<<<R, 256, 0, stream>>>(R, C, x, out);
  return (int)cudaGetLastError();
}
"""
    # vectorized warp per row (C % 4 == 0 in every config)
    return """__global__ void k(int R, int C, const float* __restrict__ x, float* __restrict__ out) {
  int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
  if (warp >= R) return;
  const float4* row = (const float4*)(x + (size_t)warp * C);
  float s = 0.f;
  for (int j = lane; j < C / 4; j += 32) { float4 v = row[j]; s += (v.x + v.y) + (v.z + v.w); }
  for (int o = 16; o > 0; o /= 2) s += __shfl_down_sync(0xffffffffu, s, o);
  if (lane == 0) out[warp] = s;
}
extern "C" int ENTRY(int R, int C, const float* x, float* out, cudaStream_t stream) {
  k<<<(R * 32 + 255) / 256, 256, 0, stream>>>(R, C, x, out);
  return (int)cudaGetLastError();
}
"""


EW_STYLES = ("naive", "grid_stride", "vectorized", "unrolled")
RS_STYLES = ("naive", "warp_shuffle", "smem_tree", "vectorized")


def _unit(entry: str, body: str, tag: str) -> str:
    return f"// {tag}\n#include <cuda_runtime.h>\n" + body.replace("ENTRY", entry)


def make_candidates(n_kernels: int) -> list[dict]:
    """[{name, task: Task, source, torch_expr, kind}] -- n_kernels candidates over the task families."""
    out = []
    for op, (cexpr, texpr) in EW_OPS.items():
        entry = f"ew_{op}"
        task = Task.from_dict({
            "id": entry, "track": "c2cuda", "entry": entry, "source": _c_reference_ew(entry, cexpr),
            "signature": [{"name": "n", "role": "scalar", "dtype": "int32", "value": "N"},
                          {"name": "x", "role": "in", "dtype": "float32", "shape": ["N"]},
                          {"name": "y", "role": "in", "dtype": "float32", "shape": ["N"]},
                          {"name": "z", "role": "out", "dtype": "float32", "shape": ["N"]}],
            "configs": EW_CONFIGS, "tolerance": {"atol": 1e-5, "rtol": 1e-5}, "flops": "N", "min_bytes": "12*N",
            "implementations": [{"name": "naive", "baseline": True, "strategies": ["naive"],
                                 "source": _unit(entry, _ew_kernel("naive", cexpr), "baseline")}]})
        for style in EW_STYLES:
            out.append({"name": f"{entry}/{style}", "task": task, "kind": "ew", "torch_expr": texpr,
                        "source": _unit(entry, _ew_kernel(style, cexpr), f"candidate {style}")})
    rs_entry = "row_sum"
    rs_task = Task.from_dict({
        "id": rs_entry, "track": "c2cuda", "entry": rs_entry,
        "source": ("void row_sum(int R, int C, const float* x, float* out) {\n"
                   "  for (int r = 0; r < R; r++) { double s = 0; for (int j = 0; j < C; j++) s += x[(long)r * C + j];"
                   " out[r] = (float)s; }\n}\n"),
        "signature": [{"name": "R", "role": "scalar", "dtype": "int32", "value": "R"},
                      {"name": "C", "role": "scalar", "dtype": "int32", "value": "C"},
                      {"name": "x", "role": "in", "dtype": "float32", "shape": ["R", "C"]},
                      {"name": "out", "role": "out", "dtype": "float32", "shape": ["R"]}],
        "configs": RS_CONFIGS, "tolerance": {"atol": 1e-4, "rtol": 1e-4}, "flops": "R*C", "min_bytes": "4*R*C+4*R",
        "implementations": [{"name": "naive", "baseline": True, "strategies": ["naive"],
                             "source": _unit(rs_entry, _rs_kernel("naive"), "baseline")}]})
    k = 0
    while len(out) < n_kernels:  # fill up with row reductions (distinct sources: a numbered tag)
        style = RS_STYLES[k % len(RS_STYLES)]
        out.append({"name": f"row_sum/{style}/{k}", "task": rs_task, "kind": "rs", "torch_expr": "x.sum(dim=1)",
                    "source": _unit(rs_entry, _rs_kernel(style), f"candidate {style} {k}")})
        k += 1
    return out[:n_kernels]


_COMPILE_ERRORS = (
    ("cudaStream_t stream) {", "cudaStream_t stream) {\n  this_is_not_declared = 0;"),   # undeclared name
    ("return (int)cudaGetLastError();", "return (int)cudaGetLastError()"),            # missing semicolon
    ("cudaStream_t stream) {", "cudaStream_t stream) {\n  float4 v = 1.0f;"),             # type error
)
_WRONG = (("return ", "return 1.01f * "), ("out[warp] = s;", "out[warp] = s * 1.01f;"),
          ("out[r] = s;", "out[r] = s * 1.01f;"), ("out[r] = buf[0];", "out[r] = buf[0] * 1.01f;"))


def make_rl_mix(n: int, seed: int = 0) -> list[dict]:
    """An RL-like stream: groups of 8 samples per task, a third failing to compile, a fifth wrong, the
    rest correct, and about a quarter of each group exact duplicates of an earlier sample of the group.
    Each candidate: {name, task, kind, torch_expr, source, expect: "compile_error" | "wrong" | "ok"}."""
    rng = np.random.default_rng(seed)
    base = make_candidates(max(64, n // 4))
    out = []
    g = 0
    while len(out) < n:
        group = []
        for j in range(8):
            if group and rng.random() < 0.25:
                group.append(dict(group[int(rng.integers(len(group)))], name=f"g{g}/s{j}/dup"))
                continue
            c = dict(base[int(rng.integers(len(base)))])
            u = rng.random()
            src = c["source"] + f"\n// sample {g}.{j}\n"
            if u < 1 / 3:
                a, b = _COMPILE_ERRORS[int(rng.integers(len(_COMPILE_ERRORS)))]
                src, expect = src.replace(a, b, 1), "compile_error"
            elif u < 1 / 3 + 1 / 5:
                if c["kind"] == "ew":
                    src = src.replace("{ return ", "{ return 1.01f * ", 1)
                else:
                    for a, b in _WRONG[1:]:
                        src = src.replace(a, b)
                expect = "wrong"
            else:
                expect = "ok"
            group.append(dict(c, source=src, expect=expect, name=f"g{g}/s{j}/{c['name']}"))
        out.extend(group)
        g += 1
    return out[:n]


def _c_reference_ew(entry: str, cexpr: str) -> str:
    return (f"#include <math.h>\nstatic float op(float x, float y) {{ return {cexpr}; }}\n"
            f"void {entry}(int n, const float* x, const float* y, float* z) {{\n"
            f"  for (int i = 0; i < n; i++) z[i] = op(x[i], y[i]);\n}}\n")


# ---- harness runs ---------------------------------------------------------------------------------
def harness_run(cands: list[dict], label: str, timing_params: dict, backend: str = "cuda",
                config=None) -> dict:
    """One HarnessPool over `cands`; config: a PoolConfig (None: the default). A fresh, empty build
    cache each run (a cold start: only repeats within the run are built once)."""
    from kernels_harness.run import HarnessPool
    from kernels_harness.run.pool_config import PoolConfig
    config = config or PoolConfig()
    if config.cache:
        import dataclasses
        config = dataclasses.replace(config, cache_dir=tempfile.mkdtemp(prefix=f"cache_{label}_"))
    t0 = time.perf_counter()
    pool = HarnessPool(backend, progress=sys.stderr.isatty(), timing_params=timing_params, config=config)
    t_start = time.perf_counter() - t0
    try:
        t1 = time.perf_counter()
        results = pool.evaluate([(c["task"], c["source"]) for c in cands])
        wall = time.perf_counter() - t1
        info = pool.worker_info
        build_stats = dict(pool.builds.stats)
        done = [t - t1 for t in pool.builds.done_at if t >= t1]
    finally:
        pool.close()
    rows = []
    for c, r in zip(cands, results):
        rows.append({"name": c["name"], "status": r.status, "expect": c.get("expect", "ok"),
                     "error": r.error[:200], "speedup": r.speedup,
                     "seconds": r.seconds,
                     "configs": [{"index": x.index, "time_ms": x.time_ms, "iqr_ms": x.time_iqr_ms, "reps": x.reps,
                                  "baseline_ms": x.baseline_ms, "correct": x.correct} for x in r.configs]})
    ok = sum(r.status == "ok" for r in results)
    stage = {k: float(sum(r.seconds.get(k, 0.0) for r in results)) for k in ("compile", "execute", "run", "time")}
    timed = [x for r in results if "timed_once" not in r.seconds for x in r.configs if x.time_ms]
    gaps = [r.seconds["sync_gap_ms"] for r in results if "sync_gap_ms" in r.seconds]
    phases = {  # where the wall time went (seconds from the start of `evaluate`; sums over candidates)
        "first_build_done_s": min(done) if done else None, "last_build_done_s": max(done) if done else None,
        "timed_once": sum("timed_once" in r.seconds for r in results),
        "timed_configs": len(timed),
        "timed_joined": int(sum(r.seconds.get("timed_joined", 0.0) for r in results if "timed_once" not in r.seconds)),
        "sync_gap_ms_median": float(np.median(gaps)) if gaps else None,
        "time_s_per_timed_candidate": stage["time"] / max(1, sum(bool(r.configs and any(x.time_ms for x in r.configs))
                                                                 and "timed_once" not in r.seconds for r in results)),
    }
    as_expected = sum(x["status"] == x["expect"] for x in rows)
    return {"label": label, "pool_start_s": t_start, "wall_s": wall, "candidates": len(cands), "ok": ok,
            "as_expected": as_expected, "statuses": {st: sum(x["status"] == st for x in rows) for st in
                                                     sorted({x["status"] for x in rows})},
            "per_minute": 60.0 * len(cands) / wall, "stage_seconds_sum": stage, "phases": phases, "workers": info,
            "config": dataclasses_asdict(config), "builds": build_stats, "rows": rows}


def dataclasses_asdict(cfg) -> dict:
    import dataclasses
    return dataclasses.asdict(cfg)


# ---- adversarial kernels (the GPU variant of tests/kernels_harness/adversarial, without pytest) ------
ADV_DIR = Path(__file__).resolve().parents[1] / "tests" / "kernels_harness" / "adversarial"
ADV_EXPECTED = {
    "good_naive": {"ok"}, "good_vectorized": {"ok"}, "wrong_result": {"wrong"}, "nan_output": {"wrong"},
    "writes_nothing": {"wrong"}, "oob_write": {"runtime_error", "wrong"}, "oob_read": {"wrong", "runtime_error"},
    "never_ends": {"timeout"}, "segfault_host": {"runtime_error"}, "calls_exit": {"hack"}, "forks": {"hack"},
    "alloc_100gb": {"ok", "runtime_error", "timeout"}, "mutates_input": {"wrong"}, "cached_results": {"wrong"},
    "other_stream": {"hack"}, "spins_on_clock": {"hack"},
}


def adversarial_run(backend: str = "cuda") -> dict:
    """Verdicts of the adversarial kernels, then the pool must still pass the good ones."""
    from kernels_harness.run import HarnessPool
    task = Task.from_dict(json.loads((ADV_DIR / "saxpy_task.json").read_text()))
    names = list(ADV_EXPECTED)
    t0 = time.perf_counter()
    with HarnessPool(backend, call_timeout_s=10, features=False) as pool:
        res = pool.evaluate([(task, (ADV_DIR / f"{n}.cu").read_text()) for n in names])
        again = pool.evaluate([(task, (ADV_DIR / "good_naive.cu").read_text())])[0]
    rows = [{"name": n, "status": r.status, "expected": sorted(ADV_EXPECTED[n]), "as_expected": r.status in ADV_EXPECTED[n],
             "error": r.error[:200]} for n, r in zip(names, res)]
    good = [r for n, r in zip(names, res) if n.startswith("good")]
    timing = [{"name": n, "configs": [(c.index, c.time_ms, c.time_iqr_ms, c.baseline_ms, c.reps) for c in r.configs]}
              for n, r in zip(names, res) if n.startswith("good")]
    return {"rows": rows, "as_expected": sum(r["as_expected"] for r in rows), "total": len(rows),
            "healthy_after": again.status == "ok", "good_timing": timing,
            "good_speedups": [r.speedup for r in good], "seconds": time.perf_counter() - t0}


# ---- load_inline runs -----------------------------------------------------------------------------
def _wrapper(c: dict) -> tuple[str, str]:
    t = c["task"]
    if c["kind"] == "ew":
        cpp = "torch::Tensor run(torch::Tensor x, torch::Tensor y);"
        cu = c["source"] + f"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
torch::Tensor run(torch::Tensor x, torch::Tensor y) {{
  auto z = torch::empty_like(x);
  {t.entry}((int)x.numel(), x.data_ptr<float>(), y.data_ptr<float>(), z.data_ptr<float>(),
            at::cuda::getCurrentCUDAStream());
  return z;
}}
"""
    else:
        cpp = "torch::Tensor run(torch::Tensor x);"
        cu = c["source"] + f"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
torch::Tensor run(torch::Tensor x) {{
  auto out = torch::empty({{x.size(0)}}, x.options());
  {t.entry}((int)x.size(0), (int)x.size(1), x.data_ptr<float>(), out.data_ptr<float>(),
            at::cuda::getCurrentCUDAStream());
  return out;
}}
"""
    return cpp, cu


def inline_one(c: dict, idx: int, build_root: str) -> dict:
    import torch
    from torch.utils.cpp_extension import load_inline
    t0 = time.perf_counter()
    cpp, cu = _wrapper(c)
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")
    mod = load_inline(name=f"cand_{idx}_{os.getpid()}", cpp_sources=[cpp], cuda_sources=[cu], functions=["run"],
                      build_directory=tempfile.mkdtemp(dir=build_root), verbose=False,
                      extra_cuda_cflags=["-O3"])
    t_build = time.perf_counter() - t0
    correct, times = True, []
    configs = EW_CONFIGS if c["kind"] == "ew" else RS_CONFIGS
    for cfg in configs:
        for trial in range(2):
            g = torch.Generator(device="cuda").manual_seed(1000 * idx + trial)
            if c["kind"] == "ew":
                x = torch.rand(cfg["N"], device="cuda", generator=g) * 2 - 1
                y = torch.rand(cfg["N"], device="cuda", generator=g) * 2 - 1
                args = (x, y)
            else:
                x = torch.rand(cfg["R"], cfg["C"], device="cuda", generator=g) * 2 - 1
                args = (x,)
            got = mod.run(*args)
            ref = eval(c["torch_expr"], {"torch": torch, "x": x, **({"y": args[1]} if len(args) > 1 else {})})
            correct &= bool(torch.allclose(got, ref, atol=1e-4, rtol=1e-4))
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for _ in range(3):
            mod.run(*args)
        ts = []
        for _ in range(100):  # KernelBench: 100 timed trials per problem
            start.record()
            mod.run(*args)
            end.record()
            torch.cuda.synchronize()
            ts.append(start.elapsed_time(end))
        times.append(float(np.median(ts)))
    return {"name": c["name"], "build_s": t_build, "total_s": time.perf_counter() - t0, "correct": correct,
            "time_ms": times}


def inline_runs(cands: list[dict], n: int, deadline: float = float("inf")) -> dict:
    build_root = tempfile.mkdtemp(prefix="load_inline_")
    picks = [cands[i * max(len(cands) // max(n, 1), 1)] for i in range(n)]
    rows = []
    for i, c in enumerate(picks):
        if deadline - time.perf_counter() < 60 and rows:
            print("[load_inline] stopping: the time budget is spent", file=sys.stderr, flush=True)
            break
        try:
            rows.append(inline_one(c, i, build_root))
        except Exception as e:  # noqa: BLE001 - a failing candidate is a row, the others still run
            rows.append({"name": c["name"], "error": f"{type(e).__name__}: {e}"[:400]})
        print(f"[load_inline] {rows[-1]}", file=sys.stderr, flush=True)
    good = [r for r in rows if "total_s" in r]
    mean = float(np.mean([r["total_s"] for r in good])) if good else None
    return {"measured": len(good), "rows": rows, "mean_s_per_candidate": mean,
            "per_minute": 60.0 / mean if mean else None,
            "note": f"extrapolated: {len(good)} load_inline candidates built, checked and timed one after another; "
                    "candidates per minute = 60 / mean seconds per candidate"}


# ---- repeatability -------------------------------------------------------------------------------
def repeatability(r1: dict, r2: dict, min_ms: float = 0.02) -> dict:
    pairs = []
    by_name = {r["name"]: r for r in r2["rows"]}
    for a in r1["rows"]:
        b = by_name.get(a["name"])
        if not b or "timed_once" in (a.get("seconds") or {}) or "timed_once" in (b.get("seconds") or {}):
            continue  # (a repeat that took its first copy's times would count that kernel twice)
        for ca, cb in zip(a["configs"], b["configs"]):
            if ca["time_ms"] and cb["time_ms"] and min(ca["time_ms"], cb["time_ms"]) >= min_ms:
                pairs.append((a["name"], ca["index"], ca["time_ms"], cb["time_ms"]))
    if not pairs:
        return {"pairs": 0}
    ratio = np.array([p[3] / p[2] for p in pairs])
    dev = np.abs(ratio - 1)
    return {"pairs": len(pairs), "min_ms": min_ms, "median_ratio": float(np.median(ratio)),
            "p10_ratio": float(np.percentile(ratio, 10)), "p90_ratio": float(np.percentile(ratio, 90)),
            "median_abs_dev": float(np.median(dev)), "max_abs_dev": float(dev.max()),
            "within_3pct": float(np.mean(dev <= 0.03)), "points": [list(p) for p in pairs]}


def plot(rep: dict, path: Path) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    pts = rep.get("points") or []
    if not pts:
        return
    a = np.array([p[2] for p in pts]) * 1000
    b = np.array([p[3] for p in pts]) * 1000
    fig, ax = plt.subplots(1, 2, figsize=(10, 4))
    ax[0].loglog(a, b, ".", alpha=0.7)
    lo, hi = min(a.min(), b.min()), max(a.max(), b.max())
    ax[0].plot([lo, hi], [lo, hi], "k--", lw=0.8)
    ax[0].set_xlabel("run 1 (us)")
    ax[0].set_ylabel("run 2 (us)")
    ax[0].set_title("kernel time, two separate harness runs")
    ax[1].hist(b / a, bins=40)
    ax[1].axvline(0.97, color="r", ls=":")
    ax[1].axvline(1.03, color="r", ls=":")
    ax[1].set_xlabel("run 2 / run 1")
    ax[1].set_title(f"{len(pts)} (kernel, config) pairs >= 20 us")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def save(report: dict, out_dir: Path, t_all: float) -> None:
    report["total_s"] = time.perf_counter() - t_all
    (out_dir / "harness_throughput.json").write_text(json.dumps(report, indent=1, default=str))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kernels", type=int, default=64)
    ap.add_argument("--inline", type=int, default=2, help="load_inline candidates to build (each ~45 s)")
    ap.add_argument("--quick", action="store_true", help="one harness run, no load_inline (smoke test)")
    ap.add_argument("--budget-s", type=float, default=0.03, help="timing budget per config and candidate")
    ap.add_argument("--legacy-budget-s", type=float, default=0.1,
                    help="timing budget of the legacy pool run (0.1: as measured on 2026-12-02)")
    ap.add_argument("--rl-candidates", type=int, default=384, help="candidates of the RL mix (new pool, twice)")
    ap.add_argument("--legacy-candidates", type=int, default=96,
                    help="the first candidates of the mix also run through PoolConfig.legacy() (0: skip)")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--workers-per-gpu", type=int, default=6)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--backend", default="cuda", help="cuda (the benchmark) or cpu (a smoke test of the script)")
    ap.add_argument("--no-adversarial", action="store_true", help="skip the adversarial-kernel verdicts")
    ap.add_argument("--total-budget-s", type=float, default=480.0,
                    help="no load_inline build starts when less than 60 s of this budget is left")
    ap.add_argument("--join", default="auto", choices=("auto", "device"),
                    help="timing of the new pool: auto (stream join, device-wide when work ran elsewhere) or "
                         "device (a device synchronisation inside every repetition: the legacy pool's timing)")
    ap.add_argument("--min-iqr-ms", type=float, default=0.0005,
                    help="timing of the new pool: a call is stable at this IQR too (the event timer's resolution)")
    ap.add_argument("--out", default=None, help="output directory (default: $OUT, else ./out)")
    args = ap.parse_args(argv)
    out_dir = Path(args.out or os.environ.get("OUT", "out"))
    out_dir.mkdir(parents=True, exist_ok=True)
    report: dict = {"argv": sys.argv[1:], "errors": {}}
    t_all = time.perf_counter()
    cands = make_candidates(args.kernels)
    report["kernels"] = len(cands)
    timing = {"budget_s": args.budget_s, "target_rel_iqr": 0.02, "min_reps": 10, "join": args.join,
              "min_iqr_ms": args.min_iqr_ms}
    legacy_timing = {"budget_s": args.legacy_budget_s, "target_rel_iqr": 0.02, "min_reps": 10, "join": "device",
                     "min_iqr_ms": 0.0}  # the timing of the pool before 2026-12-06
    if not args.no_adversarial:
        try:
            report["adversarial"] = adversarial_run(args.backend)
            a = report["adversarial"]
            print(f"[adversarial] {a['as_expected']}/{a['total']} as expected, healthy after: {a['healthy_after']}, "
                  f"{a['seconds']:.0f} s; unexpected: "
                  f"{[(r['name'], r['status'], r['error'][:80]) for r in a['rows'] if not r['as_expected']]}",
                  file=sys.stderr, flush=True)
        except Exception:  # noqa: BLE001 - a failing phase is reported, the others still run
            report["errors"]["adversarial"] = traceback.format_exc()[-2000:]
    from kernels_harness.run.pool_config import PoolConfig
    mix = make_rl_mix(args.rl_candidates, args.seed)
    legacy_mix = mix[:args.legacy_candidates]
    report["rl_mix"] = {"candidates": len(mix), "legacy_candidates": len(legacy_mix),
                        "expect": {e: sum(c["expect"] == e for c in mix) for e in ("ok", "wrong", "compile_error")},
                        "distinct_sources": len({c["source"] for c in mix})}
    new_cfg = PoolConfig(batch_size=args.batch_size, workers_per_gpu=args.workers_per_gpu)
    plan = [("legacy", legacy_mix, PoolConfig.legacy(), legacy_timing)] if args.legacy_candidates else []
    plan += [("run1", mix, new_cfg, timing)] + ([] if args.quick else [("run2", mix, new_cfg, timing)])
    runs = []
    for label, cs, cfg, tp in plan:
        try:
            runs.append(harness_run(cs, label, tp, args.backend, cfg))
            r = runs[-1]
            print(f"[harness {label}] {r['candidates']} candidates, {r['as_expected']} verdicts as expected "
                  f"{r['statuses']}, {r['wall_s']:.1f} s, {r['per_minute']:.1f}/min, builds {r['builds']}",
                  file=sys.stderr, flush=True)
        except Exception:  # noqa: BLE001 - a failing phase is reported, the others still run
            report["errors"][label] = traceback.format_exc()[-2000:]
            print(report["errors"][label], file=sys.stderr)
    report["harness"] = runs
    by = {r["label"]: r for r in runs}
    if "run1" in by and "legacy" in by:
        report["verdicts_equal_legacy_new"] = sum(a["status"] == b["status"] for a, b in
                                                  zip(by["legacy"]["rows"], by["run1"]["rows"]))
    if "run1" in by and "run2" in by:
        try:
            report["repeatability"] = repeatability(by["run1"], by["run2"])
            plot(report["repeatability"], out_dir / "harness_repeatability.png")
            if "legacy" in by:  # the same kernels timed by the old pool and the new one
                report["repeatability_legacy_vs_new"] = repeatability(by["legacy"], by["run1"])
            same = sum(a["status"] == b["status"] for a, b in zip(by["run1"]["rows"], by["run2"]["rows"]))
            report["verdicts_equal_run1_run2"] = same
        except Exception:  # noqa: BLE001 - a failing phase is reported, the others still run
            report["errors"]["repeatability"] = traceback.format_exc()[-2000:]
    save(report, out_dir, t_all)  # the harness results survive if the load_inline phase is cut short
    if not args.quick and args.inline > 0:
        try:
            report["load_inline"] = inline_runs([c for c in mix if c["expect"] == "ok"] or cands, args.inline,
                                                deadline=t_all + args.total_budget_s)
        except Exception:  # noqa: BLE001 - a failing phase is reported, the others still run
            report["errors"]["load_inline"] = traceback.format_exc()[-2000:]
    save(report, out_dir, t_all)
    # ---- the table ----
    print(f"\n== harness throughput ({args.backend}) ==")
    for r in runs:
        ph = r.get("phases") or {}
        built = f"{ph.get('first_build_done_s') or 0:.1f}-{ph.get('last_build_done_s') or 0:.1f}"
        print(f"  {r['label']}: builds done {built} s, "
              f"{ph.get('timed_once')} repeats took their first copy's times, stage sums {r['stage_seconds_sum']}, "
              f"timing {ph.get('time_s_per_timed_candidate', 0):.3f} s/timed candidate, "
              f"{ph.get('timed_joined')}/{ph.get('timed_configs')} configs stream-joined, "
              f"sync gap median {ph.get('sync_gap_ms_median')} ms")
    for r in runs:
        bad = [x for x in r["rows"] if x["status"] != "ok"][:3]
        print(f"harness {r['label']}: {r['ok']}/{r['candidates']} ok, {r['as_expected']} as expected  "
              f"wall {r['wall_s']:.1f} s  "
              f"{r['per_minute']:.1f} cand/min  (pool start {r['pool_start_s']:.1f} s)"
              + (f"  first failures: {[(x['name'], x['status'], x['error'][:80]) for x in bad]}" if bad else ""))
    adv = report.get("adversarial")
    if adv:
        wrong = [(r["name"], r["status"], r["error"][:60]) for r in adv["rows"] if not r["as_expected"]]
        print(f"adversarial: {adv['as_expected']}/{adv['total']} verdicts as expected, pool healthy after: "
              f"{adv['healthy_after']} ({adv['seconds']:.0f} s)" + (f"  unexpected: {wrong}" if wrong else ""))
    li = report.get("load_inline") or {}
    if li.get("per_minute"):
        print(f"load_inline: {li['measured']} measured, {li['mean_s_per_candidate']:.1f} s/cand -> "
              f"{li['per_minute']:.2f} cand/min (extrapolated)")
        if runs:
            best = max(r["per_minute"] for r in runs)
            print(f"ratio harness / load_inline: {best / li['per_minute']:.1f}x (goal >= 50x)")
    if "run1" in by and "legacy" in by:
        print(f"new pool / legacy pool: {by['run1']['per_minute'] / by['legacy']['per_minute']:.1f}x "
              f"({by['run1']['per_minute']:.0f} vs {by['legacy']['per_minute']:.0f} cand/min; goal 1000/min); "
              f"verdicts equal on the shared candidates: {report.get('verdicts_equal_legacy_new')}"
              f"/{by['legacy']['candidates']}")
    rep = report.get("repeatability") or {}
    if rep.get("pairs"):
        print(f"repeatability ({rep['pairs']} pairs >= 20 us): median ratio {rep['median_ratio']:.4f}, "
              f"p10-p90 {rep['p10_ratio']:.4f}-{rep['p90_ratio']:.4f}, median |dev| {100 * rep['median_abs_dev']:.2f}%, "
              f"within 3%: {100 * rep['within_3pct']:.0f}%")
    for k, v in report["errors"].items():
        print(f"ERROR in {k}: {v.strip().splitlines()[-1][:200]}")
    print(f"total {report['total_s']:.0f} s; JSON: {out_dir / 'harness_throughput.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
