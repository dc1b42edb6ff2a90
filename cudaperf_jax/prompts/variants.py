"""Prompt variants, registered by name: how a task (and, after the first turn, the harness feedback) is posed.

    v = get("scaffold")                            # the default; get("plain") is the pre-2026-12-07 prompt
    v.messages(task)                               # [system, user]: the first turn
    v.messages(task, [(answer, feedback)])         # + [assistant, user] per earlier exchange
    v.feedback_prompt(task, feedback)              # the user message of a refinement turn

One variant is chosen by a config field (`prompt` in the RL rollout, evaluation, SFT data and demo configs; it is
written to each run directory with the rest of the config), so a prompt ablation is a config string. SFT data, RL
rollouts, evaluation and the reward bridge all pose tasks through this module and nothing else.

The solution ABI (README "Task files"): one CUDA C++ file exporting `extern "C" int ENTRY(args..., cudaStream_t
stream)`; arrays are device pointers already allocated (inputs filled, outputs the solution's to write), integers
are sizes, every kernel is launched on `stream`, the function returns cudaGetLastError().
"""
from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable, Sequence

from kernels_harness.tasks.schema import Task

_LANG = {"c2cuda": ("C function", "c"), "torch2cuda": ("PyTorch module", "python")}

PLAIN_SYSTEM = ("You are an expert CUDA engineer. You translate programs into fast, correct CUDA C++ kernels "
                "for an NVIDIA H100/H200 (sm_90). Answer with one ```cuda code block holding a complete "
                "translation unit.")

SYSTEM = ("You are an expert CUDA engineer. You write fast, correct CUDA C++ for an NVIDIA H100 (sm_90). "
          "Answer with one ```cuda code block holding the complete .cu file, and nothing else.")


def describe_signature(task: Task) -> str:
    """One line per argument of the exported function: name, role, dtype and shape (or the scalar's value)."""
    lines = []
    for a in task.signature:
        if a.is_array:
            shape = " x ".join(str(s) for s in a.shape) or "scalar array"
            lines.append(f"- `{a.name}`: {a.role} array of {a.dtype}, shape [{shape}]")
        else:
            lines.append(f"- `{a.name}`: {a.dtype} scalar (= {a.value})")
    return "\n".join(lines)


def sizes_line(task: Task, config_index: int = -1) -> str:
    """The typical sizes of a task: the symbols of one config (its largest by default)."""
    cfg = task.configs[config_index]
    return ", ".join(f"{k}={v}" for k, v in cfg.items() if k != "name")


def source_block(task: Task) -> str:
    _, lang = _LANG[task.track]
    return f"```{lang}\n{task.source.strip()}\n```"


# ---- the worked examples: one complete answer per track, in the ABI --------------------------------------------

_C_EXAMPLE_TASK = "void vec_add(int n, const float* a, const float* b, float* out) {\n" \
                  "  for (int i = 0; i < n; i++) out[i] = a[i] + b[i];\n}"
_C_EXAMPLE_PROTO = 'extern "C" int vec_add(int n, const float* a, const float* b, float* out, cudaStream_t stream)'
_TORCH_EXAMPLE_TASK = ("class Model(nn.Module):\n    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:\n"
                       "        return a + b")
_TORCH_EXAMPLE_PROTO = ('extern "C" int add(const float* a, const float* b, float* out, int a_d0, int a_d1, '
                        'int b_d0, int b_d1, int out_d0, int out_d1, cudaStream_t stream)')

_C_EXAMPLE = '''#include <cuda_runtime.h>

__global__ void vec_add_kernel(long long n, const float* __restrict__ a, const float* __restrict__ b,
                               float* __restrict__ out) {
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        out[i] = a[i] + b[i];
    }
}

extern "C" int vec_add(int n, const float* a, const float* b, float* out, cudaStream_t stream) {
    const int threads = 256;
    long long blocks = ((long long)n + threads - 1) / threads;
    if (blocks > 65535) blocks = 65535;
    if (blocks < 1) blocks = 1;
    vec_add_kernel<<<(int)blocks, threads, 0, stream>>>(n, a, b, out);
    return (int)cudaGetLastError();
}'''

_TORCH_EXAMPLE = '''#include <cuda_runtime.h>

__global__ void add_kernel(long long n, const float* __restrict__ a, const float* __restrict__ b,
                           float* __restrict__ out) {
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        out[i] = a[i] + b[i];
    }
}

extern "C" int add(const float* a, const float* b, float* out, int a_d0, int a_d1, int b_d0, int b_d1,
                   int out_d0, int out_d1, cudaStream_t stream) {
    long long n = (long long)out_d0 * out_d1;
    const int threads = 256;
    long long blocks = (n + threads - 1) / threads;
    if (blocks > 65535) blocks = 65535;
    if (blocks < 1) blocks = 1;
    add_kernel<<<(int)blocks, threads, 0, stream>>>(n, a, b, out);
    return (int)cudaGetLastError();
}'''

EXAMPLES = {  # track -> (what the example task is, its source, its exported function, a complete answer)
    "c2cuda": ("C function", _C_EXAMPLE_TASK, _C_EXAMPLE_PROTO, _C_EXAMPLE),
    "torch2cuda": ("PyTorch module with a and b of shape [a_d0 x a_d1]", _TORCH_EXAMPLE_TASK, _TORCH_EXAMPLE_PROTO,
                   _TORCH_EXAMPLE),
}

# worked_args's examples: kernels that receive every size and scalar they use as their own parameters. On the H100
# ladder (2026-12-07) most ABI failures of worked_example's answers were kernels copied from its one-size example
# that then used the export's parameters (A_d1, eps2, features) without receiving them.
_C_ARGS_TASK = ("void saxpy(int n, float alpha, const float* x, const float* y, float* out) {\n"
                "  for (int i = 0; i < n; i++) out[i] = alpha * x[i] + y[i];\n}")
_C_ARGS_PROTO = ('extern "C" int saxpy(int n, float alpha, const float* x, const float* y, float* out, '
                 'cudaStream_t stream)')
_C_ARGS = '''#include <cuda_runtime.h>

// A kernel sees only its own parameters: n and alpha are passed to it.
__global__ void saxpy_kernel(long long n, float alpha, const float* __restrict__ x, const float* __restrict__ y,
                             float* __restrict__ out) {
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        out[i] = alpha * x[i] + y[i];
    }
}

extern "C" int saxpy(int n, float alpha, const float* x, const float* y, float* out, cudaStream_t stream) {
    const int threads = 256;
    long long blocks = ((long long)n + threads - 1) / threads;
    if (blocks > 65535) blocks = 65535;
    if (blocks < 1) blocks = 1;
    saxpy_kernel<<<(int)blocks, threads, 0, stream>>>(n, alpha, x, y, out);
    return (int)cudaGetLastError();
}'''

_TORCH_ARGS_TASK = ("class Model(nn.Module):\n    def forward(self, x: torch.Tensor, s: torch.Tensor, b: torch.Tensor) "
                    "-> torch.Tensor:\n        return x * s[:, None] + b")
_TORCH_ARGS_PROTO = ('extern "C" int scale_rows_add(const float* x, const float* s, const float* b, float* out, '
                     'int x_d0, int x_d1, int s_d0, int b_d0, int out_d0, int out_d1, cudaStream_t stream)')
_TORCH_ARGS = '''#include <cuda_runtime.h>

// A kernel sees only its own parameters: rows and cols are passed to it.
__global__ void scale_rows_add_kernel(int rows, int cols, const float* __restrict__ x, const float* __restrict__ s,
                                      const float* __restrict__ b, float* __restrict__ out) {
    long long n = (long long)rows * cols;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        int r = (int)(i / cols);
        int c = (int)(i % cols);
        out[i] = x[i] * s[r] + b[c];
    }
}

extern "C" int scale_rows_add(const float* x, const float* s, const float* b, float* out, int x_d0, int x_d1,
                              int s_d0, int b_d0, int out_d0, int out_d1, cudaStream_t stream) {
    const int rows = out_d0, cols = out_d1;
    const int threads = 256;
    long long blocks = ((long long)rows * cols + threads - 1) / threads;
    if (blocks > 65535) blocks = 65535;
    if (blocks < 1) blocks = 1;
    scale_rows_add_kernel<<<(int)blocks, threads, 0, stream>>>(rows, cols, x, s, b, out);
    return (int)cudaGetLastError();
}'''

ARGS_EXAMPLES = {
    "c2cuda": ("C function", _C_ARGS_TASK, _C_ARGS_PROTO, _C_ARGS),
    "torch2cuda": ("PyTorch module with x of shape [x_d0 x x_d1], s of shape [x_d0] and b of shape [x_d1]",
                   _TORCH_ARGS_TASK, _TORCH_ARGS_PROTO, _TORCH_ARGS),
}
# scaffold's examples: the skeleton the variant hands out for the task, filled in for the example. The kernel takes
# every parameter of the exported function but the stream, in the same order, so no size can be left behind.
_C_SCAFFOLD = '''#include <cuda_runtime.h>

__global__ void saxpy_kernel(int n, float alpha, const float* __restrict__ x, const float* __restrict__ y,
                             float* __restrict__ out) {
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        out[i] = alpha * x[i] + y[i];
    }
}

extern "C" int saxpy(int n, float alpha, const float* x, const float* y, float* out, cudaStream_t stream) {
    const int threads = 256;
    long long work = (long long)n;  // one thread per output element
    long long blocks = (work + threads - 1) / threads;
    if (blocks > 65535) blocks = 65535;
    if (blocks < 1) blocks = 1;
    saxpy_kernel<<<(int)blocks, threads, 0, stream>>>(n, alpha, x, y, out);
    return (int)cudaGetLastError();
}'''

_TORCH_SCAFFOLD = '''#include <cuda_runtime.h>

__global__ void scale_rows_add_kernel(const float* __restrict__ x, const float* __restrict__ s,
                                      const float* __restrict__ b, float* __restrict__ out, int x_d0, int x_d1,
                                      int s_d0, int b_d0, int out_d0, int out_d1) {
    long long n = (long long)out_d0 * out_d1;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        int r = (int)(i / out_d1);
        int c = (int)(i % out_d1);
        out[i] = x[i] * s[r] + b[c];
    }
}

extern "C" int scale_rows_add(const float* x, const float* s, const float* b, float* out, int x_d0, int x_d1,
                              int s_d0, int b_d0, int out_d0, int out_d1, cudaStream_t stream) {
    const int threads = 256;
    long long work = (long long)out_d0 * out_d1;  // one thread per output element
    long long blocks = (work + threads - 1) / threads;
    if (blocks > 65535) blocks = 65535;
    if (blocks < 1) blocks = 1;
    scale_rows_add_kernel<<<(int)blocks, threads, 0, stream>>>(x, s, b, out, x_d0, x_d1, s_d0, b_d0, out_d0, out_d1);
    return (int)cudaGetLastError();
}'''

SCAFFOLD_EXAMPLES = {track: ex[:3] + (answer,) for (track, ex), answer in
                     zip(ARGS_EXAMPLES.items(), (_C_SCAFFOLD, _TORCH_SCAFFOLD))}
# scaffold_loop's examples: the same skeleton filled in for an output element that loops over its inputs (a scaled
# matrix-vector product; pairwise squared distances), the pattern of matmuls, reductions, norms, pooling and
# convolutions, where scaffold's elementwise examples were copied as one expression (the 1.5B's KernelBench
# matmuls: `out[i] = A[r * A_d1 + c] * B[c * B_d1 + c]`).
_C_LOOP_TASK = ("void row_dot(int rows, int cols, float alpha, const float* a, const float* v, float* out) {\n"
                "    for (int r = 0; r < rows; ++r) {\n        float acc = 0.0f;\n"
                "        for (int c = 0; c < cols; ++c) acc += a[r * cols + c] * v[c];\n"
                "        out[r] = alpha * acc;\n    }\n}")
_C_LOOP_PROTO = ('extern "C" int row_dot(int rows, int cols, float alpha, const float* a, const float* v, float* out, '
                 'cudaStream_t stream)')
_C_LOOP = '''#include <cuda_runtime.h>

__global__ void row_dot_kernel(int rows, int cols, float alpha, const float* __restrict__ a,
                               const float* __restrict__ v, float* __restrict__ out) {
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += stride) {
        float acc = 0.0f;
        for (int c = 0; c < cols; ++c) {  // each output element loops over the inputs it depends on
            acc += a[r * cols + c] * v[c];
        }
        out[r] = alpha * acc;
    }
}

extern "C" int row_dot(int rows, int cols, float alpha, const float* a, const float* v, float* out,
                       cudaStream_t stream) {
    const int threads = 256;
    long long work = (long long)rows;  // one thread per output element
    long long blocks = (work + threads - 1) / threads;
    if (blocks > 65535) blocks = 65535;
    if (blocks < 1) blocks = 1;
    row_dot_kernel<<<(int)blocks, threads, 0, stream>>>(rows, cols, alpha, a, v, out);
    return (int)cudaGetLastError();
}'''

_TORCH_LOOP_TASK = ("class Model(nn.Module):\n    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:\n"
                    "        return ((x[:, None, :] - y[None, :, :]) ** 2).sum(dim=2)")
_TORCH_LOOP_PROTO = ('extern "C" int pairwise_sq_dist(const float* x, const float* y, float* out, int x_d0, int x_d1, '
                     'int y_d0, int y_d1, int out_d0, int out_d1, cudaStream_t stream)')
_TORCH_LOOP = '''#include <cuda_runtime.h>

__global__ void pairwise_sq_dist_kernel(const float* __restrict__ x, const float* __restrict__ y,
                                        float* __restrict__ out, int x_d0, int x_d1, int y_d0, int y_d1,
                                        int out_d0, int out_d1) {
    long long n = (long long)out_d0 * out_d1;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        int r = (int)(i / out_d1);  // the row of x
        int c = (int)(i % out_d1);  // the row of y
        float acc = 0.0f;
        for (int k = 0; k < x_d1; ++k) {  // each output element loops over the inputs it depends on
            float d = x[(long long)r * x_d1 + k] - y[(long long)c * y_d1 + k];
            acc += d * d;
        }
        out[i] = acc;
    }
}

extern "C" int pairwise_sq_dist(const float* x, const float* y, float* out, int x_d0, int x_d1, int y_d0, int y_d1,
                                int out_d0, int out_d1, cudaStream_t stream) {
    const int threads = 256;
    long long work = (long long)out_d0 * out_d1;  // one thread per output element
    long long blocks = (work + threads - 1) / threads;
    if (blocks > 65535) blocks = 65535;
    if (blocks < 1) blocks = 1;
    pairwise_sq_dist_kernel<<<(int)blocks, threads, 0, stream>>>(x, y, out, x_d0, x_d1, y_d0, y_d1, out_d0, out_d1);
    return (int)cudaGetLastError();
}'''

LOOP_EXAMPLES = {
    "c2cuda": ("C function", _C_LOOP_TASK, _C_LOOP_PROTO, _C_LOOP),
    "torch2cuda": ("PyTorch module with x of shape [x_d0 x x_d1] and y of shape [y_d0 x y_d1] (x_d1 == y_d1)",
                   _TORCH_LOOP_TASK, _TORCH_LOOP_PROTO, _TORCH_LOOP),
}
ALL_EXAMPLES = (EXAMPLES, ARGS_EXAMPLES, SCAFFOLD_EXAMPLES, LOOP_EXAMPLES)   # every worked example a variant shows


ABI = ("Your answer is one complete .cu file. The harness compiles it with nvcc and calls the exported host "
       "function with device pointers that are already allocated (input arrays hold the data, output arrays are "
       "yours to fill) and with the sizes as integer arguments. The function launches your kernels on `stream` "
       "and returns cudaGetLastError().")


_KERNEL_ARGS_RULE = ("- A kernel sees only its own parameters: pass it every size and scalar it uses (`n`, `eps`, the "
                     "`x_d0`, `x_d1`, ... dimensions) as kernel arguments. The exported function's parameters are "
                     "not visible inside a kernel.")


def rules(task: Task, kernel_args: bool = False) -> str:
    """The rules of the ABI, one per line (the same for every task but for the names in them); kernel_args adds
    the rule that kernels receive every size and scalar they use (worked_args)."""
    return "\n".join([
        ("- Launch every kernel on the given stream: `kernel<<<blocks, threads, shared_bytes, stream>>>(...)`. Never "
         "use another stream, cudaDeviceSynchronize, cudaMalloc, host memory or a library (cuBLAS, cuDNN, CUTLASS, "
         "Thrust); printing is allowed but not needed."),
        (f"- Give each kernel its own name, such as `{task.entry}_kernel`: a kernel named `{task.entry}` does not "
         "compile beside the exported function."),
        ("- Copy the exported function's parameter list exactly. Input arrays arrive as `const` pointers, so declare "
         "the kernel parameters that receive them `const` too."),
        ("- Every size you use comes from the integer arguments: declare each variable you use; there are no "
         "predefined macros or globals."),
        *([_KERNEL_ARGS_RULE] if kernel_args else []),
        "- Index with `long long` when sizes multiply past 2^31.",
    ])


def example_block(task: Task, examples: dict = EXAMPLES) -> str:
    what, src, proto, answer = examples[task.track]
    lang = _LANG[task.track][1]
    return (f"Example. For the {what}\n\n```{lang}\n{src}\n```\n\nexporting `{proto};`, a complete answer is:\n\n"
            f"```cuda\n{answer}\n```")


# ---- variants ----------------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class PromptVariant:
    """A way to pose tasks: the system message, the first user message and the refinement message."""
    name: str
    system: str
    task_prompt: Callable[[Task], str]
    feedback_prompt: Callable[[Task | None, str, str | None], str]   # (task, feedback, status) -> text
    description: str = ""

    def messages(self, task: Task, history: Sequence[tuple] = ()) -> list[dict]:
        """Chat messages for the next turn; `history` holds (answer, feedback) or (answer, feedback, status)."""
        msgs = [{"role": "system", "content": self.system}, {"role": "user", "content": self.task_prompt(task)}]
        for item in history:
            answer, feedback = item[0], item[1]
            status = item[2] if len(item) > 2 else None
            msgs.append({"role": "assistant", "content": answer})
            msgs.append({"role": "user", "content": self.feedback_prompt(task, feedback, status)})
        return msgs


PROMPTS: dict[str, PromptVariant] = {}
DEFAULT = "scaffold"   # chosen on the ladder of 2026-12-07 (README "Zero-shot ladder")


def register(variant: PromptVariant) -> PromptVariant:
    PROMPTS[variant.name] = variant
    return variant


def get(name: str = DEFAULT) -> PromptVariant:
    """The registered variant `name`; an unknown name is a ValueError naming the registered ones."""
    if isinstance(name, PromptVariant):
        return name
    if name not in PROMPTS:
        raise ValueError(f"unknown prompt {name!r}; registered prompts: {', '.join(sorted(PROMPTS))}")
    return PROMPTS[name]


def _plain_task(task: Task, config_index: int = -1) -> str:
    kind, _ = _LANG[task.track]
    return (f"Write a CUDA implementation of this {kind}:\n\n{source_block(task)}\n\n"
            f"Arguments:\n{describe_signature(task)}\n\nTypical sizes: {sizes_line(task, config_index)}.\n\n"
            f"Export exactly this host function, which launches your kernels on `stream` and returns "
            f"cudaGetLastError():\n\n```cuda\n{task.c_prototype()};\n```\n\n"
            "Arrays are device pointers. Do not use cuBLAS, cuDNN, Thrust or other libraries; do not "
            "allocate host memory or synchronise the device.")


def _plain_feedback(task: Task | None, feedback: str, status: str | None = None) -> str:
    return (f"The harness evaluated your last answer:\n\n{feedback.strip()}\n\n"
            "Improve it: fix any error first, then make it faster. Answer with the complete translation unit "
            "in one ```cuda code block.")


def _posed(task: Task, kernel_args: bool, examples: dict, ending: str) -> str:
    """The ABI, its rules, the worked example, the task with its arguments and sizes, then `ending` (what to start
    from) and the answer's format: the first user message of worked_example, worked_args and scaffold."""
    kind, _ = _LANG[task.track]
    return (f"{ABI}\n\nRules:\n{rules(task, kernel_args)}\n\n{example_block(task, examples)}\n\n"
            f"Now the task. Write a fast CUDA implementation of this {kind}:\n\n{source_block(task)}\n\n"
            f"Arguments of the exported function:\n{describe_signature(task)}\n\n"
            f"Typical sizes: {sizes_line(task)}.\n\n{ending}\n\n"
            "Answer with the complete .cu file in one ```cuda code block.")


def _example_task(task: Task, kernel_args: bool = False) -> str:
    headers = _type_headers(task)
    need = f"\n\nIts types need {' and '.join(f'`#include {h}`' for h in headers)}." if headers else ""
    return _posed(task, kernel_args, ARGS_EXAMPLES if kernel_args else EXAMPLES,
                  f"Export exactly this host function:\n\n```cuda\n{task.c_prototype()};\n```{need}")


# an object-like macro with a value: `#define STRIDE 2` (not `#define MAX(a, b) ...`, not a bare `#define FLAG`)
_CONSTANT = re.compile(r"^[ \t]*#[ \t]*define[ \t]+[A-Za-z_]\w*(?![\w(])[ \t]+\S.*$", re.MULTILINE)


def source_constants(task: Task) -> list[str]:
    """The `#define NAME value` lines of a C task's source: compile-time constants its reference is written with
    (a scan's STRIDE, an n-body's DIM, baked per task), which an answer compiled on its own must define as well."""
    if _LANG.get(task.track, ("", ""))[1] != "c":
        return []
    return [m.group(0).strip() for m in _CONSTANT.finditer(task.source)]


def skeleton(task: Task) -> str:
    """scaffold's starting file for `task`: the source's compile-time constants (source_constants), a kernel
    `ENTRY_kernel` taking every parameter of the exported function but the stream (same names, same order), and the
    exported function launching it on `stream` with all of them; the kernel body and the amount of work are left
    as TODOs."""
    kernel_params = [(f"{'const ' if a.role == 'in' else ''}{a.c_type}* __restrict__ {a.name}" if a.is_array
                      else f"{a.c_type} {a.name}") for a in task.signature]
    names = ", ".join(a.name for a in task.signature)
    kernel = f"{task.entry}_kernel"
    constants = "".join(f"{line}\n" for line in source_constants(task))
    return (f"{_includes(task)}{constants}\n__global__ void {kernel}({', '.join(kernel_params)}) {{\n"
            "    // TODO: compute the outputs\n}\n\n"
            f"{task.c_prototype()} {{\n    const int threads = 256;\n"
            f"    long long work = {_output_elements(task)}\n"
            "    long long blocks = (work + threads - 1) / threads;\n    if (blocks > 65535) blocks = 65535;\n"
            "    if (blocks < 1) blocks = 1;\n"
            f"    {kernel}<<<(int)blocks, threads, 0, stream>>>({names});\n"
            "    return (int)cudaGetLastError();\n}")


# headers that declare the C types of the signature beyond cuda_runtime.h (nvcc has no uint8_t, __half or
# __nv_bfloat16 without them; g++ on the cpu backend is laxer)
_TYPE_HEADERS = (("int8_t", "<cstdint>"), ("int16_t", "<cstdint>"), ("__half", "<cuda_fp16.h>"),
                 ("__nv_bfloat16", "<cuda_bf16.h>"))


def _type_headers(task: Task) -> list[str]:
    """The headers the signature's C types need beyond cuda_runtime.h (`<cstdint>` for uint8_t, ...)."""
    types = {a.c_type for a in task.signature}
    return list(dict.fromkeys(h for t, h in _TYPE_HEADERS if any(t in c for c in types)))


def _includes(task: Task) -> str:
    """The skeleton's #include lines: cuda_runtime.h and what the signature's types need."""
    return "".join(f"#include {h}\n" for h in ("<cuda_runtime.h>", *_type_headers(task)))


def _output_elements(task: Task) -> str:
    """The skeleton's `work` line: the element count of the first output array written with the export's own
    arguments (`(long long)out_d0 * out_d1;`, `(long long)rows;`), so a kernel left with it launches enough blocks;
    `0;` with a TODO when a dimension is not an argument."""
    by_value = {str(a.value): a.name for a in task.signature if not a.is_array}
    out = next((a for a in task.signature if a.is_array and a.role != "in"), None)
    dims = [by_value.get(str(d), str(d) if str(d).isdigit() else None) for d in (out.shape if out else ())]
    if not dims or None in dims:
        return "0;  // TODO: how many threads the kernel needs"
    return f"(long long){' * '.join(dims)};  // one thread per element of {out.name}: change it to fit your kernel"


def _scaffold_task(task: Task, examples: dict = SCAFFOLD_EXAMPLES) -> str:
    return _posed(task, True, examples,
                  "Start from this skeleton. Its kernel already receives every argument and its exported function has "
                  "exactly the required name and parameters: keep those, fill in the TODOs, and change the grid, add "
                  f"shared memory or more kernels where that makes it faster.\n\n```cuda\n{skeleton(task)}\n```")


_ASK = {"ok": "It is correct. Make it faster without changing what it computes.",
        "compile_error": "Fix the compilation errors.",
        "hack": "Remove what the harness rejected; do the work in your own kernels on `stream`.",
        "wrong": "Fix the result: find where it differs from the reference.",
        "runtime_error": "Fix the error: check every index against the sizes.",
        "timeout": "Make it finish: check the loop bounds and the grid size."}


def _example_feedback(task: Task | None, feedback: str, status: str | None = None) -> str:
    ask = _ASK.get(status, "Fix what failed first; once it is correct, make it faster.")
    proto = f"\n\nIt must still export exactly:\n\n```cuda\n{task.c_prototype()};\n```" if task is not None else ""
    return (f"The harness checked your last answer:\n\n{feedback.strip()}\n\n{ask} Write the whole .cu file again, "
            f"not only the changed lines.{proto}\n\nAnswer with the complete .cu file in one ```cuda code block.")


register(PromptVariant(
    "plain", PLAIN_SYSTEM, _plain_task, _plain_feedback,
    "the task, its arguments and the exported prototype (the prompt up to 2026-12-07)"))
register(PromptVariant(
    "worked_example", SYSTEM, _example_task, _example_feedback,
    "the ABI stated once, its rules, a complete worked example of the task's track, then the task and the exact "
    "prototype; refinement turns name what failed and ask for the whole file"))
register(PromptVariant(
    "worked_args", SYSTEM, functools.partial(_example_task, kernel_args=True), _example_feedback,
    "worked_example whose examples pass every size and scalar to the kernel (a 2-D torch example, a C example with "
    "a scalar), with a rule saying a kernel sees only its own parameters"))

register(PromptVariant(
    "scaffold", SYSTEM, _scaffold_task, _example_feedback,
    "worked_args whose task ends with a skeleton built from the signature: a kernel named ENTRY_kernel taking every "
    "argument of the export, launched on `stream` by the exact export; the model fills in the kernel and the grid"))
register(PromptVariant(
    "scaffold_loop", SYSTEM, functools.partial(_scaffold_task, examples=LOOP_EXAMPLES), _example_feedback,
    "scaffold whose worked examples compute each output element with a loop over its inputs (a scaled "
    "matrix-vector product, pairwise squared distances): the pattern of matmuls, reductions, norms and convolutions"))


# ---- module-level shortcuts for the default variant ---------------------------------------------------------

def task_prompt(task: Task, prompt: str = DEFAULT) -> str:
    """The first-turn user message for `task` under the variant `prompt`."""
    return get(prompt).task_prompt(task)


def feedback_prompt(feedback: str, task: Task | None = None, status: str | None = None, prompt: str = DEFAULT) -> str:
    """The user message of a refinement turn: the harness feedback on the previous attempt."""
    return get(prompt).feedback_prompt(task, feedback, status)


def messages(task: Task, history: Sequence[tuple] = (), prompt: str = DEFAULT) -> list[dict]:
    """Chat messages for the next turn under the variant `prompt`; see PromptVariant.messages."""
    return get(prompt).messages(task, history)
