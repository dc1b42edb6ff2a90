"""benchmarks/generation.py runs end to end on the CPU with a tiny model: JSON, plot, table, and the
greedy check agrees with transformers on every token (same exported weights)."""
import importlib.util
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def test_generation_benchmark_smoke(tmp_path, monkeypatch, capsys):
    spec = importlib.util.spec_from_file_location("bench_generation", REPO / "benchmarks" / "generation.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    monkeypatch.setenv("OUT", str(tmp_path))
    res = bench.main(["--models=tiny", "--batches=1,2", "--new_tokens=5", "--hf_new_tokens=3", "--prompt_len=8",
                      "--repeats=1", "--greedy_check_tokens=6"])
    saved = json.loads((tmp_path / "generation.json").read_text())
    assert saved["models"]["tiny"]["speedup"].keys() == {"1", "2"}
    r = res["models"]["tiny"]
    assert [x["batch"] for x in r["jax"]] == [1, 2] and all(x["all_full_length"] for x in r["jax"])
    assert all(x["new_tokens"] == 3 for x in r["hf"])
    assert r["greedy_check"]["leading_agreement"] == r["greedy_check"]["jax_len"] == 6
    assert (tmp_path / "generation.png").stat().st_size > 1000
    assert "JAX e2e" in capsys.readouterr().out.splitlines()[-4]
