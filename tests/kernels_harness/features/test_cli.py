"""python -m kernels_harness.features: summaries, JSON, one-sentence errors."""
import json
from pathlib import Path

import pytest

from kernels_harness.features import parse
from kernels_harness.features.__main__ import main

TASK = str(Path(__file__).with_name("data") / "feat_sum.json")


@pytest.mark.skipif(parse.parser() is None, reason="tree-sitter CUDA is not installed")
def test_cli_summaries_and_json(capsys, tmp_path):
    assert main([TASK, "--all", "--no-compile"]) == 0
    out = capsys.readouterr().out
    assert out.count("score ") == 4 and "atomic_each: score" in out and "serialises" in out
    src = tmp_path / "cand.cu"
    src.write_text("__global__ void k(float* x) { if (threadIdx.x < 3) __syncthreads(); }\n")
    assert main([TASK, str(src), "--json", "--no-compile"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["name"] == "cand.cu" and d["components"]["sync"] == 0.0


def test_cli_errors_are_one_sentence(capsys):
    assert main(["missing.json"]) == 2
    assert capsys.readouterr().err.strip() == "error: task file 'missing.json' does not exist"
    assert main([TASK, "--impl", "nope", "--no-compile"]) == 2
    assert "has no implementation 'nope'" in capsys.readouterr().err
