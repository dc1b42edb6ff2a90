"""experiments.export and experiments.generate end to end on a tiny checkpoint with a tokenizer:
export writes a directory transformers loads with the same logits; generate --temperature=0 prints
transformers' greedy continuation; user errors are one line with exit status 2."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers as tf

from tests.cudaperf_jax.models import tiny

REPO = Path(__file__).resolve().parents[2]


def _run(*args):
    return subprocess.run([sys.executable, "-m", *args], check=False, capture_output=True, text=True, cwd=REPO, timeout=300,
                          env={"JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1",
                               "PYTHONPATH": str(REPO)})


@pytest.fixture(scope="module")
def source_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("src")
    m = tiny.hf_model("qwen2", seed=21)
    m.save_pretrained(str(d))
    tiny.tokenizer().save_pretrained(str(d))
    return d


def test_export_then_generate_matches_transformers(source_dir, tmp_path):
    out = tmp_path / "exported"
    proc = _run("experiments.export", f"--model={source_dir}", f"--out={out}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "wrote" in proc.stdout
    src = tf.AutoModelForCausalLM.from_pretrained(str(source_dir), dtype=torch.float32).eval()
    exp = tf.AutoModelForCausalLM.from_pretrained(str(out), dtype=torch.float32).eval()
    toks = torch.tensor(np.random.RandomState(0).randint(0, 320, (1, 20)))
    with torch.no_grad():
        np.testing.assert_allclose(exp(toks).logits.numpy(), src(toks).logits.numpy(), atol=1e-4, rtol=0)

    tok = tf.AutoTokenizer.from_pretrained(str(out))
    prompt = "def add(a, b):"
    ids = tok(prompt, return_tensors="pt").input_ids
    with torch.no_grad():
        want = src.generate(ids, max_new_tokens=12, do_sample=False)[0, ids.shape[1]:]
    want_text = tok.decode(want, skip_special_tokens=True)
    gen = _run("experiments.generate", f"--model={out}", f"--prompt={prompt}", "--max_new_tokens=12",
               "--temperature=0")
    assert gen.returncode == 0, gen.stderr[-2000:]
    assert gen.stdout.rstrip("\n") == want_text.rstrip("\n")


def test_user_errors_are_one_line(tmp_path):
    proc = _run("experiments.generate", f"--model={tmp_path / 'nope'}", "--prompt=hi")
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("error: no checkpoint at") and "Traceback" not in proc.stderr
