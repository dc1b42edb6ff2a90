"""Faulty answers for the ABI classifier (cudaperf_jax/eval/abi.py) and their REAL harness verdicts and compile logs.

Each case is a source a model could write for a real task (the smoke suite's saxpy, KernelBench level 1's ReLU) and
the category the classifier must give (None: the failure is about the computation, or there is none). `record()`
judges every case through a real HarnessPool on the cpu backend (g++ through the emulation layer: its EvalResult
with the g++ log) and builds it with nvcc as the cuda backend does (kernels_harness.build.nvcc.build_shared: its
log), and writes them to abi_logs.json, which the default tests read:

    python -m tests.cudaperf_jax.eval.abi_cases          # from the repository root; ~1 min, needs g++ and nvcc
"""
from __future__ import annotations

import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
LOGS = Path(__file__).with_name("abi_logs.json")
TASKS = {"saxpy": REPO / "experiments/suites/smoke/smoke_saxpy.json",
         "relu": REPO / "data/kernelbench/tasks/level1_19_relu.json"}

KERNEL = '''#include <cuda_runtime.h>

__global__ void saxpy_kernel(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
'''
PROTO = 'extern "C" int saxpy(int n, float a, const float* x, float* y, cudaStream_t stream)'
BODY = ''' {
  saxpy_kernel<<<(n + 255) / 256, 256, 0, stream>>>(n, a, x, y);
  return (int)cudaGetLastError();
}
'''
GOOD = KERNEL + "\n" + PROTO + BODY
NAMED = KERNEL.replace("saxpy_kernel", "saxpy")

QWEN05_SAXPY = '__global__ void saxpy(int n, float a, const float* x, float* y) {\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) y[i] = a * x[i] + y[i];\n}\n\nextern "C" int saxpy(int n, float a, const float* x, float* y, cudaStream_t stream) {\n    saxpy<<<n / blockDim.x, blockDim.x>>>(n, a, x, y, stream);\n    return cudaGetLastError();\n}\n'

RELU_KERNEL = '''#include <cuda_runtime.h>

__global__ void relu_kernel(long long n, const float* x, float* out) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
'''
RELU_PROTO = 'extern "C" int relu(const float* x, float* out, int x_d0, int x_d1, int out_d0, int out_d1, cudaStream_t stream)'
RELU_BODY = ''' {
  long long n = (long long)x_d0 * x_d1;
  relu_kernel<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(n, x, out);
  return (int)cudaGetLastError();
}
'''

# name -> (task, source, expected category)
CASES: dict[str, tuple[str, str, str | None]] = {
    "prose": ("saxpy", "I'm sorry, but I can't write that kernel without knowing the sizes you have in mind.\n",
              "no_code"),
    "empty": ("saxpy", "\n", "no_code"),
    "echoed_prototype": ("saxpy", PROTO + ";\n", "echoed_prototype"),
    "echoed_prototype_with_include": ("saxpy", "#include <cuda_runtime.h>\n\n" + PROTO + ";\n", "echoed_prototype"),
    "cxx_linkage": ("saxpy", GOOD.replace('extern "C" ', ""), "missing_export"),
    "main_only": ("saxpy", KERNEL + "\nint main() {\n  float *x, *y;\n  cudaMalloc(&x, 4096);\n  cudaMalloc(&y, 4096);\n"
                  "  saxpy_kernel<<<4, 256>>>(1000, 2.5f, x, y);\n  return 0;\n}\n", "missing_export"),
    "misnamed": ("saxpy", GOOD.replace("int saxpy(", "int saxpy_cuda("), "misnamed_export"),
    "kernel_named_like_export": ("saxpy", NAMED.replace("float* y)", "float* y, cudaStream_t stream)") + "\n" + PROTO
                                 + BODY.replace("saxpy_kernel", "saxpy").replace("x, y)", "x, y, stream)"),
                                 "kernel_named_like_export"),
    "kernel_named_like_export_extern_c": ("saxpy", NAMED.replace("__global__", 'extern "C" __global__') + "\n" + PROTO
                                          + BODY.replace("saxpy_kernel", "saxpy"), "kernel_named_like_export"),
    # Qwen2.5-Coder-0.5B's answer (plain prompt, temperature 0.2; 2026-12-07): its launch's 5 arguments pick the export
    # (nvcc: "a host function call cannot be configured"; the cpu backend runs the export recursively)
    "qwen05_kernel_named_like_export": ("saxpy", QWEN05_SAXPY, "kernel_named_like_export"),
    "const_mismatch": ("saxpy", GOOD.replace("const float* x, float* y) {", "float* x, float* y) {"),
                       "const_mismatch"),
    # Qwen2.5-Coder-0.5B's usual fault with the worked_example prompt (demo suite, 2026-12-07): its own kernel,
    # the example's launch line
    "example_kernel_launched": ("saxpy", GOOD.replace("  saxpy_kernel<<<", "  vec_add_kernel<<<"),
                                "example_name_copied"),
    # Qwen2.5-Coder-0.5B with the scaffold prompt (CPU probe, 2026-12-07): the example's kernel body pasted into
    # the task's kernel, with the example's out_d0/out_d1
    "example_body_copied": ("saxpy", GOOD.replace("if (i < n) y[i]", "if (i < (long long)out_d0 * out_d1) y[i]"),
                            "example_name_copied"),
    "undeclared_N": ("saxpy", GOOD.replace("(n + 255)", "(N + 255)").replace(">>>(n,", ">>>(N,"), "undeclared_size"),
    "undeclared_BLOCK_SIZE": ("saxpy", GOOD.replace("256, 0, stream", "BLOCK_SIZE, 0, stream"), "undeclared_size"),
    "signature_order": ("saxpy", GOOD.replace(PROTO, 'extern "C" int saxpy(float* y, const float* x, float a, int n, '
                                              'cudaStream_t stream)'), "signature_mismatch"),
    "signature_double_arrays": ("saxpy", GOOD.replace("const float* x, float* y", "const double* x, double* y"),
                                "signature_mismatch"),
    "signature_conflicts_with_echo": ("saxpy", KERNEL + "\n" + PROTO + ";\n\n" + GOOD.split("\n\n", 2)[2].replace(
        "float a, ", "").replace("{\n  saxpy_kernel", "{\n  float a = 2.5f;\n  saxpy_kernel"), "signature_mismatch"),
    # honest failures and successes: not the ABI
    "correct": ("saxpy", GOOD, None),
    "correct_kernel_overloads_export": ("saxpy", NAMED + "\n" + PROTO + BODY.replace("saxpy_kernel", "saxpy"), None),
    "wrong_result": ("saxpy", GOOD.replace("a * x[i] + y[i]", "a * x[i] - y[i]"), None),
    "out_of_bounds": ("saxpy", GOOD.replace("if (i < n) y[i]", "if (i < n) y[i + (1LL << 40)]"), None),
    "typo_in_kernel": ("saxpy", GOOD.replace("blockIdx.x", "blockIdx.X"), None),
    "undefined_helper": ("saxpy", GOOD.replace("a * x[i] + y[i]", "fused_axpy(a, x[i], y[i])"), None),
    "missing_semicolon": ("saxpy", GOOD.replace("y[i];\n}", "y[i]\n}"), None),
    "relu_correct": ("relu", RELU_KERNEL + "\n" + RELU_PROTO + RELU_BODY, None),
    "relu_wrong": ("relu", RELU_KERNEL.replace("x[i] > 0.0f ? x[i] : 0.0f", "0.5f * x[i]") + "\n" + RELU_PROTO + RELU_BODY,
                   None),
    "relu_undeclared_module_constants": ("relu", RELU_KERNEL + "\n" + RELU_PROTO + RELU_BODY.replace(
        "(long long)x_d0 * x_d1", "(long long)batch_size * dim"), "undeclared_size"),
    # Qwen2.5-Coder-1.5B/0.5B's commonest fault (ladder, 2026-12-07): a kernel using the export's dimensions
    # (out_d1, A_d1) or scalars (eps2) without receiving them
    "relu_kernel_uses_export_dims": ("relu", RELU_KERNEL.replace("if (i < n)", "if (i < (long long)out_d0 * out_d1)")
                                     + "\n" + RELU_PROTO + RELU_BODY, "undeclared_size"),
    "relu_const_mismatch": ("relu", RELU_KERNEL.replace("const float* x", "float* x") + "\n" + RELU_PROTO + RELU_BODY,
                            "const_mismatch"),
}


def load_tasks() -> dict:
    from kernels_harness.tasks.schema import load_task
    return {k: load_task(p) for k, p in TASKS.items()}


def record(path: Path = LOGS) -> dict:
    """Judges every case on the cpu backend and builds it with nvcc; writes and returns {name: {...}}."""
    from concurrent.futures import ThreadPoolExecutor
    from tempfile import TemporaryDirectory

    from kernels_harness.build import nvcc
    from kernels_harness.run import HarnessPool
    tasks = load_tasks()
    names = list(CASES)
    with HarnessPool("cpu", workers=2, cpu_budget_bytes=4 << 20, features=False, seed=0) as pool:
        cpu = pool.evaluate([(tasks[CASES[n][0]], CASES[n][1]) for n in names])
    with TemporaryDirectory() as tmp, ThreadPoolExecutor(4) as ex:
        built = list(ex.map(lambda n: nvcc.build_shared(CASES[n][1], Path(tmp) / f"{n}.so"), names))
    out = {n: {"task": CASES[n][0], "source": CASES[n][1],
               "cpu": {"status": r.status, "error": r.error, "compile_log": r.compile_log},
               "nvcc": {"ok": b.ok, "log": b.log}} for n, r, b in zip(names, cpu, built)}
    path.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    return out


if __name__ == "__main__":
    rec = record()
    for name, r in rec.items():
        print(f"{name:40s} cpu {r['cpu']['status']:14s} nvcc {'ok' if r['nvcc']['ok'] else 'error'}")
