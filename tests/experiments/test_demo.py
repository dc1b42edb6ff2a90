"""The main job end to end on a tiny random policy (the real Qwen2.5-Coder-0.5B run is `make demo` / the slow test)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _tiny_policy_dir(path: Path) -> Path:
    from tests.cudaperf_jax.models import tiny
    tiny.hf_model("llama").save_pretrained(path)
    tiny.tokenizer().save_pretrained(path)
    return path


def _demo(workdir, *overrides, env_extra=None):
    cmd = [sys.executable, "-m", "experiments.demo", f"--workdir={workdir}", *overrides]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900,
                          env={"JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin", "HOME": str(workdir),
                               **(env_extra or {})}, check=False)


def test_demo_runs_end_to_end_and_resumes(tmp_path):
    model = _tiny_policy_dir(tmp_path / "policy")
    args = [f"--config.model={model}", "--config.max_tasks=1", "--config.samples_per_task=2",
            "--config.turns=2", "--config.max_new_tokens=24", "--config.backend=cpu", "--config.rl_steps=1",
            "--config.rl_turns=2", "--config.sft_steps=1",
            "--config.eval_tasks=1", "--config.max_prompt_tokens=4096"]
    proc = _demo(tmp_path / "run", *args)
    assert proc.returncode == 0, proc.stderr[-4000:]
    work = tmp_path / "run"
    refs = json.loads((work / "references.json").read_text())
    assert len(refs) == 2 and all((r["status"] == "ok") == (r["expected"] in (None, "correct"))
                                  for r in refs.values()), refs   # demo_relu: a correct and a wrong implementation
    cands = [json.loads(x) for x in (work / "candidates.jsonl").read_text().splitlines()]
    assert len(cands) == 2 * 2 and {c["turn"] for c in cands} == {0, 1}
    assert all(c["status"] in ("ok", "wrong", "compile_error", "runtime_error", "timeout", "hack") for c in cands)
    assert all(c["feedback"] for c in cands)  # every verdict carries feedback for the next turn
    metrics = [json.loads(x) for x in (work / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [0] and "turn1/compiled" in metrics[0]
    summary = json.loads((work / "summary.json").read_text())
    assert summary["candidates"] == 4 and (work / "verdicts.png").stat().st_size > 1000
    # the method's stages: RL over 2 turns (metrics per turn, curves) and the held-out evaluation per turn
    rl = [json.loads(x) for x in (work / "rl" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in rl] == [0] and "turn1/reward/total" in rl[0] and rl[0]["notes/ranker"] == "off"
    assert (work / "rl" / "rl_curves.png").stat().st_size > 1000 and (work / "eval.png").stat().st_size > 1000
    ev = json.loads((work / "eval.json").read_text())
    assert len(ev["tasks"]) == 1 and ev["tasks"][0].startswith(("scan", "nbody"))
    assert set(ev["per_turn"]) == {"start/turn0", "start/turn1", "rl/turn0", "rl/turn1"}
    assert (work / "sft").exists() and "SFT stage skipped" not in proc.stderr
    held = [json.loads(x) for x in (work / "eval_candidates.jsonl").read_text().splitlines()]
    assert len(held) == 2 * 2 * 2 and {h["policy"] for h in held} == {"start", "rl"}   # policies x turns x samples
    assert all(h["source"] and h["status"] for h in held)
    table = proc.stderr[proc.stderr.index("[demo] results"):]
    assert "zero-shot, turn 1" in table and "held-out, rl policy, turn 1" in table and " n " in table
    assert ("first correct model-written kernel" in proc.stderr) == (work / "first_correct.cu").exists()
    assert "decode turn 0" in proc.stderr and "tok/s" in proc.stderr          # generation shows its progress
    # a second launch into the finished workdir resumes: no step is redone, outputs unchanged
    again = _demo(work, *args)
    assert again.returncode == 0, again.stderr[-3000:]
    assert [json.loads(x)["step"] for x in (work / "metrics.jsonl").read_text().splitlines()] == [0]
    assert len((work / "candidates.jsonl").read_text().splitlines()) == 4
    assert [json.loads(x)["step"] for x in (work / "rl" / "metrics.jsonl").read_text().splitlines()] == [0]


def test_demo_reports_a_bad_suite_in_one_line(tmp_path):
    (tmp_path / "suite").mkdir()
    (tmp_path / "suite" / "broken.json").write_text('{"id": "x", "track": "c2cuda"}')
    proc = _demo(tmp_path / "run", f"--config.suite={tmp_path / 'suite'}")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith("error: task 'x' is missing the field 'entry'")


def test_demo_reports_a_missing_model_in_one_line(tmp_path):
    proc = _demo(tmp_path / "run", "--config.model=/nonexistent/policy", "--config.check_references=False",
                 "--config.max_tasks=1")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == ("error: no checkpoint at /nonexistent/policy; pass a registered "
                                                    "model name (smollm2-135m, qwen2.5-coder-0.5b, qwen2.5-coder-1.5b)"
                                                    ", a Hugging Face directory or a .gguf file")


@pytest.mark.slow
def test_demo_with_the_default_policy(tmp_path):
    import os
    env = {"CUDAPERF_CACHE": os.environ.get("CUDAPERF_CACHE", str(Path.home() / ".cache" / "cudaperf"))}
    proc = _demo(tmp_path / "run", "--config.max_tasks=1", "--config.turns=1", "--config.max_new_tokens=64",
                 "--config.rl_steps=0", "--config.eval_tasks=0", "--config.sft_steps=0", env_extra=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["candidates"] == 2
