"""Prompt variants, their worked examples (real solutions in the ABI, judged by the harness) and solution extraction."""
import json
from pathlib import Path

import pytest

from cudaperf_jax import prompts
from cudaperf_jax.prompts import variants
from kernels_harness.tasks.schema import Task, load_task

SMOKE = Path(__file__).resolve().parents[3] / "experiments" / "suites" / "smoke"

VEC_ADD = {"id": "vec_add", "track": "c2cuda", "entry": "vec_add", "source": variants._C_EXAMPLE_TASK,
           "signature": [{"name": "n", "role": "scalar", "dtype": "int32", "value": "N"},
                         {"name": "a", "role": "in", "dtype": "float32", "shape": ["N"]},
                         {"name": "b", "role": "in", "dtype": "float32", "shape": ["N"]},
                         {"name": "out", "role": "out", "dtype": "float32", "shape": ["N"]}],
           "configs": [{"N": 1000}, {"N": 65537}], "tolerance": {"atol": 1e-6, "rtol": 1e-6}}

SAXPY = {"id": "saxpy_ex", "track": "c2cuda", "entry": "saxpy", "source": variants._C_ARGS_TASK,
         "signature": [{"name": "n", "role": "scalar", "dtype": "int32", "value": "N"},
                       {"name": "alpha", "role": "scalar", "dtype": "float32", "value": "1.5"},
                       {"name": "x", "role": "in", "dtype": "float32", "shape": ["N"]},
                       {"name": "y", "role": "in", "dtype": "float32", "shape": ["N"]},
                       {"name": "out", "role": "out", "dtype": "float32", "shape": ["N"]}],
         "configs": [{"N": 1000}, {"N": 65537}], "tolerance": {"atol": 1e-5, "rtol": 1e-5}}

TORCH_ADD = ("import torch\nimport torch.nn as nn\n\n" + variants._TORCH_EXAMPLE_TASK.replace(
    "class Model(nn.Module):", "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n") +
    "\n\nbatch = 64\ndim = 1000\n\ndef get_inputs():\n    return [torch.rand(batch, dim), torch.rand(batch, dim)]\n\n"
    "def get_init_inputs():\n    return []\n")

ROW_DOT = {"id": "row_dot_ex", "track": "c2cuda", "entry": "row_dot", "source": variants._C_LOOP_TASK,
           "signature": [{"name": "rows", "role": "scalar", "dtype": "int32", "value": "R"},
                         {"name": "cols", "role": "scalar", "dtype": "int32", "value": "C"},
                         {"name": "alpha", "role": "scalar", "dtype": "float32", "value": "0.5"},
                         {"name": "a", "role": "in", "dtype": "float32", "shape": ["R", "C"]},
                         {"name": "v", "role": "in", "dtype": "float32", "shape": ["C"]},
                         {"name": "out", "role": "out", "dtype": "float32", "shape": ["R"]}],
           "configs": [{"R": 37, "C": 101}, {"R": 1000, "C": 257}], "tolerance": {"atol": 1e-4, "rtol": 1e-4}}

TORCH_PAIRWISE = ("import torch\nimport torch.nn as nn\n\n" + variants._TORCH_LOOP_TASK.replace(
    "class Model(nn.Module):", "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n") +
    "\n\nn = 67\nm = 45\ndim = 129\n\ndef get_inputs():\n    return [torch.rand(n, dim), torch.rand(m, dim)]\n\n"
    "def get_init_inputs():\n    return []\n")

TORCH_SCALE_ROWS = ("import torch\nimport torch.nn as nn\n\n" + variants._TORCH_ARGS_TASK.replace(
    "class Model(nn.Module):", "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n") +
    "\n\nrows = 67\ncols = 1003\n\ndef get_inputs():\n    return [torch.rand(rows, cols), torch.rand(rows), "
    "torch.rand(cols)]\n\ndef get_init_inputs():\n    return []\n")


def test_registry_and_the_default():
    assert set(prompts.PROMPTS) >= {"plain", "worked_example", "worked_args", "scaffold", "scaffold_loop"}
    assert prompts.DEFAULT == "scaffold" and prompts.get().name == "scaffold"
    with pytest.raises(ValueError, match="unknown prompt 'nope'; registered prompts: plain, scaffold, scaffold_loop, "
                                         "worked_args, worked_example"):
        prompts.get("nope")


@pytest.mark.parametrize("name", ["plain", "worked_example", "worked_args", "scaffold", "scaffold_loop"])
def test_every_variant_states_the_task_and_the_exact_prototype(name):
    task = load_task(SMOKE / "smoke_saxpy.json")
    text = prompts.task_prompt(task, name)
    assert 'extern "C" int saxpy(int n, float a, const float* x, float* y, cudaStream_t stream)' in text
    assert "y[i] = a * x[i] + y[i]" in text and "N=16777216" in text
    msgs = prompts.messages(task, [("```cuda\nint x;\n```", "Compilation failed:\nexpected ';'", "compile_error")],
                            prompt=name)
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"]
    assert "expected ';'" in msgs[-1]["content"] and "cuda" in msgs[-1]["content"]


def test_worked_example_prompt_states_abi_rules_example_then_task():
    task = load_task(SMOKE / "smoke_row_sum.json")
    text = prompts.task_prompt(task, "worked_example")
    order = [text.index(s) for s in ("device pointers", "Rules:", "Example.", "Now the task", "Export exactly")]
    assert order == sorted(order)
    assert "`row_sum_kernel`" in text and "stream>>>" in text and "cudaDeviceSynchronize" in text
    assert variants._C_EXAMPLE in text   # the complete example file, verbatim
    assert "sees only its own parameters" not in text


def test_worked_args_prompt_shows_kernels_receiving_their_sizes():
    """worked_args: the rule that a kernel sees only its own parameters, and examples whose kernels receive every
    size and scalar they use (a C example with a scalar, a 2-D torch example)."""
    c = prompts.task_prompt(load_task(SMOKE / "smoke_row_sum.json"), "worked_args")
    assert "sees only its own parameters" in c and variants._C_ARGS in c and variants._C_EXAMPLE not in c
    assert "saxpy_kernel<<<(int)blocks, threads, 0, stream>>>(n, alpha, x, y, out)" in c
    order = [c.index(s) for s in ("device pointers", "Rules:", "Example.", "Now the task", "Export exactly")]
    assert order == sorted(order)


def test_scaffold_prompt_hands_out_a_skeleton_whose_kernel_takes_every_argument():
    task = load_task(SMOKE / "smoke_row_sum.json")
    text = prompts.task_prompt(task, "scaffold")
    skel = variants.skeleton(task)
    assert f"```cuda\n{skel}\n```" in text and variants._C_SCAFFOLD in text and "sees only its own parameters" in text
    assert "__global__ void row_sum_kernel(int rows, int cols, const float* __restrict__ x, float* __restrict__ out)" \
        in skel
    assert task.c_prototype() + " {" in skel and "row_sum_kernel<<<(int)blocks, threads, 0, stream>>>(rows, cols, x, out)" \
        in skel
    assert "    long long work = (long long)rows;  // one thread per element of out" in skel   # R -> rows
    order = [text.index(s) for s in ("Rules:", "Example.", "Now the task", "Start from this skeleton")]
    assert order == sorted(order)


def test_scaffold_loop_is_scaffold_with_loop_examples():
    for path in ("smoke_row_sum.json", "smoke_saxpy.json"):
        task = load_task(SMOKE / path)
        loop, plain = prompts.task_prompt(task, "scaffold_loop"), prompts.task_prompt(task, "scaffold")
        assert variants._C_LOOP in loop and variants._C_SCAFFOLD not in loop
        assert loop.replace(variants.example_block(task, variants.LOOP_EXAMPLES),
                            variants.example_block(task, variants.SCAFFOLD_EXAMPLES)) == plain


def test_scaffold_skeleton_compiles_and_runs_but_computes_nothing():
    """The skeleton as handed out is a valid file in the ABI (an answer that echoes it is `wrong`, not an ABI
    failure), for a C task and for a KernelBench module with a scalar argument."""
    pytest.importorskip("torch")
    from kernels_harness.run.pool import HarnessPool
    from kernels_harness.tasks.kernelbench import import_source
    saxpy = Task.from_dict(json.loads(json.dumps(SAXPY)))
    leaky = import_source("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n"
                          "    def __init__(self, negative_slope: float = 0.01):\n        super().__init__()\n"
                          "        self.negative_slope = negative_slope\n\n    def forward(self, x):\n"
                          "        return torch.nn.functional.leaky_relu(x, negative_slope=self.negative_slope)\n\n"
                          "batch_size = 16\ndim = 1000\n\ndef get_inputs():\n    return [torch.randn(batch_size, dim)]\n\n"
                          "def get_init_inputs():\n    return []\n", "20_LeakyReLU.py")
    with HarnessPool(backend="cpu", workers=1) as pool:
        results = pool.evaluate([(t, variants.skeleton(t)) for t in (saxpy, leaky)])
    assert [r.status for r in results] == ["wrong", "wrong"], [(r.status, r.error, r.compile_log[:300]) for r in results]


def test_refinement_prompt_names_the_failure_asks_for_the_whole_file_and_repeats_the_export():
    task = load_task(SMOKE / "smoke_saxpy.json")
    v = prompts.get("worked_example")
    wrong = v.feedback_prompt(task, "Wrong result: config 1 differs", "wrong")
    assert "Wrong result: config 1 differs" in wrong and "whole .cu file" in wrong
    assert "Fix the result" in wrong and task.c_prototype() in wrong
    assert "faster" in v.feedback_prompt(task, "Correct on all 3 checked configs.", "ok")
    assert "compilation errors" in v.feedback_prompt(task, "Compilation failed:", "compile_error")


@pytest.mark.parametrize("spec, proto, answer", [(VEC_ADD, variants._C_EXAMPLE_PROTO, variants._C_EXAMPLE),
                                                  (SAXPY, variants._C_ARGS_PROTO, variants._C_ARGS),
                                                  (SAXPY, variants._C_ARGS_PROTO, variants._C_SCAFFOLD),
                                                  (ROW_DOT, variants._C_LOOP_PROTO, variants._C_LOOP)],
                         ids=["worked_example", "worked_args", "scaffold", "scaffold_loop"])
def test_c2cuda_worked_examples_are_correct_solutions(spec, proto, answer):
    """The example's task, posed as a real task, has exactly the example's prototype; the example passes the harness."""
    from kernels_harness.run.pool import HarnessPool
    task = Task.from_dict(json.loads(json.dumps(spec)))
    assert task.c_prototype() == proto
    with HarnessPool(backend="cpu", workers=1) as pool:
        (r,) = pool.evaluate([(task, answer)])
    assert r.status == "ok", (r.status, r.error, r.compile_log[:500])


@pytest.mark.parametrize("source, name, proto, answer", [
    (TORCH_ADD, "1_Add.py", variants._TORCH_EXAMPLE_PROTO, variants._TORCH_EXAMPLE),
    (TORCH_SCALE_ROWS, "1_Scale_rows_add.py", variants._TORCH_ARGS_PROTO, variants._TORCH_ARGS),
    (TORCH_SCALE_ROWS, "1_Scale_rows_add.py", variants._TORCH_ARGS_PROTO, variants._TORCH_SCAFFOLD),
    (TORCH_PAIRWISE, "1_Pairwise_sq_dist.py", variants._TORCH_LOOP_PROTO, variants._TORCH_LOOP)],
    ids=["worked_example", "worked_args", "scaffold", "scaffold_loop"])
def test_torch2cuda_worked_examples_are_correct_solutions(source, name, proto, answer):
    pytest.importorskip("torch")
    from kernels_harness.run.pool import HarnessPool
    from kernels_harness.tasks.kernelbench import import_source
    task = import_source(source, name)
    assert task.c_prototype() == proto
    with HarnessPool(backend="cpu", workers=1) as pool:
        (r,) = pool.evaluate([(task, answer)])
    assert r.status == "ok", (r.status, r.error, r.compile_log[:500])


def test_extract_solution_takes_the_longest_block_or_an_unterminated_one():
    text = "Here:\n```cpp\nshort\n```\nand\n```cuda\n__global__ void k() {}\nint main2;\n```\n"
    assert prompts.extract_solution(text) == "__global__ void k() {}\nint main2;\n"
    assert prompts.extract_solution("```cuda\n__global__ void k() {") == "__global__ void k() {\n"
    assert prompts.extract_solution("no fences at all") == "no fences at all\n"
    assert json.dumps(prompts.extract_solution(""))  # never raises



def _skeletons_compile(tasks, tmp_path):
    """Compiles the scaffold skeleton of every task (one per distinct prototype) with nvcc, grouped into as few
    files as their names allow; skips without nvcc."""
    from kernels_harness.build import nvcc
    try:
        nvcc.find_nvcc()
    except nvcc.CompilerNotFound:
        pytest.skip("needs nvcc")
    groups: list[tuple[set, list]] = []
    for t in {t.c_prototype(): t for t in tasks}.values():
        names = {t.entry, t.entry + "_kernel"}
        group = next((g for g in groups if not g[0] & names), None)
        if group is None:
            groups.append(group := (set(), []))
        group[0].update(names)
        undefs = "".join(f"\n#undef {c.split()[1]}" for c in variants.source_constants(t))   # each its own
        group[1].append(variants.skeleton(t) + undefs)
    for i, (_, skeletons) in enumerate(groups):
        res = nvcc.build_shared("\n".join(skeletons), tmp_path / f"g{i}.so")
        assert res.ok, res.log[:3000]


def test_every_kernelbench_skeleton_compiles_with_nvcc(tmp_path):
    """All 250 KernelBench tasks get a skeleton nvcc accepts: one that cannot compile (an export named like a
    math function) turns the whole task into compile errors whatever the model writes."""
    tasks = [load_task(p) for p in sorted((SMOKE.parents[2] / "data/kernelbench/tasks").glob("*.json"))]
    assert len(tasks) == 250
    _skeletons_compile(tasks, tmp_path)


def test_every_dataset_and_dtype_skeleton_compiles_with_nvcc(tmp_path):
    """The same for the built dataset (4,070 tasks, 1,236 prototypes: uint8 images, int8/int16/int64 data) and a
    task of every dtype the format has (__half and __nv_bfloat16 need their headers, uint8_t needs <cstdint>)."""
    from kernels_harness.datasets import build, shards
    from kernels_harness.tasks.schema import DTYPES
    build.build(tmp_path / "ds", validate_sample=-1, progress=False)
    tasks = list(shards.load(tmp_path / "ds"))
    for dtype in DTYPES:
        d = json.loads(json.dumps(VEC_ADD))
        d.update(id=f"copy_{dtype}", entry=f"copy_{dtype}")
        for a in d["signature"][1:]:
            a["dtype"] = dtype
        tasks.append(Task.from_dict(d))
    _skeletons_compile(tasks, tmp_path)


def test_scaffold_skeleton_carries_the_sources_compile_time_constants():
    """A C task baked with constants (`#define STRIDE 2` in a scan's source) gets them in its skeleton: an answer
    that keeps the skeleton compiles with them (the 1.5B's scan answers used STRIDE undefined, 2026-12-08).
    Function-like and valueless macros are not constants; PyTorch sources have none."""
    d = json.loads(json.dumps(ROW_DOT))
    d["source"] = ("#include <math.h>\n#define STRIDE 2\n  #  define  TILE_W   (16 * 2)\n#define SQ(a) ((a) * (a))\n"
                   "#define GUARD\n" + d["source"].replace("a[r * cols + c]", "a[r * cols * STRIDE + c * STRIDE]"))
    task = Task.from_dict(d)
    assert variants.source_constants(task) == ["#define STRIDE 2", "#  define  TILE_W   (16 * 2)"]
    skel = variants.skeleton(task)
    assert skel.startswith("#include <cuda_runtime.h>\n#define STRIDE 2\n#  define  TILE_W   (16 * 2)\n\n__global__")
    assert "SQ(" not in skel and "GUARD" not in skel
    assert f"```cuda\n{skel}\n```" in prompts.task_prompt(task, "scaffold")
    plain = Task.from_dict(json.loads(json.dumps(ROW_DOT)))
    assert variants.source_constants(plain) == [] and "#define" not in variants.skeleton(plain)
    kb = sorted((SMOKE.parents[2] / "data/kernelbench/tasks").glob("level1_*.json"))
    assert kb and all(variants.source_constants(load_task(p)) == [] for p in kb[:10])


def test_prompts_name_the_headers_a_prototype_needs():
    d = json.loads(json.dumps(VEC_ADD))
    for a in d["signature"][1:]:
        a["dtype"] = "uint8"
    u8, f32 = Task.from_dict(d), Task.from_dict(json.loads(json.dumps(VEC_ADD)))
    assert "Its types need `#include <cstdint>`." in prompts.task_prompt(u8, "worked_example")
    assert variants.skeleton(u8).startswith("#include <cuda_runtime.h>\n#include <cstdint>\n\n")
    assert "Its types need" not in prompts.task_prompt(f32, "worked_example")
    assert variants.skeleton(f32).startswith("#include <cuda_runtime.h>\n\n__global__")
