"""benchmarks/emulation.py runs, writes its JSON, and shows the plain-loop path is the cheap one."""
import importlib.util
import json
from pathlib import Path

BENCH = Path(__file__).resolve().parents[3] / "benchmarks" / "emulation.py"


def test_quick_benchmark_reports_throughput(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("emulation_benchmark", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["--quick", "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "emulation.json").read_text())["rows"]
    assert {r["kernel"] for r in rows} == {"barrier-free", "barrier-heavy", "shuffle-heavy"}
    assert all("error" not in r and r["threads_per_s"] > 0 for r in rows)
    per_thread = {r["kernel"]: r["threads_per_s"] for r in rows if r["host_threads"] == 1}
    assert per_thread["barrier-free"] > 5 * per_thread["barrier-heavy"]   # no fibers without barriers
    assert "threads/s" in capsys.readouterr().out
