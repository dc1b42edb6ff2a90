"""The method chain's stages as processes (experiments/method.py run): each one a subprocess in the chain's ROOT,
killed with everything it started when its budget ends or the driver is ended.

    rc, seconds = launch(cmd, root, logfile, budget_s)   # rc None: killed at the budget
    kill_tree(proc)                                      # SIGKILL to proc, its session and every descendant

A stage runs in its own session (so a signal to the driver's terminal does not reach it half-way), dies with the
driver (PR_SET_PDEATHSIG), and on SIGTERM / SIGINT / SIGHUP to the driver is killed with its descendants before the
driver exits with 128 + the signal's number.
"""
from __future__ import annotations

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


# Runs first in the stage's process: SIGKILL when the driver dies (PR_SET_PDEATHSIG, whatever kills it), then execs
# the stage. A shim rather than a preexec_fn: no Python runs between fork and exec in a driver that may hold threads.
_DIE_WITH_PARENT = ("import ctypes, os, sys\n"
                    "ctypes.CDLL(None, use_errno=True).prctl(1, 9)\n"
                    "if os.getppid() != int(sys.argv[1]):\n"
                    "    sys.exit(137)\n"
                    "os.execvp(sys.argv[2], sys.argv[2:])\n")


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
        proc = subprocess.Popen([sys.executable, "-c", _DIE_WITH_PARENT, str(os.getpid()), *cmd], cwd=root,
                                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
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
