"""Runs the emulation corpus on a real GPU and compares it with numpy and with the cpu backend.

    python -m kernels_harness.emulation.corpus_gpu --out $OUT [--corpus DIR] [--only a,b] [--no-cpu] [--jobs 16]

For every case of kernels_harness/emulation/corpus_data/corpus_specs.py: the unchanged .cu file is built with
nvcc (kernels_harness.build.nvcc.build_shared) and, when a host compiler is present, with the cpu
backend; the entry is called through ctypes on CuPy device arrays with a CuPy stream, and the outputs
are compared with the numpy reference and with the cpu backend's outputs on the same inputs. One
failing case never stops the others. Writes $OUT/emulation_corpus_gpu.json (and a PNG of the errors)
and prints a table, the summary last. Needs CuPy and nvcc; tree-sitter is not used.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import ctypes
import json
import os
import platform
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np

from kernels_harness.emulation import corpus as corpus_lib


def _build_all(cases, corpus_dir, work: Path, jobs: int, with_cpu: bool):
    from kernels_harness.build.nvcc import build_shared
    from kernels_harness.emulation.build import build_shared_library

    def nv(case):
        return build_shared(corpus_lib.source_of(case, corpus_dir), work / f"gpu_{case.name}.so")

    def cpu(case):
        return build_shared_library(corpus_lib.source_of(case, corpus_dir), work / f"cpu_{case.name}.so",
                                    checks=False)

    out_nv, out_cpu = {}, {}
    with cf.ThreadPoolExecutor(jobs) as ex:
        futs = {ex.submit(nv, c): ("gpu", c.name) for c in cases}
        if with_cpu:
            futs.update({ex.submit(cpu, c): ("cpu", c.name) for c in cases})
        done = {f: futs[f] for f in cf.as_completed(futs)}
        for fut, (kind, name) in done.items():
            try:
                res = fut.result()
            except Exception as e:  # noqa: BLE001 - a broken build is a row, not a crash
                res = None
                err = f"{type(e).__name__}: {e}"
            else:
                err = "" if res.ok else res.log.splitlines()[0] if res.log else "build failed"
            (out_nv if kind == "gpu" else out_cpu)[name] = (res.path if res is not None and res.ok else None, err)
    return out_nv, out_cpu


def _run_gpu(cp, path: Path, case, inputs: dict, reps: int = 3):
    """(rc, outputs, ms per call) of the nvcc-built library on CuPy arrays."""
    lib = ctypes.CDLL(str(path))
    fn = getattr(lib, case.entry)
    fn.restype = ctypes.c_int
    fn.argtypes = corpus_lib.argtypes(case)
    stream = cp.cuda.Stream(non_blocking=False)  # blocking: legacy-stream calls inside an entry stay ordered
    bufs, call = {}, []
    for a in case.args:
        if a.role == "scalar":
            call.append(a.value)
            continue
        if a.role == "out":
            host = corpus_lib.poisoned(a)
        else:
            host = corpus_lib.device_layout(inputs[a.name], a.dtype)
        bufs[a.name] = cp.asarray(host)
        call.append(bufs[a.name].data.ptr)
    fresh = {k: v.copy() for k, v in bufs.items()}
    cp.cuda.Device().synchronize()  # the uploads ran on the legacy stream
    rc = fn(*call, ctypes.c_void_p(stream.ptr))
    stream.synchronize()
    outs = {a.name: corpus_lib.from_device_layout(cp.asnumpy(bufs[a.name]), a.dtype) for a in case.outputs}
    ms = None
    if rc == 0 and reps > 0:  # re-run on fresh copies of the inputs (inout arrays are updated in place)
        times = []
        for _ in range(reps):
            for k, buf in bufs.items():
                buf[...] = fresh[k]
            cp.cuda.Device().synchronize()
            start, stop = cp.cuda.Event(), cp.cuda.Event()
            start.record(stream)
            fn(*call, ctypes.c_void_p(stream.ptr))
            stop.record(stream)
            stop.synchronize()
            times.append(cp.cuda.get_elapsed_time(start, stop))
        ms = float(np.median(times))
    return rc, outs, ms


def _run_cpu(path: Path, case, inputs: dict):
    from kernels_harness.emulation.library import EmulatedLibrary
    lib = EmulatedLibrary(path)
    lib.reset()
    rc, outs = corpus_lib.run_on_cpu(lib, case, inputs)
    return rc, outs, lib.last_error()


def _worst(report: dict) -> tuple[bool, float]:
    return all(r["ok"] for r in report.values()), max((r["max_abs_err"] for r in report.values()), default=0.0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    ap.add_argument("--corpus", default=None, help="directory holding corpus_specs.py and corpus/")
    ap.add_argument("--only", default="", help="comma-separated case names")
    ap.add_argument("--no-cpu", action="store_true", help="skip the cpu-backend comparison")
    ap.add_argument("--jobs", type=int, default=min(16, os.cpu_count() or 4))
    args = ap.parse_args(argv)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        import cupy as cp
        device = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    except Exception as e:  # noqa: BLE001
        print(f"corpus_gpu needs CuPy and an NVIDIA GPU ({type(e).__name__}: {e}); run it on the GPU machine")
        return 2
    cases = corpus_lib.load_cases(args.corpus)
    if args.only:
        wanted = set(args.only.split(","))
        cases = [c for c in cases if c.name in wanted]
    with_cpu = not args.no_cpu and shutil.which(os.environ.get("CUDAPERF_CXX", "g++")) is not None
    t0 = time.time()
    work = Path(tempfile.mkdtemp(prefix="cudaperf_corpus_gpu_"))
    print(f"building {len(cases)} cases with nvcc{' and the cpu backend' if with_cpu else ''} ({args.jobs} jobs)",
          flush=True)
    nv_builds, cpu_builds = _build_all(cases, args.corpus, work, args.jobs, with_cpu)
    build_s = time.time() - t0
    rows = []
    for case in cases:
        row = {"case": case.name, "tags": list(case.tags), "gpu_build": nv_builds[case.name][1] or "ok"}
        try:
            inputs = corpus_lib.make_inputs(case)
            expected = corpus_lib.expected_outputs(case, inputs)
            gpu_outs = None
            if nv_builds[case.name][0] is not None:
                rc, gpu_outs, ms = _run_gpu(cp, nv_builds[case.name][0], case, inputs)
                ok, err = _worst(corpus_lib.compare(case, gpu_outs, expected))
                row.update(gpu_rc=rc, gpu_vs_numpy=bool(ok and rc == 0), gpu_vs_numpy_max_abs=err, gpu_ms=ms)
            if with_cpu:
                row["cpu_build"] = cpu_builds[case.name][1] or "ok"
                if cpu_builds[case.name][0] is not None:
                    rc, cpu_outs, msg = _run_cpu(cpu_builds[case.name][0], case, inputs)
                    ok, err = _worst(corpus_lib.compare(case, cpu_outs, expected))
                    row.update(cpu_rc=rc, cpu_error=msg, cpu_vs_numpy=bool(ok and rc == 0), cpu_vs_numpy_max_abs=err)
                    if gpu_outs is not None:
                        ok, err = _worst(corpus_lib.compare(case, gpu_outs, cpu_outs))
                        row.update(gpu_vs_cpu=bool(ok), gpu_vs_cpu_max_abs=err)
        except Exception as e:  # noqa: BLE001 - one failure must not stop the rest
            row["error"] = f"{type(e).__name__}: {e}"
            row["traceback"] = traceback.format_exc()[-2000:]
        row["pass"] = bool(row.get("gpu_vs_numpy")) and (not with_cpu or bool(row.get("gpu_vs_cpu")))
        rows.append(row)
    summary = {"device": device, "python": platform.python_version(), "cases": len(rows),
               "passed": sum(r["pass"] for r in rows), "gpu_vs_numpy_ok": sum(bool(r.get("gpu_vs_numpy")) for r in rows),
               "cpu_vs_numpy_ok": sum(bool(r.get("cpu_vs_numpy")) for r in rows) if with_cpu else None,
               "gpu_vs_cpu_ok": sum(bool(r.get("gpu_vs_cpu")) for r in rows) if with_cpu else None,
               "build_seconds": round(build_s, 1), "total_seconds": round(time.time() - t0, 1)}
    (out_dir / "emulation_corpus_gpu.json").write_text(json.dumps({"summary": summary, "rows": rows}, indent=1))
    _plot(rows, out_dir / "emulation_corpus_gpu.png")
    print(f"{'case':28s} {'gpu=np':>6s} {'gpu=cpu':>7s} {'max|gpu-cpu|':>12s} {'gpu ms':>7s}  note")
    for r in rows:
        note = r.get("error") or (r["gpu_build"] if r["gpu_build"] != "ok" else "") or r.get("cpu_error", "") \
            or (r.get("cpu_build", "ok") if r.get("cpu_build", "ok") != "ok" else "")
        ms = r.get("gpu_ms")
        print(f"{r['case']:28s} {_yn(r.get('gpu_vs_numpy')):>6s} {_yn(r.get('gpu_vs_cpu')):>7s} "
              f"{r.get('gpu_vs_cpu_max_abs', float('nan')):12.2e} {ms if ms is not None else float('nan'):7.3f}  "
              f"{note[:60]}")
    print(json.dumps(summary))
    print(f"PASSED {summary['passed']}/{summary['cases']} on {device}")
    return 0 if summary["passed"] == summary["cases"] else 1


def _yn(v) -> str:
    return "-" if v is None else ("yes" if v else "NO")


def _plot(rows, path: Path) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception:  # noqa: BLE001 - the plot is optional
        return
    names = [r["case"] for r in rows]
    fig, ax = plt.subplots(figsize=(12, 4))
    x = np.arange(len(rows))
    for off, key, label in ((-0.2, "gpu_vs_numpy_max_abs", "|gpu - numpy|"), (0.2, "gpu_vs_cpu_max_abs", "|gpu - cpu|")):
        vals = [max(r.get(key, np.nan), 1e-17) for r in rows]
        ax.bar(x + off, vals, width=0.4, label=label)
    ax.set_yscale("log")
    ax.set_xticks(x, names, rotation=90, fontsize=6)
    ax.set_ylabel("max abs difference")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
