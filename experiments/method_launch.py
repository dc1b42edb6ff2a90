"""The method chain's stages as processes (experiments/method.py run): each one a subprocess in the chain's ROOT,
killed with everything it started when its budget ends or the driver is ended.

    rc, seconds = launch(cmd, root, logfile, budget_s)   # rc None: killed at the budget
    kill_tree(proc)                                      # SIGKILL to proc, its session and every descendant

A stage runs in its own session (so a signal to the driver's terminal does not reach it half-way), dies with the
driver (PR_SET_PDEATHSIG), and on SIGTERM / SIGINT / SIGHUP to the driver is killed with its descendants before the
driver exits with 128 + the signal's number.
"""
from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (by parent id, from /proc), also those that left its session."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat[stat.rfind(")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def kill_tree(proc: subprocess.Popen) -> None:
    """SIGKILL to a stage and every process it started (its session, and its descendants that left it)."""
    for pid in [*descendants(proc.pid), proc.pid]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _die_with_parent() -> None:
    """In the stage's process: SIGKILL when the driver dies (PR_SET_PDEATHSIG), whatever kills it."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def launch(cmd: list[str], root: Path, logfile: Path, seconds: float) -> tuple[int | None, float]:
    """Runs cmd in root (this repository first on PYTHONPATH), output appended to logfile; returns (its exit status,
    or None when it was killed at `seconds`; the seconds it ran)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]])
    env.update(PYTHONUNBUFFERED="1", TF_CPP_MIN_LOG_LEVEL=env.get("TF_CPP_MIN_LOG_LEVEL", "3"))
    logfile.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    with open(logfile, "ab") as out:
        out.write(f"\n== {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC: {' '.join(cmd)}\n".encode())
        out.flush()
        proc = subprocess.Popen(cmd, cwd=root, stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True, preexec_fn=_die_with_parent)  # noqa: PLW1509 (no threads)
        previous = {s: signal.signal(s, lambda *_, s=s: (kill_tree(proc), sys.exit(128 + s)))
                    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
        try:
            rc = proc.wait(timeout=max(seconds, 0.1))
        except subprocess.TimeoutExpired:
            kill_tree(proc)
            rc = None
        finally:
            for s, h in previous.items():
                signal.signal(s, h)
    return rc, time.monotonic() - t0
