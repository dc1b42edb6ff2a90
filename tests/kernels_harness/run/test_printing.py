"""A correct kernel that prints is judged `ok`: printing is not a hack and cannot reach the pool's channel.

The worker sends its stdout (printf, std::cout, device printf) to /dev/null and its stderr to its own worker.log
(kernels_harness/run/worker.py), which RLIMIT_FSIZE caps at 64 MiB (Python ignores SIGXFSZ, so writes past it fail
with EFBIG instead of killing the worker) and which is emptied between jobs past 1 MiB. The verdicts travel on a
separate socket that the candidate's thread may not write to (kernels_harness/run/sandbox.py).
"""
from pathlib import Path

import pytest

from kernels_harness import hacks
from kernels_harness.run import HarnessPool
from tests.kernels_harness.adversarial.test_adversarial import TASK, cpu

SAXPY = r'''#include <cuda_runtime.h>
#include <cstdio>
#include <iostream>
__global__ void saxpy_k(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    y[i] = a * x[i] + y[i];
    %DEVICE%
  }
}
extern "C" int saxpy(int n, float a, const float* x, float* y, cudaStream_t stream) {
  %HOST%
  saxpy_k<<<(n + 255) / 256, 256, 0, stream>>>(n, a, x, y);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) fprintf(stderr, "CUDA error: %s\n", cudaGetErrorString(e));
  fflush(stdout);
  fflush(stderr);
  return (int)e;
}
'''


def kernel(device: str = "", host: str = "") -> str:
    return SAXPY.replace("%DEVICE%", device).replace("%HOST%", host)


PRINTERS = {
    "device_printf": kernel(device='if (i < 1024) for (int r = 0; r < 8; r++) printf("MARK-DEV thread %d row %d y=%f\\n", i, r, y[i]);'),
    "host_4mb_stdout": kernel(host='for (int r = 0; r < 65536; r++) printf("MARK-OUT %054d\\n", r);'),
    "host_4mb_stderr": kernel(host='for (int r = 0; r < 65536; r++) fprintf(stderr, "MARK-ERR %054d\\n", r);'),
    "streams": kernel(host='std::cout << "MARK-COUT n=" << n << std::endl; std::cerr << "MARK-CERR a=" << a << "\\n";'
                           ' puts("MARK-PUTS"); fputs("MARK-FPUTS\\n", stderr); fwrite("MARK-FWRITE\\n", 1, 12, stdout);'),
    # text shaped like the pool's messages and like a sanitizer report: it only ever reaches /dev/null or the log
    "forged_messages": kernel(host='printf("(\'result\', {\'status\': \'ok\', \'speedup\': 100.0})\\n"); '
                                   'fprintf(stderr, "==1==ERROR: AddressSanitizer: heap-buffer-overflow MARK-ASAN\\n");'),
}


def _worker_logs(pool) -> str:
    return "".join(p.read_text(errors="replace") for p in Path(pool.root).rglob("worker.log"))


@cpu
def test_printing_kernels_are_judged_ok_and_their_output_stays_in_the_worker(capfd):
    assert all(hacks.check_source(s) == [] for s in PRINTERS.values())
    names = list(PRINTERS)
    with HarnessPool("cpu", workers=1, call_timeout_s=20, cpu_budget_bytes=1 << 20, features=False) as pool:
        results = dict(zip(names, pool.evaluate([(TASK, PRINTERS[n]) for n in names])))
        # the log is emptied before a job once past 1 MiB: read it after one more job that prints to both
        again = pool.evaluate([(TASK, PRINTERS["streams"])])[0]
        logs = _worker_logs(pool)
    for n, r in results.items():
        assert r.status == "ok" and r.correct, (n, r.status, r.error)
    assert again.status == "ok"
    out, err = capfd.readouterr()
    assert "MARK-" not in out and "MARK-" not in err      # nothing reached the pool's process
    # stderr lands in the worker's log, stdout nowhere
    assert "MARK-CERR" in logs and "MARK-FPUTS" in logs
    assert not any(m in logs for m in ("MARK-COUT", "MARK-PUTS", "MARK-FWRITE", "MARK-OUT", "MARK-DEV"))


@cpu
@pytest.mark.slow
def test_stderr_past_the_file_size_limit_neither_kills_the_worker_nor_fills_the_disk():
    """70 MiB of stderr per call (RLIMIT_FSIZE is 64 MiB): writes past the limit fail, the verdict stands."""
    flood = kernel(host='for (int r = 0; r < 1150000; r++) fprintf(stderr, "MARK-FLOOD %052d\\n", r);')
    with HarnessPool("cpu", workers=1, call_timeout_s=60, cpu_budget_bytes=1 << 20, features=False) as pool:
        res = pool.evaluate([(TASK, flood)])[0]
        size = max(p.stat().st_size for p in Path(pool.root).rglob("worker.log"))
        after = pool.evaluate([(TASK, kernel())])[0]
    assert res.status == "ok", (res.status, res.error)
    assert size <= 64 << 20 and after.status == "ok"


@pytest.mark.gpu
def test_printing_kernels_are_judged_ok_on_the_gpu():
    """On cuda, device printf goes through the driver's FIFO to the worker's stdout (/dev/null)."""
    names = list(PRINTERS)
    with HarnessPool("cuda", call_timeout_s=30) as pool:
        results = dict(zip(names, pool.evaluate([(TASK, PRINTERS[n]) for n in names])))
    for n, r in results.items():
        assert r.status == "ok" and r.correct and r.speedup is not None, (n, r.status, r.error)
