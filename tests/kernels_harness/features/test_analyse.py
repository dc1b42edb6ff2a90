"""features.analyse on the validation families and on EvalResults: separation, score, feedback, JSON."""
import json
import math
import shutil
from pathlib import Path

import pytest

from kernels_harness import features
from kernels_harness.features import parse
from kernels_harness.result import ConfigResult, EvalResult
from kernels_harness.tasks.schema import Task, load_task

DATA = Path(__file__).with_name("data")
PEAKS = {"bandwidth_GBps": 4000.0, "fp32_TFLOPs": 50.0, "bf16_TFLOPs": 700.0, "source": "test"}
needs_parse = pytest.mark.skipif(parse.parser() is None, reason="tree-sitter CUDA is not installed")


def family(tid: str) -> tuple[Task, dict]:
    task = load_task(DATA / f"{tid}.json")
    return task, {i.name: features.analyse(task, i.source, compile=False, peaks=PEAKS) for i in task.implementations}


def test_data_matches_generator(tmp_path):
    from tests.kernels_harness.features import families
    for p in families.write_all(tmp_path):
        assert json.loads(p.read_text()) == json.loads((DATA / p.name).read_text()), f"regenerate {p.name}"


@needs_parse
def test_coalescing_separates_strided_from_coalesced():
    for tid, bad, good in [("feat_transpose", "read_strided", "smem_tiled_padded"),
                           ("feat_transpose", "write_strided", "smem_tiled"),
                           ("feat_matmul", "naive_row_major_threads", "naive"),
                           ("feat_rowscale", "column_major_threads", "coalesced"),
                           ("feat_rowscale", "thread_per_row", "vec4"),
                           ("feat_matvec", "thread_per_row", "warp_per_row")]:
        _, f = family(tid)
        assert f[bad].components["coalescing"] < 0.6 < f[good].components["coalescing"] == 1.0, (tid, bad, good)
        assert f[bad].score < f[good].score
        assert any("sectors" in s for s in f[bad].feedback)


@needs_parse
def test_smem_tiling_reuse_padding_and_vectors():
    task, f = family("feat_matmul")
    assert task.extra == {} and f["naive"].bound == "compute"
    assert not f["naive"].memory["smem_tiled_reuse"]
    assert f["smem_tiled"].memory["smem_tiled_reuse"] and f["smem_tiled_regblock"].memory["smem_tiled_reuse"]
    assert f["smem_tiled"].memory["smem_reuse"]["mm_k"]["reads_per_write"] >= 8
    assert any("compute-bound" in s for s in f["naive"].feedback)
    order = [f[n].score for n in ("naive_row_major_threads", "naive", "smem_tiled", "smem_tiled_regblock")]
    assert order == sorted(order)
    _, t = family("feat_transpose")
    assert t["smem_tiled"].memory["worst_bank_conflict"]["degree"] == 32
    assert t["smem_tiled_padded"].memory["padded"] and t["smem_tiled_padded"].memory["bank_conflict_free"] == 1.0
    assert t["smem_tiled"].components["memory"] < t["smem_tiled_padded"].components["memory"]
    assert not t["smem_tiled"].memory["smem_tiled_reuse"]  # staging for a transpose is not reuse
    _, r = family("feat_rowscale")
    assert r["vec4"].memory["vector_fraction"] > 0.6 and r["coalesced"].memory["vector_fraction"] == 0


@needs_parse
def test_reduction_strategies_are_ordered_by_synchronisation():
    _, f = family("feat_sum")
    assert f["atomic_each"].sync["global_atomics_in_loops"] and f["atomic_each"].components["sync"] <= 0.2
    assert f["smem_tree"].sync["smem_tree_reduction"] == ["sum_k"]
    assert f["warp_shuffle"].sync["warp_primitives"] == ["__shfl_down_sync"]
    assert f["atomic_each"].score < f["smem_tree"].score < f["warp_shuffle"].score <= f["vec4_shuffle"].score
    assert any("atomic" in s for s in f["atomic_each"].feedback)
    assert any("__shfl_down_sync" in s for s in f["smem_tree"].feedback)


@needs_parse
def test_result_launches_resources_and_times_drive_occupancy_and_roofline():
    task, _ = family("feat_rowscale")
    src = next(i.source for i in task.implementations if i.name == "coalesced")
    n = [c["R"] * c["C"] for c in task.configs]
    res = EvalResult(task_id=task.id, backend="cuda", compiled=True, correct=True,
                     launches=[{"kernel": "rs_k", "grid": [(k + 255) // 256, 1, 1], "block": [256, 1, 1], "smem": 0}
                               for k in n],
                     resources={"rs_k": {"registers": 64, "smem": 0, "spill_stores": 0, "spill_loads": 0}},
                     configs=[ConfigResult(i, c, correct=True, time_ms=t)
                              for i, (c, t) in enumerate(zip(task.configs, [0.005, 0.02, 0.5]))])
    f = features.analyse(task, src, res, peaks=PEAKS)
    occ = f.occupancy[0]
    assert (occ["blocks_per_sm"], occ["occupancy"], occ["limiting"]) == (4, 0.5, ["registers"])
    assert occ["grid_blocks"] == n[-1] // 256 and occ["sm_fill"] == 1.0 and occ["source"] == "recorded"
    big = f.roofline["configs"][2]
    nbytes = 8 * 8192 * 4096 + 4 * 8192
    assert big["bytes"] == nbytes and big["bound"] == "memory"
    assert big["bound_ms"] == pytest.approx(nbytes / 4000e9 * 1e3)
    assert f.roofline["fraction"] == pytest.approx(nbytes / 4000e9 * 1e3 / 0.5)
    assert f.components["roofline"] == f.roofline["fraction"]
    assert set(f.weights) == {"coalescing", "occupancy", "sync", "memory", "roofline"}
    assert sum(f.weights.values()) == pytest.approx(1.0)
    expected = sum(f.weights[k] * f.components[k] for k in f.weights)
    assert f.score == pytest.approx(expected)
    # on the cpu backend there is no time: the roofline drops out and the rest re-weights to 1
    cpu = features.analyse(task, src, EvalResult(task_id=task.id, backend="cpu", resources=res.resources), peaks=PEAKS)
    assert cpu.components["roofline"] is None and "roofline" not in cpu.weights
    assert sum(cpu.weights.values()) == pytest.approx(1.0)
    # a one-block grid fills 1 of 132 SMs
    few = features.analyse(task, src, EvalResult(task_id=task.id, backend="cuda", resources=res.resources,
                                                 launches=[{"kernel": "rs_k", "grid": [1, 1, 1], "block": [256, 1, 1], "smem": 0}]),
                           peaks=PEAKS)
    assert few.components["occupancy"] < 0.01 and any("only 1 blocks" in s for s in few.feedback)


@needs_parse
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc for ptxas resources")
def test_ptxas_resources_and_static_launches_without_a_result():
    task = load_task(DATA / "feat_matmul.json")
    impl = next(i for i in task.implementations if i.name == "smem_tiled_regblock")
    f = features.analyse(task, impl.source, peaks=PEAKS)
    r = f.resources["mm_k"]
    assert 16 <= r["registers"] <= 255 and r["smem_static"] == 2 * 32 * 33 * 4
    occ = f.occupancy[0]
    assert occ["threads"] == 256 and occ["source"] == "static" and 0 < occ["occupancy"] <= 1
    assert occ["smem_per_block"] == 2 * 32 * 33 * 4 + 1024  # + the 1 KiB reserved, already 128-aligned
    assert not f.notes
    json.dumps(f.to_dict())


@needs_parse
def test_hazard_feedback_and_json():
    task = load_task(DATA / "feat_sum.json")
    src = """
__global__ void sum_k(int n, const float* x, float* out) {
  __shared__ float buf[256];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  buf[threadIdx.x] = x[i];
  __syncthreads();
  if (threadIdx.x == 0) { float s = 0; for (int k = 0; k < 256; k++) s += buf[k]; atomicAdd(out, s); }
}
extern "C" int sum(int n, const float* x, float* out, cudaStream_t stream) {
  sum_k<<<(n + 255) / 256, 256, 0, stream>>>(n, x, out);
  return 0;
}"""
    f = features.analyse(task, src, compile=False, peaks=PEAKS)
    assert f.components["sync"] == 0.0 and f.sync["divergent_barriers"][0][1] == 7
    assert any(s.startswith("__syncthreads() at line 7") for s in f.feedback)
    d = json.loads(json.dumps(f.to_dict()))
    assert d["score"] == f.score and 0 <= d["score"] <= 1 and d["kernels"] == ["sum_k"]


def test_without_tree_sitter_the_score_still_comes_with_a_note(monkeypatch):
    monkeypatch.setattr(parse, "_PARSER", None)
    monkeypatch.setattr(parse, "PARSE_UNAVAILABLE", "static analysis skipped: tree-sitter CUDA is unavailable (test)")
    task = load_task(DATA / "feat_sum.json")
    res = EvalResult(task_id=task.id, backend="cuda", configs=[ConfigResult(2, task.configs[2], time_ms=0.1)],
                     resources={"sum_k": {"registers": 32, "smem": 0}},
                     launches=[{"kernel": "sum_k", "grid": [1056, 1, 1], "block": [256, 1, 1], "smem": 0}])
    f = features.analyse(task, task.implementations[0].source, res, peaks=PEAKS)
    assert any("tree-sitter" in n for n in f.notes)
    assert f.components["coalescing"] is None and f.components["sync"] is None
    assert f.components["occupancy"] == 1.0 and not math.isnan(f.score) and 0 < f.score <= 1
    assert set(f.weights) == {"occupancy", "roofline"}


@needs_parse
def test_cpu_backend_launches_take_the_grid_of_the_largest_config():
    task = load_task(DATA / "feat_rowscale.json")
    src = next(i.source for i in task.implementations if i.name == "thread_per_row")
    rec = [{"kernel": "rs_k", "grid": [1, 1, 1], "block": [256, 1, 1], "smem": 0}]  # the small config, emulated
    res = EvalResult(task_id=task.id, backend="cpu", launches=rec, resources={"rs_k": {"registers": 16, "smem": 0}})
    occ = features.analyse(task, src, res, peaks=PEAKS).occupancy[0]
    # one thread per row: 8192 rows / 256 = 32 blocks on 132 SMs, from the host code at R=8192
    assert occ["source"] == "recorded" and occ["grid_blocks"] == 32 and occ["sm_fill"] == pytest.approx(32 / (132 * 8))
    good = next(i.source for i in task.implementations if i.name == "coalesced")
    occ = features.analyse(task, good, res, peaks=PEAKS).occupancy[0]
    assert occ["grid_blocks"] == 8192 * 4096 // 256 and occ["sm_fill"] == 1.0
