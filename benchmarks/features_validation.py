"""Validates kernels_harness.features on an H100/H200: occupancy, coalescing, peaks, score vs speed.

    OUT=out python benchmarks/features_validation.py [--tasks DIR ...] [--dataset-per-family 1]
                                                     [--skip-ncu] [--budget-s 300]
    python benchmarks/features_validation.py --dry-run      # no GPU: builds and static features only

Stages, in order of importance (each reports its own failure and the rest go on; a stage that would
start after --budget-s seconds is skipped):
  peaks      copy bandwidth (CuPy), fp32/fp64 GEMM (CuPy, TF32 off) and bf16 GEMM (torch), cached as
             $OUT/device_peaks.json and ~/.cache/cudaperf/device_peaks.json (read by features.roofline).
  occupancy  a corpus of kernels (register pressure 2..140 accumulators, static shared memory 1-48 KiB,
             dynamic shared memory up to 200 KiB with the opt-in attribute) x block sizes: the runtime's
             cudaOccupancyMaxActiveBlocksPerMultiprocessor against features.occupancy.theoretical (exact
             agreement expected), and ptxas registers against cudaFuncGetAttributes.
  families   every implementation of every task in --tasks (default: the hand-written families of
             tests/kernels_harness/features/data and the smoke suite), built with nvcc, timed (CUDA
             events, median) on its largest config in a child process per task, checked against the
             task's baseline implementation, scored by features.analyse; Spearman's rho of the static
             structural score vs speed within each task.
  ncu        (when `ncu --clock-control none` works) the corpus on its middle configs under Nsight
             Compute: sectors per request (loads, stores), achieved and theoretical occupancy; agreement
             of static and measured coalescing, and of our theoretical occupancy with ncu's.
  dataset    the same as `families` for --dataset-per-family generated tasks of each c2cuda family.
Writes $OUT/features_validation.json and PNG plots; prints a short table last.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import csv
import ctypes
import datetime
import io
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

os.environ.setdefault("CUPY_TF32", "0")  # fp32 peak without tensor cores; must precede the CuPy import
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kernels_harness.features import occupancy as occ_lib

DEFAULT_TASKS = [REPO / "tests/kernels_harness/features/data", REPO / "experiments/suites/smoke"]
NCU_METRICS = ["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
               "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum", "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
               "sm__warps_active.avg.pct_of_peak_sustained_active", "sm__maximum_warps_per_active_cycle_pct",
               "launch__registers_per_thread", "launch__block_size", "launch__grid_size", "gpu__time_duration.sum",
               "launch__shared_mem_per_block_static", "launch__shared_mem_per_block_dynamic"]


# ---- statistics -------------------------------------------------------------------------------------
def ranks(xs: list) -> list[float]:
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    r = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2.0
        i = j + 1
    return r


def spearman(xs: list, ys: list) -> float | None:
    """Spearman's rho with average ranks for ties; None when undefined (n < 2 or a constant side)."""
    if len(xs) < 2:
        return None
    rx, ry = ranks(xs), ranks(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sx = math.sqrt(sum((a - mx) ** 2 for a in rx))
    sy = math.sqrt(sum((b - my) ** 2 for b in ry))
    return None if sx == 0 or sy == 0 else sxy / (sx * sy)


# ---- occupancy corpus -------------------------------------------------------------------------------
REG_ACCUMULATORS = (2, 8, 24, 40, 56, 72, 100, 140)
SMEM_FLOATS = (256, 2500, 4000, 8192, 12288)
BLOCKS = (32, 64, 96, 128, 160, 192, 256, 384, 512, 640, 768, 1024)


def corpus_source() -> tuple[str, list[str]]:
    """CUDA source of the occupancy corpus with a C query API, and the kernel names in index order."""
    kernels, names = [], []
    body = ['#include <cuda_runtime.h>',
            'template <int N> __global__ void regs_k(const float* __restrict__ x, float* y, int n) {',
            '  float acc[N];',
            '#pragma unroll',
            '  for (int j = 0; j < N; j++) acc[j] = x[threadIdx.x + j * 32];',
            '  for (int it = 0; it < n; it++) {',
            '#pragma unroll',
            '    for (int j = 0; j < N; j++) acc[j] = acc[j] * acc[(j + 1) % N] + x[it];',
            '  }',
            '  float s = 0.f;',
            '#pragma unroll',
            '  for (int j = 0; j < N; j++) s += acc[j];',
            '  y[blockIdx.x * blockDim.x + threadIdx.x] = s;',
            '}',
            '__global__ void __launch_bounds__(1024) capped_k(const float* __restrict__ x, float* y, int n) {',
            '  float acc[56];',
            '#pragma unroll',
            '  for (int j = 0; j < 56; j++) acc[j] = x[threadIdx.x + j * 32];',
            '  for (int it = 0; it < n; it++) {',
            '#pragma unroll',
            '    for (int j = 0; j < 56; j++) acc[j] = acc[j] * acc[(j + 1) % 56] + x[it];',
            '  }',
            '  float s = 0.f;',
            '#pragma unroll',
            '  for (int j = 0; j < 56; j++) s += acc[j];',
            '  y[blockIdx.x * blockDim.x + threadIdx.x] = s;',
            '}',
            'template <int S> __global__ void smem_k(float* y) {',
            '  __shared__ float buf[S];',
            '  for (int i = threadIdx.x; i < S; i += blockDim.x) buf[i] = i;',
            '  __syncthreads();',
            '  y[blockIdx.x * blockDim.x + threadIdx.x] = buf[(threadIdx.x * 7) % S];',
            '}',
            '__global__ void dyn_k(float* y, int s) {',
            '  extern __shared__ float d[];',
            '  for (int i = threadIdx.x; i < s; i += blockDim.x) d[i] = i;',
            '  __syncthreads();',
            '  y[blockIdx.x * blockDim.x + threadIdx.x] = d[(threadIdx.x * 7) % s];',
            '}']
    for n in REG_ACCUMULATORS:
        kernels.append(f"(const void*)&regs_k<{n}>")
        names.append(f"regs_k<{n}>")
    kernels.append("(const void*)&capped_k")
    names.append("capped_k")
    for s in SMEM_FLOATS:
        kernels.append(f"(const void*)&smem_k<{s}>")
        names.append(f"smem_k<{s}>")
    kernels.append("(const void*)&dyn_k")
    names.append("dyn_k")
    body += [f"static const void* KERNELS[] = {{{', '.join(kernels)}}};",
             f"static const int NK = {len(kernels)};",
             'extern "C" int occ_num_kernels() { return NK; }',
             'extern "C" int occ_attrs(int i, int* regs, int* smem, int* maxdyn, int* maxthreads) {',
             '  cudaFuncAttributes a; cudaError_t e = cudaFuncGetAttributes(&a, KERNELS[i]);',
             '  *regs = a.numRegs; *smem = (int)a.sharedSizeBytes; *maxdyn = a.maxDynamicSharedSizeBytes;',
             '  *maxthreads = a.maxThreadsPerBlock; return (int)e; }',
             'extern "C" int occ_set_max_dynamic(int i, int bytes) {',
             '  return (int)cudaFuncSetAttribute(KERNELS[i], cudaFuncAttributeMaxDynamicSharedMemorySize, bytes); }',
             'extern "C" int occ_query(int i, int threads, int dyn, int* blocks) {',
             '  *blocks = -1;',
             '  return (int)cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, KERNELS[i], threads, (size_t)dyn); }']
    return "\n".join(body) + "\n", names


def _ptxas_by_template(resources: dict, names: list[str]) -> dict:
    """ptxas records keyed by the corpus names (regs_k<8> etc.), from their demangled signatures."""
    out = {}
    for rec in resources.values():
        sig = rec.get("signature", "")
        for n in names:
            base, _, arg = n.partition("<")
            if sig.split("(")[0].split()[-1].startswith(base) and (not arg or f"<{arg.rstrip('>')}>" in sig.replace(" ", "")):
                out[n] = rec
    return out


def stage_occupancy(work: Path, dry: bool) -> dict:
    from kernels_harness.build import nvcc
    src, names = corpus_source()
    b = nvcc.build_shared(src, work / "occ_corpus.so", timeout_s=300)
    if not b.ok:
        return {"error": "corpus does not build: " + b.log[-1500:]}
    ptxas = _ptxas_by_template(b.resources, names)
    out = {"kernels": names, "build_s": round(b.seconds, 2), "ptxas": {n: {k: ptxas[n].get(k) for k in
           ("registers", "smem_static", "spill_stores", "barriers")} for n in ptxas}}
    if dry:
        out["skipped"] = "dry run: no GPU"
        return out
    lib = ctypes.CDLL(str(b.path))
    cases = []

    def attrs(i):
        r, s, m, t = (ctypes.c_int() for _ in range(4))
        e = lib.occ_attrs(i, *(ctypes.byref(x) for x in (r, s, m, t)))
        return e, r.value, s.value, m.value, t.value

    def query(i, threads, dyn, maxdyn_set):
        _, regs, smem, maxdyn, maxthreads = attrs(i)
        blocks = ctypes.c_int()
        rc = lib.occ_query(i, threads, dyn, ctypes.byref(blocks))
        bars = int((ptxas.get(names[i]) or {}).get("barriers", 0) or 0)
        mine = occ_lib.theoretical(regs, smem, threads, dynamic_smem=dyn, barriers=bars,
                                   max_dynamic_smem=maxdyn if maxdyn_set else None)
        runtime_blocks = blocks.value if rc == 0 else 0
        cases.append({"kernel": names[i], "threads": threads, "dyn": dyn, "regs": regs, "smem": smem,
                      "max_dynamic": maxdyn, "max_threads": maxthreads, "rc": rc, "runtime": runtime_blocks,
                      "theoretical": mine.blocks_per_sm, "limiting": list(mine.limiting),
                      "ptxas_registers": (ptxas.get(names[i]) or {}).get("registers"),
                      "agree": runtime_blocks == mine.blocks_per_sm})

    dyn_i = names.index("dyn_k")
    for i in range(len(names)):
        if i == dyn_i:
            continue
        for t in BLOCKS:
            for dyn in (0, 5000):
                query(i, t, dyn, False)
    for t in BLOCKS:
        for dyn in (0, 20000, 48000, 60000):
            query(dyn_i, t, dyn, False)
    rc = lib.occ_set_max_dynamic(dyn_i, 200 * 1024)
    for t in BLOCKS:
        for dyn in (60000, 100000, 150000, 200 * 1024):
            query(dyn_i, t, dyn, rc == 0)
    agree = sum(c["agree"] for c in cases)
    reg_match = [c for c in cases if c["ptxas_registers"] is not None]
    out.update(cases=cases, pairs=len(cases), agree=agree, disagreements=[c for c in cases if not c["agree"]][:20],
               ptxas_vs_runtime_registers_agree=all(c["ptxas_registers"] == c["regs"] for c in reg_match),
               distinct_register_counts=sorted({c["regs"] for c in cases}))
    return out


# ---- running implementations -----------------------------------------------------------------------
def load_tasks(dirs: list) -> list:
    from kernels_harness.tasks.schema import load_task
    tasks = []
    for d in dirs:
        for p in sorted(Path(d).glob("*.json")):
            try:
                t = load_task(p)
            except Exception as e:  # noqa: BLE001 - a bad file is reported, the rest go on
                print(f"skipping {p}: {e}", file=sys.stderr)
                continue
            if t.track == "c2cuda" and len(t.implementations) >= 2:
                tasks.append((p, t))
    return tasks


def dataset_tasks(per_family: int, out_dir: Path, seed: int = 0) -> list[Path]:
    """Writes `per_family` generated c2cuda tasks of every dataset family as JSON files; returns them."""
    import importlib
    import pkgutil
    import random
    try:
        pkg = importlib.import_module("kernels_harness.datasets.c2cuda")
    except ImportError:
        return []
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for m in pkgutil.iter_modules(pkg.__path__):
        try:
            mod = importlib.import_module(f"{pkg.__name__}.{m.name}")
            vs = list(mod.variants(random.Random(seed)))
        except Exception as e:  # noqa: BLE001 - a family without the generator API is skipped
            print(f"dataset family {m.name} skipped: {type(e).__name__}: {e}", file=sys.stderr)
            continue
        random.Random(seed + 1).shuffle(vs)
        for p in vs[:per_family]:
            try:
                t = mod.build(p)
            except Exception as e:  # noqa: BLE001
                print(f"dataset task {m.name}/{p.get('name')} skipped: {e}", file=sys.stderr)
                continue
            path = out_dir / f"{t.id}.json"
            path.write_text(t.to_json())
            paths.append(path)
    return paths


def build_all(tasks, work: Path, jobs: int) -> dict:
    from kernels_harness.build import nvcc
    todo = [(t, i) for _, t in tasks for i in t.implementations if i.expected == "correct"]

    def one(ti):
        t, i = ti
        return (t.id, i.name), nvcc.build_shared(i.source, work / f"{t.id}__{i.name}.so", timeout_s=240)
    out = {}
    with cf.ThreadPoolExecutor(max_workers=jobs) as ex:
        for key, b in ex.map(one, todo):
            out[key] = b
    return out


def host_inputs(task, cfg: dict, seed: int = 0) -> dict:
    try:
        from kernels_harness.run.inputs import host_inputs as hi
        return hi(task, cfg, seed)
    except ImportError:
        import numpy as np

        from kernels_harness.tasks import inits
        from kernels_harness.tasks.schema import config_env
        env = config_env(cfg)
        return {a.name: inits.generate(a.init, np.random.default_rng([seed, k]), task.shape(a, env),
                                       np.dtype(a.dtype), env)
                for k, a in enumerate(task.signature) if a.role in ("in", "inout")}


class Runner:
    """Device arrays of one task config and a ctypes call of an implementation's entry."""

    def __init__(self, task, cfg_index: int):
        import cupy as cp
        import numpy as np

        from kernels_harness.tasks.schema import config_env
        self.cp, self.np, self.task = cp, np, task
        self.cfg = task.configs[cfg_index]
        env = config_env(self.cfg)
        host = host_inputs(task, self.cfg)
        self.stream = cp.cuda.Stream(non_blocking=True)
        self.arrays, self.init = {}, {}
        for a in task.signature:
            if not a.is_array:
                continue
            if a.role in ("in", "inout"):
                self.init[a.name] = cp.asarray(host[a.name])
                self.arrays[a.name] = self.init[a.name].copy()
            else:
                self.arrays[a.name] = cp.zeros(task.shape(a, env), dtype=a.dtype if a.dtype != "bfloat16" else "uint16")
        self.args = []
        for a in task.signature:
            if a.is_array:
                self.args.append(ctypes.c_void_p(self.arrays[a.name].data.ptr))
            else:
                v = task.scalar(a, env)
                ct = {"float32": ctypes.c_float, "float64": ctypes.c_double, "int64": ctypes.c_longlong,
                      "uint64": ctypes.c_ulonglong, "uint32": ctypes.c_uint}.get(a.dtype, ctypes.c_int)
                self.args.append(ct(v))
        self.args.append(ctypes.c_void_p(self.stream.ptr))

    def reset(self):
        for name, v in self.init.items():
            if self.task.signature and any(a.name == name and a.role == "inout" for a in self.task.signature):
                self.arrays[name][...] = v

    def call(self, fn) -> int:
        return int(fn(*self.args))

    def outputs(self) -> dict:
        return {a.name: self.cp.asnumpy(self.arrays[a.name]) for a in self.task.outputs}

    def time(self, fn, min_reps=3, max_reps=30, target_s=0.1) -> dict:
        cp = self.cp
        ev0, ev1 = cp.cuda.Event(), cp.cuda.Event()
        self.reset()
        fn(*self.args)
        self.stream.synchronize()
        samples = []
        t_start = time.perf_counter()
        while len(samples) < max_reps:
            self.reset()
            ev0.record(self.stream)
            rc = fn(*self.args)
            ev1.record(self.stream)
            ev1.synchronize()
            samples.append(cp.cuda.get_elapsed_time(ev0, ev1))
            if rc != 0:
                raise RuntimeError(f"entry returned {rc}")
            if len(samples) >= min_reps and time.perf_counter() - t_start > target_s:
                break
        samples.sort()
        return {"median_ms": samples[len(samples) // 2], "min_ms": samples[0], "reps": len(samples)}


def entry_fn(path, task):
    lib = ctypes.CDLL(str(path), mode=ctypes.RTLD_LOCAL)
    fn = getattr(lib, task.entry)
    fn.restype = ctypes.c_int
    return lib, fn


def family_child(spec_path: str) -> None:
    """Times every built implementation of one task on its largest config (run in its own process, so
    that a kernel that corrupts the CUDA context cannot take the other tasks with it)."""
    from kernels_harness.tasks.schema import load_task
    spec = json.loads(Path(spec_path).read_text())
    task = load_task(spec["task_file"])
    big = len(task.configs) - 1
    out, ref = {}, None
    runner = Runner(task, big)
    for name, so in spec["impls"]:  # the baseline comes first: it is the reference
        row: dict = {}
        try:
            _, fn = entry_fn(so, task)
            row.update(runner.time(fn))
            outs = runner.outputs()
            if ref is None:
                ref = outs
            else:
                row["matches_baseline"] = all(_close(outs[k], ref[k], task, task.configs[big]) for k in outs)
        except Exception as e:  # noqa: BLE001
            row["error"] = f"{type(e).__name__}: {e}"[:300]
        out[name] = row
        Path(spec["out"]).write_text(json.dumps(out))


def time_task(path, task, builds: dict, work: Path, timeout_s: float) -> dict:
    impls = sorted((i for i in task.implementations if i.expected == "correct"), key=lambda i: not i.baseline)
    pairs = [(i.name, str(builds[(task.id, i.name)].path)) for i in impls
             if (task.id, i.name) in builds and builds[(task.id, i.name)].ok]
    spec = {"task_file": str(path), "impls": pairs, "out": str(work / f"{task.id}__times.json")}
    spec_path = work / f"{task.id}__spec.json"
    spec_path.write_text(json.dumps(spec))
    try:
        p = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--family-child", str(spec_path)],
                           capture_output=True, text=True, timeout=timeout_s, cwd=str(REPO), check=False)
        err = "" if p.returncode == 0 else f"child exited {p.returncode}: {p.stderr[-600:]}"
    except subprocess.TimeoutExpired:
        err = f"timed out after {timeout_s:.0f} s"
    got = json.loads(Path(spec["out"]).read_text()) if Path(spec["out"]).exists() else {}
    if err:
        got["_error"] = err
    return got


def stage_families(tasks, builds: dict, peaks: dict, dry: bool, deadline: float, work: Path) -> dict:
    from kernels_harness import features
    from kernels_harness.result import ConfigResult, EvalResult
    rows, per_task = [], {}
    for path, task in tasks:
        big = len(task.configs) - 1
        timed = {}
        if not dry and time.time() < deadline:
            timed = time_task(path, task, builds, work, max(20.0, min(180.0, deadline - time.time())))
            if "_error" in timed:
                per_task[task.id] = {"error": timed.pop("_error")}
        for impl in task.implementations:
            if impl.expected != "correct":
                continue
            b = builds.get((task.id, impl.name))
            row = {"task": task.id, "impl": impl.name, "strategies": list(impl.strategies), "built": bool(b and b.ok),
                   **timed.get(impl.name, {})}
            if b is not None and not b.ok:
                row["error"] = "build failed: " + b.log[:300]
            times = [None] * len(task.configs)
            times[big] = row.get("median_ms")
            try:
                resources = b.resources if b is not None and b.ok else {}
                res = EvalResult(task_id=task.id, backend="cuda" if times[big] else "cpu", resources=resources,
                                 configs=[ConfigResult(i, c, time_ms=times[i]) for i, c in enumerate(task.configs)])
                f = features.analyse(task, impl.source, res, peaks=peaks)
                fs = features.analyse(task, impl.source, EvalResult(task_id=task.id, backend="cpu", resources=resources),
                                      peaks=peaks)
                row.update(score=f.score, score_static=fs.score, components=f.components, bound=f.bound,
                           feedback=f.feedback, notes=f.notes,
                           occupancy=[{k: o.get(k) for k in ("kernel", "threads", "occupancy", "limiting")} for o in f.occupancy])
            except Exception as e:  # noqa: BLE001
                row["features_error"] = f"{type(e).__name__}: {e}"[:300]
            rows.append(row)
    # Spearman within each task: structural score (static, and with roofline) vs speed (1 / time)
    by_task: dict = {}
    for r in rows:
        if r.get("median_ms") and r.get("score") is not None and r.get("matches_baseline", True):
            by_task.setdefault(r["task"], []).append(r)
    for tid, rs in by_task.items():
        speed = [1.0 / r["median_ms"] for r in rs]
        per_task.setdefault(tid, {}).update(
            n=len(rs), rho_static=spearman([r["score_static"] for r in rs], speed),
            rho_with_roofline=spearman([r["score"] for r in rs], speed),
            fastest=max(rs, key=lambda r: 1 / r["median_ms"])["impl"],
            best_static=max(rs, key=lambda r: r["score_static"])["impl"])
        for comp in ("coalescing", "occupancy", "sync", "memory"):  # which features carry the ranking
            vals = [(r.get("components") or {}).get(comp) for r in rs]
            if all(v is not None for v in vals):
                per_task[tid].setdefault("rho_by_component", {})[comp] = spearman(vals, speed)
    valid = [v["rho_static"] for v in per_task.values() if v.get("rho_static") is not None]
    origin = {t.id: ("dataset" if Path(p).parent.name == "dataset" else "corpus") for p, t in tasks}
    for tid, v in per_task.items():
        v["origin"] = origin.get(tid, "corpus")
    by_origin = {o: _mean([v.get("rho_static") for v in per_task.values() if v["origin"] == o]) for o in ("corpus", "dataset")}
    by_comp = {c: _mean([(v.get("rho_by_component") or {}).get(c) for v in per_task.values()])
               for c in ("coalescing", "occupancy", "sync", "memory")}
    return {"rows": rows, "per_task": per_task, "mean_rho_static_by_origin": by_origin, "mean_rho_by_component": by_comp,
            "mean_rho_static": sum(valid) / len(valid) if valid else None,
            "mean_rho_with_roofline": _mean([v.get("rho_with_roofline") for v in per_task.values()]),
            "tasks_with_rho": len(valid)}


def _mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def _close(a, b, task, config) -> bool:
    import numpy as np
    if a.shape != b.shape:
        return False
    if a.dtype.kind in "iub":
        return bool(np.array_equal(a, b))
    atol, rtol = task.tolerance_for(str(a.dtype), config)
    return bool(np.allclose(a.astype(np.float64), b.astype(np.float64), atol=max(atol, 1e-6) * 10, rtol=max(rtol, 1e-6) * 10))


# ---- Nsight Compute ---------------------------------------------------------------------------------
def ncu_child(spec_path: str) -> None:
    """Runs each implementation once on its middle config, a marker kernel between them (under ncu)."""
    import cupy as cp
    import numpy as np

    from kernels_harness.tasks.schema import load_task
    spec = json.loads(Path(spec_path).read_text())
    marker = cp.RawKernel('extern "C" __global__ void cudaperf_marker(int i) {}', "cudaperf_marker")
    runners = {}
    for k, item in enumerate(spec):
        try:
            task = load_task(item["task_file"])
            key = (task.id, item["config"])
            if key not in runners:
                runners.clear()
                runners[key] = Runner(task, item["config"])
            r = runners[key]
            marker((1,), (1,), (np.int32(k),), stream=r.stream)
            _, fn = entry_fn(item["so"], task)
            r.reset()
            r.call(fn)
            r.stream.synchronize()
        except Exception as e:  # noqa: BLE001
            print(f"ncu child: {item.get('impl')}: {e}", file=sys.stderr)
    cp.cuda.runtime.deviceSynchronize()


def parse_ncu_csv(text: str) -> list[dict]:
    """Rows of `ncu --csv --page raw` (header line, then a units line, then one line per kernel)."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith(('"ID"', '"Kernel Name"'))), None)
    if start is None:
        return []
    rows = list(csv.DictReader(io.StringIO("\n".join(lines[start:]))))
    return [r for r in rows if r.get("ID", "").strip().isdigit()]


def _num(s):
    try:
        return float(str(s).replace(",", ""))
    except (TypeError, ValueError):
        return None


def assign_ncu_rows(rows: list[dict], spec: list[dict]) -> dict:
    """(task, impl) -> {kernel: metrics}, using the marker kernel launched before each implementation."""
    out: dict = {}
    # rows are in launch order: walk them with the spec index advanced by each marker
    k = -1
    for r in rows:
        name = r.get("Kernel Name", "")
        if name.startswith("cudaperf_marker"):
            k += 1
            continue
        if k < 0 or k >= len(spec):
            continue
        base = name.split("(")[0].split("<")[0].split()[-1] if name else ""
        m = {key: _num(r.get(key)) for key in NCU_METRICS}
        ld = (m["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"], m["l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"])
        st = (m["l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"], m["l1tex__t_requests_pipe_lsu_mem_global_op_st.sum"])
        rec = {"sectors_per_request_ld": ld[0] / ld[1] if ld[0] is not None and ld[1] else None,
               "sectors_per_request_st": st[0] / st[1] if st[0] is not None and st[1] else None,
               "achieved_occupancy": m["sm__warps_active.avg.pct_of_peak_sustained_active"] / 100
               if m["sm__warps_active.avg.pct_of_peak_sustained_active"] is not None else None,
               "theoretical_occupancy": m["sm__maximum_warps_per_active_cycle_pct"] / 100
               if m["sm__maximum_warps_per_active_cycle_pct"] is not None else None,
               "registers": m["launch__registers_per_thread"], "block": m["launch__block_size"],
               "grid": m["launch__grid_size"], "time_ns": m["gpu__time_duration.sum"],
               "smem_static": m["launch__shared_mem_per_block_static"],
               "smem_dynamic": m["launch__shared_mem_per_block_dynamic"]}
        out.setdefault((spec[k]["task"], spec[k]["impl"]), {})[base] = rec
    return out


def stage_ncu(tasks, builds: dict, work: Path, timeout_s: float) -> dict:
    ncu = shutil.which("ncu") or next((p for p in ("/usr/local/cuda/bin/ncu",) if Path(p).exists()), None)
    if not ncu:
        return {"skipped": "ncu not found"}
    spec = []
    for path, task in tasks:
        mid = min(1, len(task.configs) - 1)
        for impl in task.implementations:
            b = builds.get((task.id, impl.name))
            if b is not None and b.ok:
                spec.append({"task": task.id, "impl": impl.name, "task_file": str(path), "so": str(b.path), "config": mid})
    spec_path = work / "ncu_spec.json"
    spec_path.write_text(json.dumps(spec))
    cmd = [ncu, "--clock-control", "none", "--csv", "--page", "raw", "--metrics", ",".join(NCU_METRICS),
           sys.executable, str(Path(__file__).resolve()), "--ncu-child", str(spec_path)]
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=str(REPO), check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"ncu timed out after {timeout_s:.0f} s"}
    rows = parse_ncu_csv(p.stdout)
    if not rows:
        return {"error": "ncu produced no rows", "rc": p.returncode, "stderr": p.stderr[-1500:], "stdout": p.stdout[-1500:]}
    return {"seconds": round(time.time() - t0, 1), "measured": assign_ncu_rows(rows, spec), "kernels_profiled": len(rows)}


def compare_coalescing(tasks, measured: dict, peaks: dict) -> dict:
    """Static estimate vs Nsight Compute, per (implementation, kernel): efficiency = ideal / sectors per request."""
    from kernels_harness import features
    pairs = []
    for _, task in tasks:
        for impl in task.implementations:
            m = measured.get((task.id, impl.name))
            if not m:
                continue
            f = features.analyse(task, impl.source, compile=False, peaks=peaks)
            fm = features.analyse(task, impl.source, compile=False, peaks=peaks, measured=m)
            for kname, est in f.coalescing.get("kernels", {}).items():
                meas = fm.coalescing["kernels"].get(kname, {}).get("measured")
                if est.get("estimated") is None or meas is None:
                    continue
                pairs.append({"task": task.id, "impl": impl.name, "kernel": kname, "static": est["estimated"],
                              "measured": meas, "ncu": m.get(kname)})
    occ = []  # Nsight Compute's theoretical occupancy of each profiled launch against ours
    for kernels in measured.values():
        for kname, m in kernels.items():
            if None in (m.get("registers"), m.get("block"), m.get("theoretical_occupancy")):
                continue
            mine = occ_lib.theoretical(int(m["registers"]), int(m.get("smem_static") or 0), int(m["block"]),
                                       dynamic_smem=int(m.get("smem_dynamic") or 0))
            occ.append({"kernel": kname, "ncu": m["theoretical_occupancy"], "mine": mine.occupancy,
                        "achieved": m.get("achieved_occupancy"), "agree": abs(mine.occupancy - m["theoretical_occupancy"]) < 1e-3})
    out = {"pairs": len(pairs), "occupancy_vs_ncu": {"launches": len(occ), "agree": sum(o["agree"] for o in occ),
                                                     "rows": occ}}
    if not pairs:
        return out
    agree = sum((p["static"] >= 0.5) == (p["measured"] >= 0.5) for p in pairs)
    return {**out, "class_agreement": agree / len(pairs),
            "mean_abs_error": sum(abs(p["static"] - p["measured"]) for p in pairs) / len(pairs),
            "spearman": spearman([p["static"] for p in pairs], [p["measured"] for p in pairs]), "rows": pairs}


# ---- peaks ---------------------------------------------------------------------------------------------
def stage_peaks() -> dict:
    from kernels_harness.features.peaks import measure_peaks
    return measure_peaks()


# ---- report ------------------------------------------------------------------------------------------
def plots(report: dict, out_dir: Path) -> list[str]:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception:  # noqa: BLE001
        return []
    made = []
    cases = (report.get("occupancy") or {}).get("cases") or []
    if cases:
        fig, ax = plt.subplots(figsize=(5, 5))
        ax.scatter([c["runtime"] for c in cases], [c["theoretical"] for c in cases], s=10, alpha=0.5)
        ax.plot([0, 32], [0, 32], "k--", lw=0.5)
        ax.set_xlabel("cudaOccupancyMaxActiveBlocksPerMultiprocessor")
        ax.set_ylabel("features.occupancy.theoretical")
        ax.set_title(f"blocks/SM, {sum(c['agree'] for c in cases)}/{len(cases)} agree")
        fig.tight_layout()
        fig.savefig(out_dir / "occupancy_agreement.png", dpi=120)
        made.append("occupancy_agreement.png")
    rows = [r for key in ("families", "dataset_families") for r in (report.get(key) or {}).get("rows", [])
            if r.get("median_ms") and r.get("score_static") is not None]
    if rows:
        fig, ax = plt.subplots(figsize=(7, 5))
        for tid in sorted({r["task"] for r in rows}):
            rs = sorted((r for r in rows if r["task"] == tid), key=lambda r: r["score_static"])
            base = max(r["median_ms"] for r in rs)
            ax.plot([r["score_static"] for r in rs], [base / r["median_ms"] for r in rs], "o-", label=tid)
        ax.set_yscale("log")
        ax.set_xlabel("structural score (static)")
        ax.set_ylabel("speed relative to the slowest implementation")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out_dir / "score_vs_speed.png", dpi=120)
        made.append("score_vs_speed.png")
    return made


def table(report: dict) -> str:
    lines = ["", "features_validation summary", "-" * 60, f"static analysis: {report.get('static_analysis')}"]
    p = report.get("peaks") or {}
    if "bandwidth_GBps" in p:
        lines.append(f"peaks: {p['bandwidth_GBps']:.0f} GB/s copy, fp32 {p.get('fp32_TFLOPs', float('nan')):.1f}, "
                     f"fp64 {p.get('fp64_TFLOPs', float('nan')):.1f}, bf16 {p.get('bf16_TFLOPs', float('nan')):.0f} TFLOP/s")
    else:
        lines.append(f"peaks: {p.get('error') or p.get('skipped')}")
    o = report.get("occupancy") or {}
    if "pairs" in o:
        lines.append(f"occupancy: {o['agree']}/{o['pairs']} launch shapes agree with the runtime "
                     f"(registers {o['distinct_register_counts'][0]}..{o['distinct_register_counts'][-1]}), "
                     f"ptxas==runtime registers: {o['ptxas_vs_runtime_registers_agree']}")
    else:
        lines.append(f"occupancy: {o.get('error') or o.get('skipped')}")
    fam = report.get("families") or {}
    per_task = {**((report.get("dataset_families") or {}).get("per_task") or {}), **(fam.get("per_task") or {})}
    for tid, v in sorted(per_task.items(), key=lambda kv: (kv[1].get("origin", ""), kv[0])):
        rho = v.get("rho_static")
        lines.append(f"  {tid[:34]:<34} n={v.get('n', 0)} rho={'n/a' if rho is None else f'{rho:+.2f}'} "
                     f"fastest={v.get('fastest')} best-scored={v.get('best_static')} {v.get('error', '')}")
    if fam:
        mr = fam.get("mean_rho_static")
        dmr = (report.get("dataset_families") or {}).get("mean_rho_static")
        am = report.get("mean_rho_static_all")
        lines.append(f"Spearman rho (static structural score vs speed, within a task): corpus "
                     f"{'n/a' if mr is None else f'{mr:.2f}'} ({fam.get('tasks_with_rho', 0)} tasks), dataset "
                     f"{'n/a' if dmr is None else f'{dmr:.2f}'}, all {'n/a' if am is None else f'{am:.2f}'} "
                     f"({report.get('tasks_with_rho_all', 0)} tasks)")
    n = report.get("ncu") or {}
    c = report.get("coalescing_agreement") or {}
    if c.get("pairs"):
        lines.append(f"ncu coalescing: {c['pairs']} kernels, class agreement {c['class_agreement']:.0%}, "
                     f"MAE {c['mean_abs_error']:.2f}, rho {c['spearman']}")
        ov = c.get("occupancy_vs_ncu") or {}
        lines.append(f"ncu theoretical occupancy: {ov.get('agree')}/{ov.get('launches')} launches agree with ours")
    else:
        lines.append(f"ncu: {n.get('error') or n.get('skipped') or 'no pairs'}")
    lines.append(f"total {report.get('seconds', 0):.0f} s; JSON: {report.get('json')}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", nargs="*", default=[str(d) for d in DEFAULT_TASKS], help="directories of task JSON files")
    ap.add_argument("--skip-ncu", action="store_true")
    ap.add_argument("--dataset-per-family", type=int, default=1,
                    help="also time this many generated tasks of every c2cuda dataset family (0: none)")
    ap.add_argument("--dry-run", action="store_true", help="no GPU: builds, ptxas and static features only")
    ap.add_argument("--budget-s", type=float, default=300.0, help="stop starting new stages after this many seconds")
    ap.add_argument("--jobs", type=int, default=min(8, os.cpu_count() or 2))
    ap.add_argument("--ncu-child", help=argparse.SUPPRESS)
    ap.add_argument("--family-child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.ncu_child:
        ncu_child(args.ncu_child)
        return 0
    if args.family_child:
        family_child(args.family_child)
        return 0
    t0 = time.time()
    deadline = t0 + args.budget_s
    out_dir = Path(os.environ.get("OUT", "out"))
    out_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="features_validation_"))
    report: dict = {"date": datetime.datetime.now(datetime.UTC).isoformat(), "dry_run": args.dry_run}
    from kernels_harness.features import parse as parse_lib
    report["static_analysis"] = "tree-sitter CUDA available" if parse_lib.parser() is not None else parse_lib.PARSE_UNAVAILABLE

    def stage(name, fn):
        if time.time() > deadline:
            report[name] = {"skipped": "out of time budget"}
            return
        s = time.time()
        print(f"[{time.time() - t0:6.1f}s] {name} ...", file=sys.stderr, flush=True)
        try:
            report[name] = fn()
        except Exception as e:  # noqa: BLE001 - one failing stage must not stop the others
            report[name] = {"error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()[-2000:]}
        report[name + "_seconds"] = round(time.time() - s, 1)

    from kernels_harness.features import roofline
    if args.dry_run:
        report["peaks"] = {"skipped": "dry run"}
    else:
        stage("peaks", stage_peaks)
    peaks = report.get("peaks") or {}
    if peaks.get("bandwidth_GBps") and peaks.get("fp32_TFLOPs"):
        (out_dir / "device_peaks.json").write_text(json.dumps(peaks, indent=2))
        try:
            roofline.save_peaks(peaks)
        except OSError:
            pass
        peaks = roofline.load_peaks() | peaks
    else:
        peaks = roofline.load_peaks()
    stage("occupancy", lambda: stage_occupancy(work, args.dry_run))
    # the hand-written corpus first (timing, then Nsight Compute), then the generated dataset tasks
    corpus = load_tasks(args.tasks)
    builds: dict = {}

    def do_builds(tasks):
        new = build_all(tasks, work, args.jobs)
        builds.update(new)
        return {"built": sum(b.ok for b in new.values()), "failed": [f"{k[0]}/{k[1]}" for k, b in new.items() if not b.ok]}
    stage("builds", lambda: do_builds(corpus))
    stage("families", lambda: stage_families(corpus, builds, peaks, args.dry_run, deadline, work))
    if args.dry_run or args.skip_ncu:
        report["ncu"] = {"skipped": "dry run" if args.dry_run else "--skip-ncu"}
    else:
        stage("ncu", lambda: stage_ncu(corpus, builds, work, max(30.0, min(150.0, deadline - time.time() - 60))))
        measured = (report.get("ncu") or {}).get("measured") or {}
        if measured:
            stage("coalescing_agreement", lambda: compare_coalescing(corpus, measured, peaks))
            report["ncu"]["measured"] = {f"{k[0]}/{k[1]}": v for k, v in measured.items()}
    dataset = []
    if args.dataset_per_family > 0 and dataset_tasks(args.dataset_per_family, work / "dataset"):
        dataset = load_tasks([work / "dataset"])
        stage("dataset_builds", lambda: do_builds(dataset))
        stage("dataset_families", lambda: stage_families(dataset, builds, peaks, args.dry_run, deadline, work))
    report["tasks"] = [t.id for _, t in corpus + dataset]
    rhos = [v.get("rho_static") for key in ("families", "dataset_families")
            for v in ((report.get(key) or {}).get("per_task") or {}).values()]
    report["mean_rho_static_all"] = _mean(rhos)
    report["tasks_with_rho_all"] = len([r for r in rhos if r is not None])
    report["seconds"] = round(time.time() - t0, 1)
    report["plots"] = plots(report, out_dir)
    path = out_dir / "features_validation.json"
    report["json"] = str(path)
    path.write_text(json.dumps(report, indent=1, default=str))
    shutil.rmtree(work, ignore_errors=True)
    print(table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
