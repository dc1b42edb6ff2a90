"""Batch builds: a broken member is isolated with its own log, symbols cannot clash, the cache builds a
repeated source once and a changed flag again (real g++ / emulation builds and real harness runs)."""
import hashlib
import json
from pathlib import Path

import pytest

from kernels_harness.build import batch
from kernels_harness.build.cache import BuildCache, build_key
from kernels_harness.run import HarnessPool
from kernels_harness.run.pool_config import PoolConfig
from kernels_harness.tasks.schema import Task

HERE = Path(__file__).resolve().parents[1] / "adversarial"
TASK = Task.from_dict(json.loads((HERE / "saxpy_task.json").read_text()))

# same kernel name, same static helper and the same static counter in every member: only the
# namespace keeps them apart; `scale` differs, so each member has its own correct output
MEMBER = r'''
#include <cuda_runtime.h>
static __device__ float helper(float v) { return v * SCALE_OF_THIS; }
static int calls = 0;
__global__ void saxpy_k(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + helper(y[i]);
}
extern "C" int saxpy(int n, float a, const float* x, float* y, cudaStream_t stream) {
  calls++;
  saxpy_k<<<(n + 255) / 256, 256, 0, stream>>>(n, a, x, y);
  return (int)cudaGetLastError();
}
'''


def member(scale: str) -> str:
    return MEMBER.replace("SCALE_OF_THIS", scale)


BROKEN = member("1.0f").replace("int i = blockIdx.x", "int i = blockIdx.x + undeclared_thing")


def _m(src: str, i: int) -> batch.Member:
    return batch.Member(src, "saxpy", *batch.names_for(hashlib.sha256(f"{i}{src}".encode()).hexdigest()))


def test_combined_unit_isolates_members_and_attributes_errors():
    ms = [_m(member("1.0f"), 0), _m(BROKEN, 1), _m(member("2.0f"), 2)]
    text = batch.combine(ms)
    assert text.count("#include <cuda_runtime.h>") == 1
    for m in ms:
        assert f'extern "C" int {m.symbol}(' in text and f"namespace {m.namespace} {{" in text
    log = ('m1/solution.cu(5): error: identifier "undeclared_thing" is undefined\n'
           '1 error detected in the compilation of "batch.cu".')
    assert batch.failed_members(log, 3) == {1}
    assert batch.failed_members("m2/solution.cu:5:7: error: 'x' was not declared", 3) == {2}
    assert batch.failed_members("/usr/bin/ld: multiple definition of `foo'; collect2: error", 3) is None
    assert batch.unbatchable(member("1.0f"), "saxpy") == ""
    assert "extern" in batch.unbatchable(member("1.0f").replace('extern "C" ', ""), "saxpy")
    assert "before an #include" in batch.unbatchable("#ifdef X\n#include <a.h>\n#endif\n" + MEMBER, "saxpy")


def _pool(tmp_path, **kw):
    cfg = PoolConfig(batch_size=8, cache_dir=str(tmp_path / "cache"), **kw)
    return HarnessPool("cpu", workers=1, compile_workers=1, cpu_budget_bytes=1 << 20, features=False,
                       ptxas_resources=False, config=cfg)


def test_batch_with_a_broken_member_and_clashing_names(tmp_path):
    """One library for the good members (same kernel, helper and static names), each its own result;
    the broken one gets its own compile log (its own line numbers, no other member's messages)."""
    sources = [member("0.0f"), BROKEN, member("1.0f"), member("2.0f")]
    with _pool(tmp_path) as pool:
        res = pool.evaluate([(TASK, s) for s in sources])
        stats = dict(pool.builds.stats)
        alone = HarnessPool("cpu", workers=1, compile_workers=1, cpu_budget_bytes=1 << 20, features=False,
                            ptxas_resources=False, config=PoolConfig.legacy())
        with alone:
            ref = alone.evaluate([(TASK, BROKEN)])[0]
    # the task computes y = a*x + y: only scale 1.0 is correct, 0 and 2 are wrong (their own outputs)
    assert [r.status for r in res] == ["wrong", "compile_error", "ok", "wrong"]
    assert stats["batched_members"] == 4 and stats["batch_rejects"] == 1
    assert res[1].compile_log == ref.compile_log
    assert "solution.cu:6:" in res[1].compile_log and "undeclared_thing" in res[1].compile_log
    assert "m0/" not in res[1].compile_log and "m1/" not in res[1].compile_log
    assert res[2].seconds["compile_batch"] == 4.0  # three candidates and the oracle implementation


def test_cache_builds_a_repeated_source_once_and_a_changed_flag_again(tmp_path):
    src = member("1.0f")
    with _pool(tmp_path) as pool:
        first = pool.evaluate([(TASK, src), (TASK, src)])
        s1 = dict(pool.builds.stats)
    with _pool(tmp_path) as pool:  # a new pool (another process would do the same): from the disk cache
        again = pool.evaluate([(TASK, src)])[0]
        s2 = dict(pool.builds.stats)
    assert [r.status for r in first] == ["ok", "ok"] and again.status == "ok"
    # the solution once (batched with the task's oracle implementation), the task's C reference alone
    assert s1["batches"] == 1 and s1["batched_members"] == 2 and s1["alone_builds"] == 1
    assert s2["disk_hits"] == 3 and s2["alone_builds"] == 0 and s2["batches"] == 0
    assert build_key("solution", "cpu", src, "saxpy", compiler="g++", arch="sm_90") != \
        build_key("solution", "cpu", src, "saxpy", compiler="g++", arch="sm_80")
    assert build_key("solution", "cpu", src, "saxpy", compiler="g++", checks=True) != \
        build_key("solution", "cpu", src, "saxpy", compiler="g++", checks=False)


def test_cache_is_atomic_and_bounded(tmp_path):
    cache = BuildCache(tmp_path / "c", max_bytes=1 << 20, check_every=1)
    lib = tmp_path / "lib.so"
    lib.write_bytes(b"x" * (300 << 10))
    for k in range(6):
        cache.put(f"{k:064x}", {"ok": True, "log": "", "path": str(lib), "resources": {}, "symbol": "s"})
    assert cache.size() <= 1 << 20
    kept = [d.name for d in (tmp_path / "c" / "entries").iterdir()]
    assert 0 < len(kept) < 6 and f"{5:064x}" in kept  # the newest stays
    got = cache.get(f"{5:064x}", tmp_path)
    assert got["ok"] and Path(got["path"]).read_bytes() == lib.read_bytes()
    cache.put(f"{5:064x}", {"ok": False, "log": "other", "path": None})  # a second writer loses quietly
    assert cache.get(f"{5:064x}", tmp_path)["ok"]
    assert cache.get("f" * 64, tmp_path) is None
    with pytest.raises(ValueError):
        PoolConfig(batch_size=0)


def test_duplicates_are_built_once_checked_each_and_timed_once(tmp_path):
    """An RL group repeats samples: each distinct source is built once; every copy is checked on its own
    inputs (its own seed) and gets its own verdict, a broken one its own compile log; a repeat waits for its
    first copy's times (taken in the next test; here there are none, so it is run again)."""
    good, wrong = member("1.0f"), member("2.0f")
    items = [(TASK, good), (TASK, BROKEN), (TASK, good), (TASK, wrong), (TASK, BROKEN), (TASK, good)]
    with _pool(tmp_path, sandbox=False) as pool:  # (the sandbox keeps cpu workers from the GPU lock file)
        pool.timing = True  # the cpu backend times nothing; this runs the repeat path (untimed job, then times)
        res = pool.evaluate(items)
        stats = dict(pool.builds.stats)
        worker = pool._free.get()
        jobs = worker.jobs
        pool._free.put(worker)
    assert [r.status for r in res] == ["ok", "compile_error", "ok", "wrong", "compile_error", "ok"]
    # the cpu backend measured no time, so the repeats had none to take: each was run again, timed (the
    # fallback); good three times on its own inputs, wrong once, each repeat once more; broken: no worker
    assert jobs == 6
    assert stats["batches"] == 1 and stats["batched_members"] == 3 and stats["batch_rejects"] == 1
    assert len({res[0].seed, res[2].seed, res[5].seed}) == 3
    assert [r.seconds.get("timed_once") for r in res] == [None] * 6
    assert res[4].compile_log == res[1].compile_log and "undeclared_thing" in res[4].compile_log


def test_a_repeat_takes_the_first_copys_times_only_when_both_are_ok():
    from kernels_harness.result import ConfigResult, EvalResult
    from kernels_harness.run.pool import _duplicates, _take_times
    timed = [ConfigResult(index=0, config={}, correct=True, time_ms=0.5, time_iqr_ms=0.01, baseline_ms=1.0, reps=40),
             ConfigResult(index=1, config={}, correct=True, time_ms=2.0, time_iqr_ms=0.02, baseline_ms=3.0, reps=12)]
    first = EvalResult(task_id="saxpy", backend="cuda", status="ok", configs=timed)
    out = {"status": "ok", "configs": [{"index": 0, "correct": True, "time_ms": None},
                                       {"index": 1, "correct": True, "time_ms": None}], "seconds": {"time": 0.0}}
    assert _take_times(out, first)
    assert [(c["time_ms"], c["baseline_ms"], c["reps"]) for c in out["configs"]] == [(0.5, 1.0, 40), (2.0, 3.0, 12)]
    assert not _take_times(out, EvalResult(task_id="saxpy", backend="cuda", status="hack", configs=timed))
    untimed = {"status": "ok", "configs": [{"index": 2, "correct": True, "time_ms": None}]}
    assert not _take_times(untimed, first)  # a config the first copy did not time: time it again
    other = Task.from_dict({**TASK.to_dict(), "id": "saxpy2"})
    assert _duplicates([(TASK, "a"), (TASK, "b"), (TASK, "a"), (other, "a"), (TASK, "a")]) == {2: 0, 4: 0}


def test_compile_workers_run_below_the_execution_workers(tmp_path):
    import os

    from kernels_harness.run.workers import CompilePool
    base = os.nice(0)
    pool = CompilePool(1, str(tmp_path), "cpu", 60.0, nice=7)
    try:
        rec = pool.submit("c_reference", "cpu", "int f(int x) { return x + 1; }\n", str(tmp_path / "f.so")).result()
        w = pool.free.get()
        assert rec["ok"] and w.info["nice"] == min(19, base + 7)
        pool.free.put(w)
    finally:
        pool.close()
    with pytest.raises(ValueError, match="compile_nice"):
        PoolConfig(compile_nice=25)
