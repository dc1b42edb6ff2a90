"""`python -m experiments.build_dataset`: --dry_run prints JSON counts; a build writes shards + manifest."""
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _run(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "experiments.build_dataset", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout, check=False)


def test_dry_run_prints_counts_per_track_and_family():
    r = _run("--dry_run")
    assert r.returncode == 0, r.stderr[-2000:]
    counts = json.loads(r.stdout)
    assert counts["c2cuda"]["total"] >= 2900 and counts["torch2cuda"]["total"] >= 1000
    assert counts["c2cuda"]["families"]["stencil"] > 0 and counts["torch2cuda"]["families"]["softmax"] > 0
    assert sum(counts["c2cuda"]["families"].values()) == counts["c2cuda"]["total"]


def test_build_and_bad_family(tmp_path):
    r = _run(f"--out={tmp_path}", "--families=image", "--validate_sample=-1")
    assert r.returncode == 0, r.stderr[-2000:]
    m = json.loads((tmp_path / "manifest.json").read_text())
    assert {s["family"] for s in m["shards"]} == {"image"}
    assert "c2cuda" in r.stdout.splitlines()[-1] or "c2cuda" in r.stdout
    r = _run(f"--out={tmp_path}", "--families=nope")
    assert r.returncode == 2 and r.stderr.strip().startswith("error: unknown families")
