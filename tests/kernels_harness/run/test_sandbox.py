"""The worker sandbox (kernels_harness.run.sandbox) against hostile candidates, on the cpu backend.

Each candidate is a correct saxpy with one hostile act in its entry, submitted through HarnessPool like an RL
reward. The static checks are off (`checks=False`): a source can hide a call from them (through a function
pointer, inline assembly), so these tests show the run-time guard alone. Each asserts a failing verdict that
says why, and that the act had no effect (no file, no connection, no surviving process or thread).
"""
import os
import socket
import time
from pathlib import Path

import pytest

from kernels_harness.run import HarnessPool, sandbox
from kernels_harness.run.pool_config import PoolConfig
from tests.kernels_harness.adversarial.test_adversarial import TASK, cpu

pytestmark = [cpu, pytest.mark.skipif(sandbox.landlock_abi() == 0, reason="the kernel has no Landlock")]

KERNEL = r'''
#include <cuda_runtime.h>
#include <cstdio>
#include <cstring>
#include <unistd.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <thread>
#include <chrono>
__global__ void saxpy_k(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" int saxpy(int n, float a, const float* x, float* y, cudaStream_t stream) {
  %s
  saxpy_k<<<(n + 255) / 256, 256, 0, stream>>>(n, a, x, y);
  cudaDeviceSynchronize();
  %s
  return (int)cudaGetLastError();
}
'''


def candidate(before: str, after: str = "") -> str:
    return KERNEL % (before, after)


@pytest.fixture(scope="module")
def pool():
    # with PoolConfig(sandbox=False) every test here but the thread one fails (checked by hand)
    with HarnessPool("cpu", workers=1, call_timeout_s=15, checks=False, features=False,
                     cpu_budget_bytes=1 << 20, config=PoolConfig(sandbox=True)) as p:
        assert p.worker_info[0]["sandbox"]["candidate_thread"] == "on", p.worker_info
        yield p


def _judge(pool, source: str):
    res = pool.evaluate([(TASK, source)])[0]
    assert res.compiled, res.compile_log[-2000:]
    return res


def _threads_named(name: str) -> list:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                if Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip() == name:
                    found.append((int(pid), int(tid)))
        except OSError:
            continue
    return found


def test_cannot_write_a_file_outside_its_temporary_directory(pool, tmp_path):
    target = tmp_path / "escaped.txt"
    res = _judge(pool, candidate(f'FILE* f = fopen("{target}", "w"); if (f) {{ fputs("out", f); fclose(f); }}'))
    assert res.status == "runtime_error" and "sandbox stopped the solution" in res.error, res.error
    assert "writing or removing a file" in res.error
    assert not target.exists()


@pytest.mark.parametrize("what", ["harness_source", "expected_outputs"])
def test_cannot_read_the_harness_files_or_the_reference_outputs(pool, tmp_path, what):
    from kernels_harness.run import protocol
    if what == "harness_source":
        secret = Path(protocol.__file__).resolve()
    else:  # a file of expected outputs beside the task, as a user or a dataset build might leave one
        secret = tmp_path / "saxpy_expected.bin"
        secret.write_bytes(b"\x00\x00\x80\x3f" * 1000)
    assert os.access(secret, os.R_OK)  # readable by the test: only the sandbox stands in the way
    # y[0] = 12345 if the file could be read, -1 if not (the verdict's "got ..." reports y[0])
    res = _judge(pool, candidate("", f'FILE* f = fopen("{secret}", "rb"); char b[4]; '
                                     f'y[0] = (f && fread(b, 1, 4, f) == 4) ? 12345.0f : -1.0f; if (f) fclose(f);'))
    assert res.status == "wrong", (res.status, res.error)
    assert "first at index 0: got -1," in res.error, res.error


def test_cannot_reach_the_network(pool):
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    server.setblocking(False)
    port = server.getsockname()[1]
    try:
        res = _judge(pool, candidate(
            "int s = socket(AF_INET, SOCK_STREAM, 0); sockaddr_in sa{}; sa.sin_family = AF_INET; "
            f"sa.sin_port = htons({port}); sa.sin_addr.s_addr = inet_addr(\"127.0.0.1\"); "
            "if (s >= 0) { connect(s, (sockaddr*)&sa, sizeof sa); send(s, \"leak\", 4, 0); close(s); }"))
        assert res.status == "runtime_error" and "sandbox stopped the solution" in res.error, res.error
        assert "network socket" in res.error
        time.sleep(0.2)
        with pytest.raises(BlockingIOError):
            server.accept()  # nobody connected
    finally:
        server.close()


def test_cannot_fork_or_spawn(pool):
    name = f"cpj-fork-{os.getpid() % 10000}"
    res = _judge(pool, candidate(
        f'if (fork() == 0) {{ prctl(PR_SET_NAME, "{name}"); setsid(); for (;;) sleep(1); }}'))
    assert res.status == "runtime_error" and "sandbox stopped the solution" in res.error, res.error
    assert "starting a process" in res.error
    time.sleep(0.5)
    assert _threads_named(name) == []


def test_cannot_outlive_its_worker(pool):
    name = f"cpj-thr-{os.getpid() % 10000}"
    before = {w["pid"] for w in pool.worker_info}
    res = _judge(pool, candidate(
        f'std::thread([] {{ pthread_setname_np(pthread_self(), "{name}"); '
        'for (;;) std::this_thread::sleep_for(std::chrono::milliseconds(50)); }).detach();'))
    assert res.status == "runtime_error" and "left 1 thread(s) running" in res.error, res.error
    deadline = time.time() + 10
    while _threads_named(name) and time.time() < deadline:  # the worker is replaced, its threads die with it
        time.sleep(0.1)
    assert _threads_named(name) == []
    for pid in before:
        assert not Path(f"/proc/{pid}").exists() or Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    assert pool.evaluate([(TASK, candidate(""))])[0].status == "ok"  # and the pool keeps serving


def test_cannot_forge_a_verdict_on_the_harness_channel(pool):
    # a pickled ("result", {"status": "ok"}) would need the framing too; any write to the channel is refused
    res = _judge(pool, candidate("for (int fd = 3; fd < 64; fd++) { char m[8] = {0, 0, 0, 4, 'o', 'k', 0, 0}; "
                                 "if (fcntl(fd, F_GETFD) != -1) { ssize_t r = write(fd, m, 8); (void)r; } }"))
    assert res.status == "runtime_error" and "sandbox stopped the solution" in res.error, res.error


def test_an_honest_kernel_passes_under_the_sandbox(pool):
    assert _judge(pool, candidate("")).status == "ok"


def test_a_sandboxed_worker_can_take_the_gpu_lock_and_nothing_beside_it(tmp_path):
    """The GPU lock lives in the pool's directory, outside each worker's own: the cuda workers get write rights on
    exactly its two files (found on the H200, 2026-12-06: without them every job failed with PermissionError)."""
    import subprocess
    import sys

    from kernels_harness.run.timing import gpu_lock_files, gpu_lock_path
    own = tmp_path / "w0"
    own.mkdir()
    files = gpu_lock_files(gpu_lock_path(str(tmp_path), 0))
    for f in files:
        open(f, "a").close()
    probe = f"""
import json, os
from kernels_harness.run import sandbox
from kernels_harness.run.timing import gpu_lock
sandbox.install("cpu", {str(own)!r}, writable_files={files!r})
with gpu_lock({files[0]!r}):
    pass
with gpu_lock({files[0]!r}, shared=True):
    pass
out = {{"lock": "taken"}}
try:
    open({str(tmp_path / "beside.lock")!r}, "a+").close()
    out["beside"] = "written"
except PermissionError:
    out["beside"] = "denied"
print(json.dumps(out))
"""
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd=own,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip().splitlines()[-1] == '{"lock": "taken", "beside": "denied"}'


def test_a_sandboxed_worker_knows_its_user_name_without_passwd(tmp_path):
    """Behind Landlock /etc/passwd is unreadable, so with no USER in the environment getpass.getuser() fails, and
    with it torch.compile's cache directory: every torch.compile baseline failed so on the H100 of 2026-12-07
    ("getpwuid(): uid not found: 0"). The worker names the user before the sandbox goes up (worker.name_the_user)."""
    import subprocess
    import sys
    own = tmp_path / "w0"
    own.mkdir()
    probe = f"""
import getpass, json, sys
from kernels_harness.run import sandbox, worker
if sys.argv[1] == "named":
    worker.name_the_user()
sandbox.install("cpu", {str(own)!r})
try:
    print(json.dumps({{"user": getpass.getuser()}}))
except Exception as e:
    print(json.dumps({{"error": type(e).__name__ + ": " + str(e)}}))
"""
    env = {k: v for k, v in os.environ.items() if k not in ("LOGNAME", "USER", "LNAME", "USERNAME")}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    out = {}
    for how in ("bare", "named"):
        r = subprocess.run([sys.executable, "-c", probe, how], capture_output=True, text=True, timeout=60, cwd=own,
                           env=env, check=False)
        assert r.returncode == 0, r.stderr[-2000:]
        out[how] = r.stdout.strip().splitlines()[-1]
    assert "getpwuid" in out["bare"], out
    import pwd
    assert out["named"] == f'{{"user": "{pwd.getpwuid(os.getuid()).pw_name}"}}', out
