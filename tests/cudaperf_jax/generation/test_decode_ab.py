"""benchmarks/decode_ab.py on the CPU with a tiny model: each variant's programs compiled with its own DecodeKernels
coexist in one process and give the same greedy tokens."""
import importlib.util
import json
from pathlib import Path

import jax
import numpy as np
import pytest

from cudaperf_jax.kernels import DecodeKernels

REPO = Path(__file__).resolve().parents[3]


def _load(name):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", REPO / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_decode_ab_compiles_each_variant_with_its_own_config(tmp_path, monkeypatch):
    from cudaperf_jax.generation.sampler import Sampler, SamplingParams
    bench = _load("decode_ab")
    assert bench.parse_variants("a: b:path=pallas,interpret=true,unroll=2") == [
        ("a", DecodeKernels()), ("b", DecodeKernels(path="pallas", interpret=True, unroll=2))]
    for bad in ("a", ":path=xla", "a:path", "a: a:", "a:speed=2", "a:path=fast"):
        with pytest.raises(ValueError):
            bench.parse_variants(bad)
    model = _load("generation").random_model("tiny")
    sampler = Sampler(model, prompt_bucket=8, pad_id=0)
    toks = np.arange(3, 11, dtype=np.int32)[None]
    params = SamplingParams(max_new_tokens=4, temperature=0.0, stop_token_ids=())
    keys = jax.random.split(jax.random.PRNGKey(0), 1)
    mask = np.ones_like(toks, bool)
    plain = sampler.compile_programs(toks, mask, params, keys, kernels=DecodeKernels(path="xla"))
    pallas = sampler.compile_programs(toks, mask, params, keys, kernels=DecodeKernels(path="pallas", interpret=True))
    assert plain.programs[1].as_text() != pallas.programs[1].as_text()
    np.testing.assert_array_equal(np.asarray(plain()[0]), np.asarray(pallas()[0]))
    assert sampler.kernels == DecodeKernels()   # compile_programs leaves the Sampler's own config alone
    monkeypatch.setenv("OUT", str(tmp_path))
    res = bench.main(["--model=tiny", "--new_tokens=3", "--prompt_len=8", "--rounds=2", "--greedy",
                      "--variants", "base:path=xla pallas:path=pallas,interpret=1"])
    assert [r["name"] for r in res["rows"]] == ["base", "pallas"] and res["rows"][0]["median_diff_ms"] == 0
    assert all(len(r["rounds_ms"]) == 2 and r["best_ms"] > 0 for r in res["rows"])
    saved = json.loads((tmp_path / "decode_ab.json").read_text())["variants"]
    assert saved["pallas"]["path"] == "pallas" and saved["pallas"]["interpret"] is True
