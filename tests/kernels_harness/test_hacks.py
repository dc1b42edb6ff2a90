"""Static reward-hack checks: forbidden calls are found with their rule and line; clean kernels pass."""
import pytest

from kernels_harness import hacks

CLEAN = r'''
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cub/block/block_reduce.cuh>
// a comment that mentions fork() and cublasSgemm must not count
template <int B = 256>
__global__ void saxpy_k(int n, float a, const float* __restrict__ x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];  /* exit(0) in a comment */
}
namespace { constexpr int kBlock = 256; }
__device__ float table[2] = {1.f, 2.f};
extern "C" int saxpy(int n, float a, const float* x, float* y, cudaStream_t stream) {
  const char* msg = "call exit() later";  // a string literal, not a call
  (void)msg;
  float* tmp = nullptr;
  cudaMallocAsync(&tmp, 16, stream);
  cudaFreeAsync(tmp, stream);
  saxpy_k<<<(n + kBlock - 1) / kBlock, kBlock, 0, stream>>>(n, a, x, y);
  return (int)cudaGetLastError();
}
'''


def test_clean_kernel_has_no_violations():
    assert hacks.check_source(CLEAN) == []


@pytest.mark.parametrize("snippet,rule,name", [
    ("cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &a, x, n, x, n, &b, y, n);", "library", "cublasSgemm"),
    ("thrust::transform(x, x + n, y, y, op());", "library", "thrust"),
    ("auto t = torch::empty({n});", "library", "torch"),
    ("cudaStream_t s2; cudaStreamCreate(&s2);", "stream", "cudaStreamCreate"),
    ("cudaSetDevice(1);", "stream", "cudaSetDevice"),
    ("k<<<1, 32, 0, cudaStreamPerThread>>>(y);", "stream", "cudaStreamPerThread"),
    ("if (fork() == 0) {}", "process", "fork"),
    ("system(\"ls\");", "process", "system"),
    ("exit(0);", "process", "exit"),
    ("std::thread t([]{}); t.detach();", "process", "thread"),
    ("FILE* f = fopen(\"out.txt\", \"w\");", "file", "fopen"),
    ("std::ofstream o(\"x\");", "file", "ofstream"),
    ("const char* p = \"/proc/self/mem\";", "file", "/proc/self/mem"),
    ("int s = socket(2, 1, 0);", "network", "socket"),
    ("void* h = dlopen(\"libcublas.so\", 2);", "dynamic_loading", "dlopen"),
    ("long long t0 = clock64(); while (clock64() - t0 < 1000000) {}", "timing", "clock64"),
    ("cudaEvent_t e; cudaEventCreate(&e);", "timing", "cudaEvent_t"),
    ("auto t = std::chrono::steady_clock::now();", "timing", "std::chrono"),
    ("const char* v = getenv(\"HOME\");", "environment", "getenv"),
])
def test_forbidden_call_is_found_with_rule_and_line(snippet, rule, name):
    src = "#include <cuda_runtime.h>\n\nextern \"C\" int f(float* y, cudaStream_t stream) {\n  " + snippet + \
          "\n  return 0;\n}\n"
    found = hacks.check_source(src)
    hits = [v for v in found if v["rule"] == rule]
    assert hits, found
    assert hits[0]["line"] == 4
    assert name in hits[0]["name"]


@pytest.mark.parametrize("src,name", [
    ("__attribute__((constructor)) static void init() { }\n", "constructor"),
    ("static int warm = launch_at_load();\n", "launch_at_load"),
    ('extern "C" {\nint cached = precompute();\n}\n', "precompute"),
])
def test_code_that_runs_at_load_is_found(src, name):
    found = [v for v in hacks.check_source(src) if v["rule"] == "load_constructor"]
    assert found and name in found[0]["name"]


def test_includes_of_absolute_paths_and_process_headers_are_found():
    found = hacks.check_source('#include "/etc/passwd"\n#include <unistd.h>\n#include <dlfcn.h>\n')
    assert [(v["rule"], v["line"]) for v in found] == [("file", 1), ("process", 2), ("dynamic_loading", 3)]


def test_allow_list_by_rule_and_by_name():
    src = "__global__ void k(long long* t) { t[0] = clock64(); }\nint f() { return getenv(\"X\") != 0; }\n"
    assert {v["rule"] for v in hacks.check_source(src)} == {"timing", "environment"}
    assert {v["rule"] for v in hacks.check_source(src, hacks.Rules.make(disabled=["timing"]))} == {"environment"}
    assert {v["rule"] for v in hacks.check_source(src, hacks.Rules.make(allow=["getenv"]))} == {"timing"}
    with pytest.raises(ValueError, match="unknown hack rule"):
        hacks.Rules.make(disabled=["nonsense"])


def test_line_numbers_survive_block_comments():
    src = "/* line 1\n line 2\n*/\nint main2() {\n  abort();\n}\n"
    assert [(v["rule"], v["line"]) for v in hacks.check_source(src)] == [("process", 5)]
