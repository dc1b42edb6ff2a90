"""nvcc discovery, shared-library builds and ptxas resource parsing (no GPU needed)."""
import os
import subprocess
import sys
import textwrap

import pytest

from kernels_harness.build import nvcc

KERNEL = textwrap.dedent("""
    __global__ void tiled(const float* a, float* b, int n) {
      __shared__ float tile[32][33];
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      tile[threadIdx.y][threadIdx.x] = i < n ? a[i] : 0.f;
      __syncthreads();
      if (i < n) b[i] = tile[threadIdx.x][threadIdx.y];
    }
    extern "C" int run(const float* a, float* b, int n, cudaStream_t s) {
      tiled<<<(n + 1023) / 1024, dim3(32, 32), 0, s>>>(a, b, n);
      return (int)cudaGetLastError();
    }
""")


def test_resource_usage_reads_registers_and_shared_memory():
    res = nvcc.resource_usage(KERNEL)
    assert set(res) == {"tiled"}
    assert res["tiled"]["smem_static"] == 32 * 33 * 4
    assert 1 <= res["tiled"]["registers"] <= 255
    assert res["tiled"]["barriers"] == 1
    assert res["tiled"]["arch"] == "sm_90"


def test_build_shared_and_compile_error(tmp_path):
    ok = nvcc.build_shared(KERNEL, tmp_path / "ok.so")
    assert ok.ok and ok.path.is_file() and "tiled" in ok.resources
    bad = nvcc.build_shared("__global__ void k(float* a) { a[0] = undefined_name; }", tmp_path / "bad.so")
    assert not bad.ok and bad.path is None
    assert "undefined_name" in bad.log.splitlines()[0]


def test_constexpr_host_math_compiles_in_device_code(tmp_path):
    """std::max / std::sqrt in a kernel: PyTorch's extension builds pass --expt-relaxed-constexpr, and so do we."""
    src = KERNEL.replace("tile[threadIdx.y][threadIdx.x] = i < n ? a[i] : 0.f;",
                         "tile[threadIdx.y][threadIdx.x] = i < n ? std::sqrt(std::max(a[i], 0.f)) : 0.f;")
    res = nvcc.build_shared("#include <algorithm>\n#include <cmath>\n" + src, tmp_path / "k.so")
    assert res.ok, res.log[:1000]


def test_kernel_base_name_strips_namespaces_and_templates():
    assert nvcc.kernel_base_name("void ns::red<float, 128>(float const*, float*)") == "red"
    assert nvcc.kernel_base_name("add(float const*, float*, int)") == "add"


def test_pip_installed_nvcc_works_without_toolkit_on_path(tmp_path):
    pip_nvcc = nvcc._pip_nvcc()
    assert pip_nvcc is not None, "nvidia-cuda-nvcc is a declared dependency and must be installed"
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH", "CUDAPERF_NVCC")}
    env["PATH"] = "/usr/bin:/bin"  # no toolkit nvcc here
    code = textwrap.dedent(f"""
        import shutil, sys
        assert shutil.which("nvcc") is None
        from kernels_harness.build import nvcc
        path = nvcc._pip_nvcc()
        import os; os.environ["CUDAPERF_NVCC"] = str(path)
        res = nvcc.resource_usage({KERNEL!r})
        b = nvcc.build_shared({KERNEL!r}, {str(tmp_path / 'pip.so')!r})
        print(path, res["tiled"]["smem_static"], b.ok)
    """)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300,
                         check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    path, smem, ok = out.stdout.split()
    assert "site-packages" in path and int(smem) == 32 * 33 * 4 and ok == "True"


def test_missing_compiler_is_one_clear_sentence(monkeypatch):
    monkeypatch.setenv("CUDAPERF_NVCC", "/nonexistent/nvcc")
    with pytest.raises(nvcc.CompilerNotFound, match="not a file"):
        nvcc.find_nvcc()
