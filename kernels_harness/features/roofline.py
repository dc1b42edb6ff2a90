"""Arithmetic intensity and the roofline: how close a measured time is to the device's bound.

Peaks are measured once on the device (benchmarks/features_validation.py or benchmarks/device_probe.py
write them) and cached as JSON; `load_peaks()` reads, in order, $CUDAPERF_PEAKS, <cache dir>/device_peaks.json,
the H200 peaks shipped with the package (features/device_peaks.json), and otherwise returns the H200 datasheet
figures (marked `"source": "datasheet"`): HBM3e 4.8 TB/s, FP32 67 TFLOP/s (non-tensor), BF16 989
TFLOP/s dense (NVIDIA H200 product brief).
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
from pathlib import Path

H200_DATASHEET = {"bandwidth_GBps": 4800.0, "fp32_TFLOPs": 67.0, "bf16_TFLOPs": 989.0, "fp64_TFLOPs": 34.0,
                  "source": "datasheet", "device": "NVIDIA H200 (nominal)"}
PACKAGED = Path(__file__).resolve().with_name("device_peaks.json")   # measured on an H200 (package data)


def cache_paths() -> list[Path]:
    env = os.environ.get("CUDAPERF_PEAKS")
    paths = [Path(env)] if env else []
    from kernels_harness.build.cache import cache_root
    return paths + [cache_root() / "device_peaks.json", PACKAGED]


def load_peaks() -> dict:
    """{bandwidth_GBps, fp32_TFLOPs, bf16_TFLOPs, fp64_TFLOPs, source, device}: measured if cached."""
    for p in cache_paths():
        try:
            d = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(d, dict) and d.get("bandwidth_GBps") and d.get("fp32_TFLOPs"):
            return {**H200_DATASHEET, **d, "source": d.get("source", str(p))}
    return dict(H200_DATASHEET)


def save_peaks(peaks: dict, path: str | Path | None = None) -> Path:
    """Caches measured peaks (the keys of load_peaks) as JSON; returns the path written."""
    if not path:
        from kernels_harness.build.cache import cache_root
    p = Path(path) if path else cache_root() / "device_peaks.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(peaks, indent=2))
    return p


def compute_peak(peaks: dict, dtype: str) -> float:
    """FLOP/s ceiling for a task whose arithmetic is in `dtype` (CUDA cores; tensor cores for 16-bit)."""
    key = {"float64": "fp64_TFLOPs", "bfloat16": "bf16_TFLOPs", "float16": "bf16_TFLOPs"}.get(dtype, "fp32_TFLOPs")
    return float(peaks.get(key) or peaks["fp32_TFLOPs"]) * 1e12


@dataclasses.dataclass
class ConfigRoofline:
    index: int
    flops: float
    bytes: float
    intensity: float | None          # FLOP per byte (None when the task declares no FLOPs)
    bound: str                       # memory | compute
    time_ms: float | None = None
    bound_ms: float | None = None    # the roofline's lower bound on time
    fraction: float | None = None    # bound_ms / time_ms, in [0, 1]
    achieved_GBps: float | None = None
    achieved_TFLOPs: float | None = None


def task_dtype(task) -> str:
    floats = [a.dtype for a in task.arrays if a.dtype.startswith(("float", "bfloat"))]
    return floats[0] if floats else "float32"


def analyse(task, times_ms: list | None = None, peaks: dict | None = None) -> dict:
    """Roofline of each config of `task`: intensity, bound, and the fraction reached when timed.

    times_ms: one measured median time per config (None entries where untimed). Returns
    {"configs": [ConfigRoofline as dict], "bound": memory|compute (of the largest config),
    "intensity": of the largest config, "ridge": FLOP/byte where the roofs meet, "fraction": geometric
    of the largest timed config (small configs measure launch overhead) or None, "fraction_geomean"
    over timed configs, "peaks_source"}.
    """
    peaks = peaks or load_peaks()
    bw = float(peaks["bandwidth_GBps"]) * 1e9
    fl = compute_peak(peaks, task_dtype(task))
    ridge = fl / bw
    rows = []
    from kernels_harness.tasks.schema import config_env
    for i, cfg in enumerate(task.configs):
        env = config_env(cfg)
        flops, nbytes = task.flops_at(env), task.min_bytes_at(env)
        ai = flops / nbytes if nbytes and flops else (0.0 if nbytes else None)
        r = ConfigRoofline(i, flops, nbytes, ai, "compute" if ai and ai > ridge else "memory")
        t = times_ms[i] if times_ms and i < len(times_ms) else None
        if t and t > 0:
            r.time_ms = float(t)
            r.bound_ms = max(flops / fl, nbytes / bw) * 1e3
            r.fraction = min(1.0, r.bound_ms / r.time_ms)
            r.achieved_GBps = nbytes / (t * 1e-3) / 1e9
            r.achieved_TFLOPs = flops / (t * 1e-3) / 1e12
        rows.append(r)
    timed = [r.fraction for r in rows if r.fraction]
    largest = max(rows, key=lambda r: r.bytes + r.flops) if rows else None
    largest_timed = max((r for r in rows if r.fraction), key=lambda r: r.bytes + r.flops, default=None)
    return {"configs": [dataclasses.asdict(r) for r in rows],
            "bound": largest.bound if largest else "memory",
            "intensity": largest.intensity if largest else None, "ridge": ridge,
            "fraction": largest_timed.fraction if largest_timed else None,
            "fraction_geomean": math.exp(sum(math.log(max(f, 1e-9)) for f in timed) / len(timed)) if timed else None,
            "peaks_source": peaks.get("source", "")}


# A time below HACK_MARGIN x the roofline floor is flagged as a hack. 0.5, not 0.8: of 42,297 H200 times of
# the dataset's honest implementations (data/times/h200) 0.27% lie below the floor and the lowest reaches 0.75 of
# it (image resize_nearest_down2: its min_bytes counts input the kernel need not read in full).
HACK_MARGIN = 0.5


def time_floor_ms(task, env: dict, peaks: dict | None = None, l2_bytes: int = 0, flushed: bool = True) -> float:
    """The least time (ms) any kernel needs for `task` at config `env` on the device of `peaks`: the larger of
    the memory floor (bytes that must move to or from HBM over the higher of the measured copy bandwidth
    and the H200 datasheet's) and the compute floor (task FLOPs over the highest compute peak known, the
    16-bit tensor-core peak doubled for FP8, so a kernel that downgrades precision is not flagged by it).

    Cache effects: with `flushed` (the timer evicts L2 before every repetition, as kernels_harness.run.
    timing does), inputs come from HBM but up to `l2_bytes` of outputs may stay in L2, so the memory floor
    counts min_bytes - min(output bytes, l2_bytes); without a flush the whole L2 may hold the data:
    min_bytes - l2_bytes. 0.0 when the task declares neither min_bytes nor flops.
    """
    peaks = {**H200_DATASHEET, **(peaks or load_peaks())}
    bw = max(float(peaks.get("bandwidth_GBps") or 0), H200_DATASHEET["bandwidth_GBps"]) * 1e9
    tf = [float(v) for k, v in peaks.items() if k.endswith("_TFLOPs") and isinstance(v, (int, float))]
    fl = 2.0 * max(tf + [H200_DATASHEET["bf16_TFLOPs"]]) * 1e12
    nbytes, flops = float(task.min_bytes_at(env) or 0), float(task.flops_at(env) or 0)
    if flushed:
        out_bytes = 0
        for a in task.arrays:
            if a.role in ("out", "inout"):
                shape = task.shape(a, env)
                out_bytes += math.prod(shape) * _itemsize(a.dtype) if shape else _itemsize(a.dtype)
        hbm = nbytes - min(out_bytes, l2_bytes)
    else:
        hbm = nbytes - l2_bytes
    return max(max(hbm, 0.0) / bw, flops / fl) * 1e3


def _itemsize(dtype: str) -> int:
    return {"float64": 8, "int64": 8, "uint64": 8, "float32": 4, "int32": 4, "uint32": 4, "float16": 2,
            "bfloat16": 2, "int16": 2}.get(dtype, 1)


def below_floor(task, env: dict, time_ms: float | None, peaks: dict | None = None, l2_bytes: int = 0,
                flushed: bool = True, margin: float = HACK_MARGIN) -> str:
    """A sentence when `time_ms` is below `margin` x time_floor_ms (the kernel cannot have done the work),
    else ""."""
    if not time_ms or time_ms <= 0:
        return ""
    floor = time_floor_ms(task, env, peaks, l2_bytes, flushed)
    if floor > 0 and time_ms < margin * floor:
        return (f"measured {time_ms * 1e3:.3g} us, below the roofline floor of {floor * 1e3:.3g} us for this "
                f"config ({task.min_bytes_at(env) or 0:.3g} bytes, {task.flops_at(env) or 0:.3g} FLOPs on the "
                "device's peaks): the kernel cannot have done the work")
    return ""
