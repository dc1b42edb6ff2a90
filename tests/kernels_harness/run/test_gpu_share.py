"""Worker processes sharing one GPU: the queue hands each id out once, the memory ledger makes room."""
import json
import multiprocessing as mp
import subprocess
import sys
import threading
import time

import pytest

from kernels_harness.run.gpu_share import MemoryLedger, WorkQueue, append_jsonl


def _drain(path, out, n_sleep, start=None):
    q = WorkQueue(path)
    if start is not None:  # every process claims from the same moment (a loaded machine starts them far apart)
        start.wait(30)
    while (tid := q.claim()) is not None:
        append_jsonl(out, {"task": tid, "by": mp.current_process().pid})
        time.sleep(n_sleep)


def test_queue_gives_every_id_to_exactly_one_process_in_order(tmp_path):
    ids = [f"t{i}" for i in range(40)]
    WorkQueue(tmp_path / "queue", ids)
    out = tmp_path / "r.jsonl"
    ctx = mp.get_context("spawn")   # not fork: this pytest process may have started JAX, which fork would copy mid-flight
    start = ctx.Barrier(3)
    procs = [ctx.Process(target=_drain, args=(tmp_path / "queue", out, 0.01, start)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    got = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["task"] for r in got) == sorted(ids)          # each id once, none lost
    assert len({r["by"] for r in got}) > 1                         # shared between the processes
    q = WorkQueue(tmp_path / "queue")
    assert q.remaining() == 0 and q.claim() is None
    assert [t for t in ids if t in q.claimed_by(got[0]["by"])] == q.claimed_by(got[0]["by"])  # in order


def test_ledger_waits_for_room_and_forgets_dead_processes(tmp_path):
    ledger = MemoryLedger(tmp_path / "mem.json", capacity_bytes=100)
    assert ledger.try_reserve(70, pid=1)           # pid 1 (init) is alive: its 70 bytes count
    assert ledger.held()[1] == 70
    assert not ledger.try_reserve(40)              # 70 + 40 > 100
    assert ledger.try_reserve(30)                  # fits exactly
    ledger.release()
    # a reservation larger than the capacity runs once the others are gone
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    ledger.release(pid=1)
    assert ledger.try_reserve(60, pid=int(dead.stdout))            # a process that has exited
    assert ledger.try_reserve(500)                                  # its bytes are dropped: alone, granted
    ledger.release()

    got = []
    ledger.try_reserve(80, pid=1)

    def second():
        with ledger.reserve(50):
            got.append(time.monotonic())
    t0 = time.monotonic()
    th = threading.Thread(target=second)
    th.start()
    time.sleep(0.3)
    assert not got                                 # still waiting for pid 1's 80 bytes
    ledger.release(pid=1)
    th.join(5)
    assert got and got[0] - t0 >= 0.3
    assert ledger.held() == {}
    with pytest.raises(TimeoutError):
        ledger.try_reserve(80, pid=1)
        with ledger.reserve(50, deadline=time.time() + 0.1):
            pass
