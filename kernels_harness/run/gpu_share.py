"""Several worker processes on one GPU: a shared work queue, a device-memory ledger and a result log.

All three are plain files guarded by `fcntl.flock`, so any process that knows the directory can join,
and a process that dies releases its locks with it.

    q = WorkQueue(dir / "queue", ["a", "b", "c"])   # the parent writes the order once
    while (tid := q.claim()) is not None: ...       # each worker takes the next unclaimed id
    ledger = MemoryLedger(dir / "memory.json", capacity_bytes=100 << 30)
    with ledger.reserve(8 << 30): ...               # waits while the others' reservations leave no room
    append_jsonl(dir / "results.jsonl", record)     # one whole line per record, whoever writes

The timed regions themselves are serialised by kernels_harness.run.timing.gpu_lock.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from pathlib import Path


@contextlib.contextmanager
def _locked(path: Path):
    with open(str(path) + ".lock", "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def append_jsonl(path: str | Path, record: dict) -> None:
    """Appends one JSON line under the file's lock (lines of concurrent writers never interleave)."""
    path = Path(path)
    line = json.dumps(record) + "\n"
    with _locked(path), path.open("a") as f:
        f.write(line)
        f.flush()


class WorkQueue:
    """Ids handed out once each, in order, to whichever process asks next.

    `path` holds the order (one id a line); `path.claims` one `id<TAB>pid` line per claim.
    """

    def __init__(self, path: str | Path, ids: list[str] | None = None):
        self.path = Path(path)
        self.claims = Path(str(self.path) + ".claims")
        if ids is not None:
            with _locked(self.path):
                self.path.write_text("".join(f"{i}\n" for i in ids))
                self.claims.write_text("")

    def _read(self) -> tuple[list[str], list[tuple[str, int]]]:
        order = self.path.read_text().split()
        claims = []
        if self.claims.is_file():
            for line in self.claims.read_text().splitlines():
                tid, _, pid = line.partition("\t")
                claims.append((tid, int(pid or 0)))
        return order, claims

    def claim(self, pid: int | None = None) -> str | None:
        """The next unclaimed id (recorded as claimed by `pid`, default this process), or None."""
        pid = os.getpid() if pid is None else pid
        with _locked(self.path):
            order, claims = self._read()
            taken = {t for t, _ in claims}
            for tid in order:
                if tid not in taken:
                    with self.claims.open("a") as f:
                        f.write(f"{tid}\t{pid}\n")
                    return tid
        return None

    def claimed_by(self, pid: int) -> list[str]:
        """The ids `pid` has claimed, in claim order."""
        with _locked(self.path):
            return [t for t, p in self._read()[1] if p == pid]

    def remaining(self) -> int:
        with _locked(self.path):
            order, claims = self._read()
            return len(set(order) - {t for t, _ in claims})


class MemoryLedger:
    """Device bytes reserved by live processes; a reservation waits until it fits under the capacity.

    A reservation larger than the capacity is granted when nothing else is reserved (the process then
    runs alone as far as this ledger is concerned). Entries of dead processes are dropped.
    """

    def __init__(self, path: str | Path, capacity_bytes: int):
        self.path = Path(path)
        self.capacity = int(capacity_bytes)

    def _load(self) -> dict[int, int]:
        try:
            held = {int(k): int(v) for k, v in json.loads(self.path.read_text()).items()}
        except (FileNotFoundError, ValueError):
            held = {}
        return {p: b for p, b in held.items() if _alive(p)}

    def held(self) -> dict[int, int]:
        with _locked(self.path):
            return self._load()

    def try_reserve(self, nbytes: int, pid: int | None = None) -> bool:
        pid = os.getpid() if pid is None else pid
        with _locked(self.path):
            held = self._load()
            others = sum(b for p, b in held.items() if p != pid)
            if others and others + nbytes > self.capacity:
                return False
            held[pid] = int(nbytes)
            self.path.write_text(json.dumps(held))
            return True

    def release(self, pid: int | None = None) -> None:
        pid = os.getpid() if pid is None else pid
        with _locked(self.path):
            held = self._load()
            held.pop(pid, None)
            self.path.write_text(json.dumps(held))

    @contextlib.contextmanager
    def reserve(self, nbytes: int, deadline: float = float("inf"), poll_s: float = 0.05):
        """Holds `nbytes` for the block; TimeoutError if it does not fit before `deadline` (time.time())."""
        while not self.try_reserve(nbytes):
            if time.time() > deadline:
                raise TimeoutError(f"no room for {nbytes / 2**30:.1f} GiB on the device before the deadline")
            time.sleep(poll_s)
        try:
            yield
        finally:
            self.release()
