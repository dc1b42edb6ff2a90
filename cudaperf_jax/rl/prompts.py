"""Turn prompts: a task (and, after the first turn, the feedback on the last attempt) -> chat messages;
and the reverse: a model completion -> the CUDA source it contains.
"""
from __future__ import annotations

import re

from kernels_harness.tasks.schema import Task

SYSTEM = ("You are an expert CUDA engineer. You translate programs into fast, correct CUDA C++ kernels "
          "for an NVIDIA H100/H200 (sm_90). Answer with one ```cuda code block holding a complete "
          "translation unit.")

_LANG = {"c2cuda": "C function", "torch2cuda": "PyTorch module"}


def describe_signature(task: Task) -> str:
    lines = []
    for a in task.signature:
        if a.is_array:
            shape = " x ".join(str(s) for s in a.shape) or "scalar array"
            lines.append(f"- `{a.name}`: {a.role} array of {a.dtype}, shape [{shape}]")
        else:
            lines.append(f"- `{a.name}`: {a.dtype} scalar (= {a.value})")
    return "\n".join(lines)


def task_prompt(task: Task, config_index: int = -1) -> str:
    """The first-turn user message for `task` (sizes from its largest config by default)."""
    cfg = task.configs[config_index]
    sizes = ", ".join(f"{k}={v}" for k, v in cfg.items() if k != "name")
    lang = "c" if task.track == "c2cuda" else "python"
    return (f"Write a CUDA implementation of this {_LANG[task.track]}:\n\n```{lang}\n{task.source.strip()}\n```\n\n"
            f"Arguments:\n{describe_signature(task)}\n\nTypical sizes: {sizes}.\n\n"
            f"Export exactly this host function, which launches your kernels on `stream` and returns "
            f"cudaGetLastError():\n\n```cuda\n{task.c_prototype()};\n```\n\n"
            "Arrays are device pointers. Do not use cuBLAS, cuDNN, Thrust or other libraries; do not "
            "allocate host memory or synchronise the device.")


def feedback_prompt(feedback: str) -> str:
    """The user message of a refinement turn: the harness feedback on the previous attempt."""
    return (f"The harness evaluated your last answer:\n\n{feedback.strip()}\n\n"
            "Improve it: fix any error first, then make it faster. Answer with the complete translation unit "
            "in one ```cuda code block.")


def messages(task: Task, history: list[tuple[str, str]] = ()) -> list[dict]:
    """Chat messages for the next turn; `history` holds (assistant answer, feedback) pairs."""
    msgs = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task_prompt(task)}]
    for answer, feedback in history:
        msgs.append({"role": "assistant", "content": answer})
        msgs.append({"role": "user", "content": feedback_prompt(feedback)})
    return msgs


_BLOCK = re.compile(r"```[ \t]*(?:cuda|cu|c\+\+|cpp|c)?[ \t]*\n(.*?)(?:```|\Z)", re.S | re.I)


def extract_solution(completion: str) -> str:
    """The CUDA source in a completion: the longest fenced block, else the whole text."""
    blocks = [b.strip() for b in _BLOCK.findall(completion)]
    blocks = [b for b in blocks if b]
    if blocks:
        return max(blocks, key=len) + "\n"
    return completion.strip() + "\n"
