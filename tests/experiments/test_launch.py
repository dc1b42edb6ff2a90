"""absl launches: config files with overrides, workdir contents, determinism and resume."""
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _launch(workdir, *overrides, check=True, crash_at=-1):
    cmd = [sys.executable, "-m", "tests.experiments.toy.run", f"--workdir={workdir}", *overrides]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={"JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin", "HOME": str(workdir),
                               "TOY_CRASH_AT": str(crash_at)}, check=False)
    if check:
        assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def _losses(workdir):
    rows = [json.loads(x) for x in (Path(workdir) / "metrics.jsonl").read_text().splitlines()]
    return [(r["step"], r["loss"]) for r in rows]


def test_workdir_contents_overrides_and_determinism(tmp_path):
    _launch(tmp_path / "a", "--config.opt.lr=0.05", "--config.steps=4")
    meta = json.loads((tmp_path / "a" / "config.json").read_text())
    assert meta["config"]["opt"]["lr"] == 0.05 and meta["config"]["steps"] == 4
    assert meta["name"] == "toy" and "jax" in meta["versions"] and "commit" in meta["git"]
    assert sorted(p.name for p in (tmp_path / "a" / "checkpoints").iterdir() if p.name.isdigit()) == ["1", "2", "3"]
    assert any((tmp_path / "a" / "tensorboard").iterdir())
    _launch(tmp_path / "b", "--config.opt.lr=0.05", "--config.steps=4")
    assert _losses(tmp_path / "a") == _losses(tmp_path / "b")
    assert _losses(tmp_path / "a")[-1][1] < _losses(tmp_path / "a")[0][1]  # it learns


def test_killed_run_resumes_to_the_same_metrics(tmp_path):
    _launch(tmp_path / "full")
    crashed = _launch(tmp_path / "resumed", crash_at=3, check=False)
    assert crashed.returncode == 17
    assert [s for s, _ in _losses(tmp_path / "resumed")] == [0, 1, 2]
    refused = _launch(tmp_path / "resumed", "--config.opt.lr=0.2", check=False)
    assert refused.returncode == 2 and "different config" in refused.stderr and "opt.lr" in refused.stderr
    _launch(tmp_path / "resumed")
    assert _losses(tmp_path / "resumed") == _losses(tmp_path / "full")
    meta = json.loads((tmp_path / "resumed" / "config.json").read_text())
    assert len(meta["resumes"]) == 1


def test_bad_override_is_reported(tmp_path):
    proc = _launch(tmp_path / "x", "--config.no_such_field=1", check=False)
    assert proc.returncode != 0 and "no_such_field" in proc.stderr


_CACHED_JIT = """
import sys, jax, jax.numpy as jnp
from experiments.launch import compilation_cache
hits = []
jax.monitoring.register_event_listener(lambda name, **kw: hits.append(name) if name.endswith("cache_hits") else None)
assert compilation_cache(sys.argv[1], min_compile_s=0.0) == sys.argv[1]
print(float(jax.jit(lambda x: jnp.tanh(x @ x.T).sum())(jnp.ones((32, 32)))), len(hits))
"""


def test_persistent_compilation_cache_is_written_then_read(tmp_path):
    from experiments.launch import compilation_cache
    assert compilation_cache("off") is None
    (tmp_path / "file").write_text("")
    assert compilation_cache(str(tmp_path / "file" / "jax")) is None   # not a directory: warned, no cache
    cache = tmp_path / "jax"
    runs = [subprocess.run([sys.executable, "-c", _CACHED_JIT, str(cache)], cwd=REPO, capture_output=True, text=True,
                           timeout=120, env={"JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
                           check=False)
            for _ in range(2)]
    assert all(r.returncode == 0 for r in runs), runs[-1].stderr[-2000:]
    (v1, hits1), (v2, hits2) = (r.stdout.split() for r in runs)
    assert v1 == v2 and hits1 == "0" and int(hits2) >= 1   # the second process loads what the first compiled
    assert any(p.name.endswith("-cache") for p in cache.iterdir())
