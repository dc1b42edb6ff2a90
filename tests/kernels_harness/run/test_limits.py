"""Worker isolation: secrets are not inherited, the working directory is private, limits apply."""
import os
import resource
import subprocess
import sys

from kernels_harness.run import limits
from tests.kernels_harness.adversarial.test_adversarial import TASK, cpu


def test_scrubbed_env_keeps_toolchain_and_drops_secrets(tmp_path):
    base = {"PATH": "/usr/bin", "CUDA_HOME": "/usr/local/cuda", "HF_TOKEN": "hf_x", "AWS_SECRET_ACCESS_KEY": "k",
            "OPENAI_API_KEY": "sk", "CUDAPERF_API_TOKEN": "t", "RANDOM_VAR": "1", "LD_LIBRARY_PATH": "/lib"}
    env = limits.scrubbed_env(str(tmp_path), base=base)
    assert env["PATH"] == "/usr/bin" and env["CUDA_HOME"] == "/usr/local/cuda" and env["LD_LIBRARY_PATH"] == "/lib"
    assert not {"HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "OPENAI_API_KEY", "CUDAPERF_API_TOKEN", "RANDOM_VAR"} & set(env)
    assert env["HOME"] == env["TMPDIR"] == str(tmp_path)


def test_apply_limits_in_a_child_process():
    code = ("import resource, json; from kernels_harness.run import limits; "
            "limits.apply_limits(limits.Limits(cpu_seconds=77, file_size_bytes=1 << 20)); "
            "print(json.dumps([resource.getrlimit(resource.RLIMIT_CPU)[0], resource.getrlimit(resource.RLIMIT_FSIZE)[0],"
            " resource.getrlimit(resource.RLIMIT_CORE)[0]]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__)))),
                         check=False)
    assert out.stdout.strip() == "[77, 1048576, 0]", out.stderr
    assert resource.getrlimit(resource.RLIMIT_CPU)[0] != 77  # the parent is untouched


SNOOP = r'''
#include <cuda_runtime.h>
#include <cstdlib>
#include <cstring>
__global__ void saxpy_k(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" int saxpy(int n, float a, const float* x, float* y, cudaStream_t stream) {
  if (getenv("CUDAPERF_TEST_SECRET_TOKEN") != nullptr) return 1;   // a leaked secret
  const char* home = getenv("HOME");
  if (home == nullptr || strstr(home, "cudaperf_harness_") == nullptr) return 2;  // not the private dir
  saxpy_k<<<(n + 255) / 256, 256, 0, stream>>>(n, a, x, y);
  return (int)cudaGetLastError();
}
'''


@cpu
def test_solution_sees_no_secret_and_a_private_home(monkeypatch):
    from kernels_harness.run import HarnessPool
    monkeypatch.setenv("CUDAPERF_TEST_SECRET_TOKEN", "s3cr3t")
    with HarnessPool("cpu", workers=1, checks=False, features=False) as pool:
        res = pool.evaluate([(TASK, SNOOP)])[0]
    assert res.status == "ok", res.error


def test_roots_of_killed_pools_are_swept(tmp_path):
    """A pool whose process was killed (kill -9: no close()) leaves its temporary root; the next pool removes it."""
    import subprocess
    import sys

    from kernels_harness.run.pool import OWNER_FILE, ROOT_PREFIX, sweep_stale_roots
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True).stdout.strip()
    for name, owner in (("dead", dead), ("alive", str(os.getpid())), ("creating", None)):
        d = tmp_path / (ROOT_PREFIX + name)
        (d / "w0_x").mkdir(parents=True)
        if owner is not None:
            (d / OWNER_FILE).write_text(owner)
    assert sweep_stale_roots(str(tmp_path)) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [ROOT_PREFIX + "alive", ROOT_PREFIX + "creating"]
