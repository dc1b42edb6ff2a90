"""The source rewriter: launches, shared memory, fiber detection, line numbers, unsupported constructs."""
import re

import pytest

from kernels_harness.emulation.rewrite import UnsupportedConstruct, rewrite, tokenize

SRC = r'''#include <cuda_runtime.h>
#define SYNC() __syncthreads()
namespace ops {
template <typename T, int N>
__global__ void tiled(const T* x, T* y) {
  __shared__ T tile[N];   // per block
  static __shared__ int flag;
  tile[threadIdx.x] = x[threadIdx.x];
  SYNC();
  y[threadIdx.x] = tile[N - 1 - threadIdx.x] + flag * 0;
}
}
__device__ float helper(float v) { return __shfl_down_sync(0xffffffffu, v, 1); }
__global__ void uses_helper(float* y) { y[threadIdx.x] = helper(y[threadIdx.x]); }
__global__ void plain(float* y, int n) { const char* s = "a<<<b>>>c"; if (threadIdx.x < n) y[threadIdx.x] = 1.f; }
__global__ void dyn(float* y) { extern __shared__ __align__(16) float buf[]; buf[threadIdx.x] = 1.f; y[0] = buf[0]; }
extern "C" int run(float* x, float* y, cudaStream_t s) {
  ops::tiled<float, 32><<<1, 32, 0, s>>>(x, y);
  uses_helper<<<dim3(2, 1), 32>>>(
      y);
  plain<<<1, 32, 0>>>(y, 32);
  dyn<<<1, 32, 32 * sizeof(float), s>>>(y);
  return 0;
}
'''


def test_launches_become_calls_with_all_four_config_values():
    out = rewrite(SRC)
    assert out.launches == 4
    assert '::cudaperf_emu::launch("tiled", 1, 32, 0, s, 1, [&](auto&&... cudaperf_a) { ops::tiled<float, 32>(cudaperf_a...); }, x, y)' in out.source
    assert '::cudaperf_emu::launch("plain", 1, 32, 0, 0, 0,' in out.source
    assert '::cudaperf_emu::launch("dyn", 1, 32, 32 * sizeof(float), s, 0,' in out.source
    assert "<<<" not in out.source.replace('"a<<<b>>>c"', "")


def test_fiber_detection_follows_functions_and_macros():
    out = rewrite(SRC)
    assert out.fiber_kernels == {"tiled": True, "uses_helper": True, "plain": False, "dyn": False}


def test_shared_memory_rewrites():
    out = rewrite(SRC).source
    assert re.search(r"T \(&tile\)\[N\] = ::cudaperf_emu::shared_var<T\[N\], \d+>\(\);", out)
    assert re.search(r"int &flag = ::cudaperf_emu::shared_var<int, \d+>\(\);", out) and "static" not in out
    assert "float* buf = (float*)::cudaperf_emu::dyn_smem();" in out


def test_static_shared_declarations_of_other_shapes_stay_thread_local():
    src = ("__shared__ float file_scope[8];\n"
           "__global__ void k(float* y) { __shared__ float* ptrs[2]; __shared__ float a[4], b[2][3]; }\n")
    out = rewrite(src).source
    assert "static thread_local float file_scope[8];" in out
    assert "static thread_local float* ptrs[2];" in out
    assert re.search(r"float \(&a\)\[4\] = .*shared_var<float\[4\], \d+>\(\); "
                     r"float \(&b\)\[2\]\[3\] = .*shared_var<float\[2\]\[3\], \d+>\(\);", out)


def test_file_scope_extern_shared_uses_become_the_block_buffer():
    src = "extern __shared__ float sdata[];\n__global__ void k(float* y) { sdata[0] = 1; y[0] = sdata[0]; }\n"
    out = rewrite(src)
    assert out.dynamic_shared == ["sdata"]
    assert out.source.count("((float*)::cudaperf_emu::dyn_smem())") == 2
    assert out.source.splitlines()[1].startswith("__global__ void k")


def test_line_numbers_are_preserved():
    out = rewrite(SRC).source
    assert out.count("\n") == SRC.count("\n")
    lines = out.splitlines()
    assert lines[18].strip().startswith("::cudaperf_emu::launch(\"uses_helper\"")
    assert lines[20].strip().startswith("::cudaperf_emu::launch(\"plain\"")


def test_tokenizer_keeps_strings_comments_and_preprocessor_lines_whole():
    toks = tokenize('#define X(a) a<<<1,1>>>()\nint s = 0; /* k<<<1,1>>>() */ const char* t = "<<<";\n')
    assert toks[0].kind == "pp"
    assert [t.text for t in toks if t.text == "<<<"] == []


@pytest.mark.parametrize("src, words", [
    ('__global__ void k() { asm volatile("membar.gl;"); }', ["inline PTX", "line 1"]),
    ('#include <cooperative_groups/memcpy_async.h>\n__global__ void k() {}', ["memcpy_async.h", "line 1"]),
    ('#include <cooperative_groups.h>\n__global__ void k() { cooperative_groups::this_grid().sync(); }',
     ["grid-wide cooperative groups", "line 2"]),
    ('\n\n__global__ void k(float* y) { cub::WarpReduce<float> r; }', ["CUB", "line 3"]),
    ('__global__ void child() {}\n__global__ void parent() { child<<<1, 1>>>(); }', ["dynamic parallelism", "line 2"]),
    ('__global__ void k() {}\nvoid f() { k<<<1>>>(); }', ["2 to 4 configuration", "line 2"]),
])
def test_unsupported_constructs_are_named_in_one_line(src, words):
    with pytest.raises(UnsupportedConstruct) as err:
        rewrite(src)
    msg = str(err.value)
    assert "\n" not in msg
    for w in words:
        assert w in msg


def test_volatile_pointers_become_lockstep_proxies_and_need_fibers():
    src = ("__device__ void wr(volatile float* __restrict__ s, int t) { s[t] += s[t + 16]; }\n"
           "__global__ void k(float* y) { __shared__ float s[64]; wr(s, threadIdx.x);"
           " volatile int* f = reinterpret_cast<volatile int*>(y); }\n"
           "void run(float* y) { k<<<1, 64>>>(y); }\n")
    out = rewrite(src)
    assert ("void wr(volatile float* __restrict__ s_cudaperf_raw, int t) { ::cudaperf_emu::vptr<float> s = "
            "s_cudaperf_raw; s[t] += s[t + 16]; }") in out.source      # parameters keep deducible types
    assert "reinterpret_cast<volatile int*>(y)" in out.source      # casts keep the qualifier
    assert "::cudaperf_emu::vptr<int>  f" in out.source
    assert out.fiber_kernels == {"k": True}


def test_launches_inside_macros_are_rewritten_and_named_after_the_argument():
    src = ("#define LAUNCH(k, n, y) \\\n    k<<<((n) + 255) / 256, 256>>>(y, n)\n"
           "__global__ void ones(float* y, int n) { y[0] = 1.f; }\n"
           "int run(float* y, int n) { LAUNCH(ones, n, y); return 0; }\n")
    out = rewrite(src).source
    assert '#define LAUNCH(k, n, y) \\\n    ::cudaperf_emu::launch(#k, ((n) + 255) / 256, 256, 0, 0, 0,' in out
    assert out.count("\n") == src.count("\n")
