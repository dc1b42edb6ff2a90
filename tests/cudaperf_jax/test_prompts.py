"""Turn prompts and solution extraction."""
import json
from pathlib import Path

from cudaperf_jax.rl import prompts
from kernels_harness.tasks.schema import load_task

SMOKE = Path(__file__).resolve().parents[2] / "experiments" / "suites" / "smoke"


def test_prompt_states_the_abi_and_the_source():
    task = load_task(SMOKE / "smoke_saxpy.json")
    text = prompts.task_prompt(task)
    assert 'extern "C" int saxpy(int n, float a, const float* x, float* y, cudaStream_t stream);' in text
    assert "y[i] = a * x[i] + y[i]" in text and "N=16777216" in text
    msgs = prompts.messages(task, [("```cuda\nint x;\n```", "compile_error: expected ';'")])
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"]
    assert "compile_error" in msgs[-1]["content"]


def test_extract_solution_takes_the_longest_block_or_an_unterminated_one():
    text = "Here:\n```cpp\nshort\n```\nand\n```cuda\n__global__ void k() {}\nint main2;\n```\n"
    assert prompts.extract_solution(text) == "__global__ void k() {}\nint main2;\n"
    assert prompts.extract_solution("```cuda\n__global__ void k() {") == "__global__ void k() {\n"
    assert prompts.extract_solution("no fences at all") == "no fences at all\n"
    assert json.dumps(prompts.extract_solution(""))  # never raises
