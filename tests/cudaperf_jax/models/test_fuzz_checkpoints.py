"""Bad input (issue 26): fuzzed Hugging Face directories (config.json, safetensors), GGUF files and training-run
checkpoint directories either load or are rejected with CheckpointError / ConfigError in one line, never another
exception (hypothesis, small budgets)."""
import json
import random
import shutil

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cudaperf_jax.models.config import ConfigError
from cudaperf_jax.models.hf_io import CheckpointError
from cudaperf_jax.models.loading import load_policy, read_checkpoint

SMALL = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**40, 2**40) | st.floats() | st.text(max_size=10),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
                    max_leaves=8)
TOKENS = np.array([[5, 17, 42]], np.int32)


def rejected_in_one_line(fn, *args, **kw):
    """fn() returns, or raises CheckpointError/ConfigError with a one-line message; anything else fails."""
    try:
        return fn(*args, **kw)
    except (CheckpointError, ConfigError) as e:
        msg = str(e)
        assert msg and "\n" not in msg and len(msg) < 1500, msg
        return None


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    from flax import nnx

    from cudaperf_jax.experiment import open_run
    from cudaperf_jax.models.loading import write_run_policy
    from tests.cudaperf_jax.models import tiny
    from tests.cudaperf_jax.models.test_gguf_io import write_tiny_gguf
    root = tmp_path_factory.mktemp("fuzz_ckpt")
    hf = tiny.hf_model("llama")
    hf.save_pretrained(root / "hf")
    write_tiny_gguf(root / "tiny.gguf", "llama", hf)
    model, _ = load_policy(root / "hf", tokenizer=False)
    (root / "run").mkdir()
    write_run_policy(root / "run", model)
    run = open_run(root / "run", {"fuzz": 1}, name="t")
    run.save(0, {"params": nnx.state(model, nnx.Param)})
    run.close()
    assert load_policy(root / "run", tokenizer=False)[0] is not None
    return root, np.asarray(model(TOKENS)).shape


def _mutate(d: dict, rnd: random.Random, value, delete: bool):
    key = rnd.choice(sorted(d))
    if delete:
        del d[key]
    else:
        d[key] = value


@SMALL
@given(seed=st.integers(0, 10**6), value=JSON, delete=st.booleans(), n=st.integers(1, 3))
def test_hf_config_json_mutations(sources, tmp_path_factory, seed, value, delete, n):
    root, ref = sources
    d = tmp_path_factory.mktemp("hf")
    shutil.copytree(root / "hf", d, dirs_exist_ok=True)
    cfg = json.loads((d / "config.json").read_text())
    rnd = random.Random(seed)
    for _ in range(n):
        _mutate(cfg, rnd, value, delete)
    (d / "config.json").write_text(json.dumps(cfg))
    out = rejected_in_one_line(load_policy, d, tokenizer=False)
    if out is not None:
        assert np.asarray(out[0](TOKENS)).shape == ref


def damaged(data: bytes, mode: str, rnd: random.Random, header: tuple[int, int]) -> bytes:
    """data cut at a random point, with random bytes here and there or in the header span, or replaced."""
    data = bytearray(data)
    if mode == "truncate":
        return bytes(data[:rnd.randrange(len(data))])
    if mode in ("flip", "header"):
        lo, hi = (0, len(data)) if mode == "flip" else header
        for _ in range(rnd.randint(1, 16)):
            data[rnd.randrange(lo, min(hi, len(data)))] = rnd.randrange(256)
        return bytes(data)
    if mode == "empty":
        return b""
    if mode == "text":
        return b'{"not": "safetensors"}'
    return b"GGUF" + bytes(rnd.randrange(256) for _ in range(rnd.randrange(300)))


@SMALL
@given(seed=st.integers(0, 10**6), mode=st.sampled_from(["truncate", "flip", "header", "empty", "text"]))
def test_damaged_safetensors(sources, tmp_path_factory, seed, mode):
    root, _ = sources
    d = tmp_path_factory.mktemp("hf")
    shutil.copytree(root / "hf", d, dirs_exist_ok=True)
    f = d / "model.safetensors"
    f.write_bytes(damaged(f.read_bytes(), mode, random.Random(seed), (0, 400)))
    rejected_in_one_line(load_policy, d, tokenizer=False)


@SMALL
@given(seed=st.integers(0, 10**6), mode=st.sampled_from(["truncate", "flip", "header", "random"]))
def test_damaged_gguf(sources, tmp_path_factory, seed, mode):
    root, _ = sources
    f = tmp_path_factory.mktemp("gguf") / "m.gguf"
    f.write_bytes(damaged((root / "tiny.gguf").read_bytes(), mode, random.Random(seed), (4, 200)))
    rejected_in_one_line(read_checkpoint, f)


# a damaged file must not leave Orbax reads running into a closed event loop (cudaperf_jax/experiment/orbax_loop.py)
@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
@SMALL
@given(seed=st.integers(0, 10**6), value=JSON, delete=st.booleans(),
       damage=st.sampled_from(["policy", "truncate", "delete", "garbage", "none"]))
def test_damaged_run_directory(sources, tmp_path_factory, seed, value, delete, damage):
    root, _ = sources
    d = tmp_path_factory.mktemp("run")
    shutil.copytree(root / "run", d, dirs_exist_ok=True)
    rnd = random.Random(seed)
    files = sorted(p for p in (d / "checkpoints" / "0").rglob("*") if p.is_file())
    if damage == "policy":
        meta = json.loads((d / "policy.json").read_text())
        target = meta["model_config"] if rnd.random() < 0.7 else meta
        _mutate(target, rnd, value, delete)
        (d / "policy.json").write_text(json.dumps(meta))
    elif damage == "truncate":
        f = rnd.choice(files)
        f.write_bytes(f.read_bytes()[:rnd.randrange(max(1, f.stat().st_size))])
    elif damage == "delete":
        rnd.choice(files).unlink()
    elif damage == "garbage":
        f = rnd.choice(files)
        f.write_bytes(bytes(rnd.randrange(256) for _ in range(max(1, f.stat().st_size))))
    rejected_in_one_line(load_policy, d, tokenizer=False)


def test_not_a_checkpoint_at_all(tmp_path):
    (tmp_path / "x.bin").write_bytes(b"\0" * 10)
    (tmp_path / "empty").mkdir()
    (tmp_path / "bad.gguf").write_bytes(b"")
    for p in (tmp_path / "x.bin", tmp_path / "empty", tmp_path / "bad.gguf", tmp_path / "missing"):
        with pytest.raises(CheckpointError):
            load_policy(p, tokenizer=False)


def test_run_directory_loads_without_warnings(sources):
    """The restore gives Orbax each array's sharding: no "Sharding info not provided" (read from the checkpoint's
    sharding file, which Orbax calls unsafe on another topology), and the same parameters as the source."""
    import warnings

    import jax
    from flax import nnx
    root, _ = sources
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model, _ = load_policy(root / "run", tokenizer=False)
    assert not [w for w in caught if "Sharding" in str(w.message)], [str(w.message)[:100] for w in caught]
    want, _ = load_policy(root / "hf", tokenizer=False)
    for a, b in zip(jax.tree.leaves(nnx.state(model, nnx.Param)), jax.tree.leaves(nnx.state(want, nnx.Param))):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
