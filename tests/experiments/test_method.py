"""experiments/method.py: the driver's processes and lines (fast: a stage killed with what it started at its budget
or with the driver, stages that wait or do not fit the budget, a root of another plan or driver refused), and end to
end on the CPU with a tiny random policy at --size dev (slow): a run whose budget ends mid-stage, a run killed
(SIGTERM) once the SFT stage has checkpointed, `pack` within the limits of a device call, `restore` into a fresh
root that resumes the SFT run from the packed checkpoint (the same bytes) and finishes it, an evaluation there, and
`report` (tables, bootstrap intervals, plots); the whole chain, RL and the ablation included, killed inside an RL
stage and resumed on another root to the metrics of an uninterrupted run."""
import hashlib
import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ENV = {"JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin"}


def _policy(path: Path) -> Path:
    from tests.cudaperf_jax.models import tiny
    tiny.hf_model("llama").save_pretrained(path)
    tiny.tokenizer().save_pretrained(path)
    return path


def _method(tmp, *args, timeout=900, check=True):
    proc = subprocess.run([sys.executable, "experiments/method.py", *map(str, args)], cwd=REPO, capture_output=True,
                          check=False,
                          text=True, timeout=timeout, env={**ENV, "HOME": str(tmp)})
    if check:
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def _lines(proc) -> dict:
    """{stage: its line} of a `run`'s output (a finished process, or the text it printed)."""
    out = {}
    for line in (proc if isinstance(proc, str) else proc.stdout).splitlines():
        if line.startswith("[method] ") and ": " in line:
            name, _, rest = line[len("[method] "):].partition(": ")
            out[name] = rest
    return out


def _digests(run: Path, step: int) -> dict:
    d = run / "checkpoints" / str(step)
    return {str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.rglob("*"))
            if p.is_file()}


def _steps(run: Path) -> list[int]:
    return [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines()]


# A stage that starts a grandchild in a session of its own (out of the stage's process group), writes its pid, sleeps.
STAGE = """
import subprocess, sys, time
g = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
open("grandchild.pid", "w").write(str(g.pid))
print("stage started", flush=True)
time.sleep(120)
"""


def _wait_for(path: Path, seconds: float = 30.0) -> None:
    deadline = time.time() + seconds
    while time.time() < deadline and not (path.is_file() and path.read_text()):
        time.sleep(0.05)
    assert path.is_file(), f"{path} never appeared"


def _gone(pid: int, seconds: float = 10.0) -> bool:
    """Whether pid is dead (or a zombie nobody reaped yet) within `seconds`."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


def test_a_stage_and_what_it_started_are_killed_at_the_budget(tmp_path):
    from experiments.method_launch import launch
    log = tmp_path / "logs" / "stage.log"
    rc, secs = launch([sys.executable, "-c", STAGE], tmp_path, log, 2.0)
    assert rc is None and 2.0 <= secs < 15.0
    assert _gone(int((tmp_path / "grandchild.pid").read_text())), "the stage's grandchild outlived the budget"
    text = log.read_text()
    assert " UTC: " in text.splitlines()[1] and "stage started" in text
    rc, _ = launch([sys.executable, "-c", "import sys; print('second'); sys.exit(3)"], tmp_path, log, 30.0)
    assert rc == 3 and "stage started" in log.read_text() and "second" in log.read_text()   # appended


def test_a_signal_to_the_driver_takes_the_stage_down_with_it(tmp_path):
    driver = ("import sys; from pathlib import Path; from experiments.method_launch import launch; "
              f"launch([sys.executable, '-c', {STAGE!r}], Path({str(tmp_path)!r}), Path({str(tmp_path / 'l.log')!r}), "
              "300)")
    proc = subprocess.Popen([sys.executable, "-c", driver], cwd=REPO, env={**ENV, "PYTHONPATH": str(REPO)})
    _wait_for(tmp_path / "grandchild.pid")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    assert _gone(int((tmp_path / "grandchild.pid").read_text())), "the stage's grandchild outlived the driver"
    assert not _alive_in(tmp_path)


def test_run_says_which_stages_wait_or_do_not_fit_and_refuses_another_plan(tmp_path, capsys):
    from experiments import method
    from experiments.method_chain import write_stamp
    from experiments.method_plan import Plan, PlanError
    (tmp_path / "tiny").mkdir()
    root, plan = tmp_path / "root", Plan.of(str(tmp_path / "tiny"), "full")
    assert method.run(root, plan, ["sft", "eval_sft"], 60.0) == 0
    said = _lines(capsys.readouterr().out)
    assert said["sft-tiny"] == "waits for base-tiny" and said["eval_sft-tiny"] == "waits for tasks, base-tiny, sft-tiny"
    write_stamp(root, "base-tiny", {})
    assert method.run(root, plan, ["sft", "eval_sft"], 60.0) == 0
    said = _lines(capsys.readouterr().out)
    assert said["sft-tiny"].startswith("not started: 1.0 min left, it needs 4.0") and "eval_sft-tiny" not in said
    assert not (root / "runs").exists()                                      # nothing was launched
    history = [json.loads(x) for x in (root / "history.jsonl").read_text().splitlines()]
    assert [h["stage"] for h in history] == ["sft-tiny", "eval_sft-tiny", "sft-tiny"]
    with pytest.raises(PlanError, match="holds the chain of .* at size full"):
        method.run(root, Plan.of(str(tmp_path / "tiny"), "dev"), ["sft"], 60.0)
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (root / ".lock").write_text(str(holder.pid))
        with pytest.raises(PlanError, match=f"another driver \\(pid {holder.pid}\\) runs in"):
            method.run(root, plan, ["sft"], 60.0)
    finally:
        holder.kill()
        holder.wait()
    assert method.main(["run", "--root", str(root), "--budget_minutes", "1", "--stages", "nope"]) == 2
    assert "unknown stage(s) nope" in capsys.readouterr().err


@pytest.mark.slow
def test_run_stops_resumes_packs_restores_and_reports(tmp_path):
    model = _policy(tmp_path / "tiny")
    a, b = tmp_path / "a", tmp_path / "b"
    common = ["--model", model, "--size", "dev"]
    # 1. a budget that ends inside the SFT stage: the stages before it finish and are stamped, SFT is not
    first = _method(tmp_path, "run", "--root", a, "--budget_minutes", 0.25, "--stages", "tasks,base,sft", *common)
    said = _lines(first)
    assert said["tasks"].startswith("finished") and said["base-tiny"].startswith("finished"), first.stdout
    assert said["sft-tiny"].startswith(("stopped at the budget", "not started")), first.stdout
    assert (a / "stamps" / "tasks.done").is_file() and not (a / "stamps" / "sft-tiny.done").exists()
    assert not _alive_in(a), "the stage outlived its budget"
    # 2. killed with SIGTERM once SFT has a checkpoint: the driver takes the stage down with it
    proc = subprocess.Popen([sys.executable, "experiments/method.py", "run", "--root", str(a), "--budget_minutes", "10",
                             "--stages", "tasks,base,sft", *map(str, common)], cwd=REPO, env={**ENV, "HOME": str(tmp_path)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run = a / "runs" / "sft-tiny"
    deadline = time.time() + 400
    while time.time() < deadline and proc.poll() is None and not any(
            p.name.isdigit() for p in (run / "checkpoints").glob("*")):
        time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) != 0
    time.sleep(1.0)
    assert not _alive_in(a), "the stage outlived the driver"
    if (a / "stamps" / "sft-tiny.done").exists():
        pytest.skip("the SFT stage finished before the kill (machine too fast for this test's timing)")
    step = max(int(p.name) for p in (run / "checkpoints").iterdir() if p.name.isdigit())
    # 3. pack: the in-progress chain file (its newest checkpoint) and the state, within a device call's limits
    out = tmp_path / "pack"
    _method(tmp_path, "pack", "--root", a, "--out", out)
    files = sorted(out.iterdir())
    assert {f.name for f in files} >= {"sft-tiny.tgz", "state.tgz"}
    assert len(files) <= 8 and all(f.stat().st_size <= 16e6 for f in files) and sum(
        f.stat().st_size for f in files) <= 64e6
    with tarfile.open(out / "sft-tiny.tgz") as tar:
        meta = json.loads(tar.extractfile("chain.json").read())
        names = tar.getnames()
    assert meta["state"] == "in_progress" and meta["step"] == step
    assert f"checkpoints/{step}/_CHECKPOINT_METADATA" in names and "sft_data" not in str(names)
    # 4. restore into a fresh root: the same checkpoint bytes; the run there resumes after it and finishes
    _method(tmp_path, "restore", "--root", b, "--from", out)
    assert _digests(b / "runs" / "sft-tiny", step) == _digests(run, step)
    again = _method(tmp_path, "run", "--root", b, "--budget_minutes", 10, "--stages", "tasks,base,sft,eval_sft",
                    "--suites", "val", *common)
    said = _lines(again)
    assert said["sft-tiny"].startswith("finished") and said["eval_sft-tiny"].startswith("suites val done"), again.stdout
    assert _steps(b / "runs" / "sft-tiny") == list(range(6))
    log = (b / "logs" / "sft-tiny.log").read_text()
    assert f"resuming at step {step + 1} of 6" in log
    assert (b / "runs" / "sft-tiny" / "adapter" / "adapter_model.safetensors").is_file()
    # the finished policy packs as its adapter alone
    out2 = tmp_path / "pack2"
    _method(tmp_path, "pack", "--root", b, "--out", out2)
    with tarfile.open(out2 / "sft-tiny.tgz") as tar:
        names = tar.getnames()
        assert json.loads(tar.extractfile("chain.json").read())["state"] == "finished"
    assert "adapter/adapter_model.safetensors" in names and not any(n.startswith("checkpoints") for n in names)
    assert (out2 / "evals.tar.xz").is_file()
    # 5. report from the packs alone: the table with 95% intervals, per turn, and the plots
    rep = tmp_path / "report"
    _method(tmp_path, "report", "--from", out, out2, "--out", rep)
    results = json.loads((rep / "results.json").read_text())
    cell = next(c for c in results["cells"] if c["policy"] == "sft-tiny" and c["suite"] == "val")
    assert [r["turn"] for r in cell["per_turn"]] == [0, 1] and cell["answers"] == 4 and cell["complete"]
    for r in cell["per_turn"]:
        assert r["correct"]["low"] <= r["correct"]["value"] <= r["correct"]["high"] and r["correct"]["n"] == 1
    assert results["sft"]["steps_done"] == 6 and [g["status"] for g in results["goals"]] == ["not measured"] * 5
    text = (rep / "summary.md").read_text()
    assert "## val" in text and "| SFT | 1 |" in text and "## Goals" in text
    for png in ("stages.png", "turns.png", "sft_loss.png"):
        assert (rep / png).stat().st_size > 5000


def _alive_in(root: Path) -> list[str]:
    """Command lines of the processes working in `root` (the stages run there)."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if Path(os.readlink(d / "cwd")) == root:
                out.append((d / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except OSError:
            continue
    return out


def _rl_rows(run: Path) -> list[dict]:
    return [{k: v for k, v in json.loads(x).items() if not k.startswith(("time/", "_"))}
            for x in (run / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_the_whole_chain_across_three_roots(tmp_path):
    """Every stage at --size dev: root A runs through SFT, the ranker and RL-full seed 0 uninterrupted; root B, restored
    from A's pack before RL, is killed inside RL-full after its first checkpoint; root C, restored from B's pack,
    resumes it to A's metrics exactly and runs the rest (the ablation, seed 1, every evaluation). The report states
    every goal met or missed, and the published adapters load as BASE+ADAPTER."""
    model = _policy(tmp_path / "tiny")
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    common = ["--model", model, "--size", "dev"]
    first = _method(tmp_path, "run", "--root", a, "--budget_minutes", 30, "--stages",
                    "tasks,base,zero_shot,sft,eval_sft,ranker", *common, timeout=2400)
    assert all(v.startswith("finished") for v in _lines(first).values() if v[:1] != "0"), first.stdout
    _method(tmp_path, "pack", "--root", a, "--out", tmp_path / "p1")
    ref = _method(tmp_path, "run", "--root", a, "--budget_minutes", 20, "--stages", "rl_full_s0", *common,
                  timeout=1500)
    assert _lines(ref)["rl_full_s0-tiny"].startswith("finished"), ref.stdout
    _method(tmp_path, "restore", "--root", b, "--from", tmp_path / "p1")
    proc = subprocess.Popen([sys.executable, "experiments/method.py", "run", "--root", str(b), "--budget_minutes", "20",
                             "--stages", "tasks,base,rl_full_s0", *map(str, common)], cwd=REPO,
                            env={**ENV, "HOME": str(tmp_path)}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run_b = b / "runs" / "rl_full_s0-tiny"
    deadline = time.time() + 1200
    while time.time() < deadline and proc.poll() is None and chain_step(run_b) is None:
        time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    assert chain_step(run_b) == 0 and not (b / "stamps" / "rl_full_s0-tiny.done").exists()
    _method(tmp_path, "pack", "--root", b, "--out", tmp_path / "p2")
    assert {p.name for p in (tmp_path / "p2").iterdir()} == {"rl_full_s0-tiny.tgz", "state.tgz", "evals.tar.xz"}
    _method(tmp_path, "restore", "--root", c, "--from", tmp_path / "p1", tmp_path / "p2")
    rest = _method(tmp_path, "run", "--root", c, "--budget_minutes", 60, *common, timeout=4000)
    said = _lines(rest)
    assert all(said[s].startswith("finished") for s in said if s.startswith(("rl_", "eval_"))), rest.stdout
    assert _rl_rows(c / "runs" / "rl_full_s0-tiny") == _rl_rows(a / "runs" / "rl_full_s0-tiny")
    _method(tmp_path, "pack", "--root", c, "--out", tmp_path / "p3")
    rep = tmp_path / "report"
    _method(tmp_path, "report", "--from", tmp_path / "p1", tmp_path / "p2", tmp_path / "p3", "--out", rep)
    results = json.loads((rep / "results.json").read_text())
    assert len(results["cells"]) == 15 and all(cell["complete"] for cell in results["cells"])
    assert {g["status"] for g in results["goals"]} <= {"met", "missed"}
    assert set(results["rl"]) == {"rl_full_s0-tiny", "rl_abl_s0-tiny", "rl_full_s1-tiny"}
    assert all(r["steps_done"] == 2 for r in results["rl"].values())
    assert (rep / "rl_curves.png").stat().st_size > 5000
    pub = tmp_path / "adapters"
    _method(tmp_path, "publish", "--from", tmp_path / "p1", tmp_path / "p2", tmp_path / "p3", "--out", pub)
    assert sorted(p.name for p in pub.iterdir()) == ["README.md", "rl_abl_s0-tiny", "rl_full_s0-tiny",
                                                     "rl_full_s1-tiny", "sft-tiny"]
    assert f"--models {model}+adapters/sft-tiny" in (pub / "README.md").read_text()
    import numpy as np

    from cudaperf_jax.models.loading import load_policy
    toks = np.arange(3, 13, dtype=np.int32)[None]
    one, _ = load_policy(f"{model}+{pub / 'rl_full_s0-tiny'}")
    two, _ = load_policy(f"{c / 'base' / 'tiny'}+{c / 'runs' / 'sft-tiny' / 'adapter'}+"
                         f"{c / 'runs' / 'rl_full_s0-tiny' / 'adapter'}")
    np.testing.assert_allclose(np.asarray(one(toks)), np.asarray(two(toks)), rtol=2e-5, atol=2e-5)


def chain_step(run: Path):
    ck = run / "checkpoints"
    steps = [int(p.name) for p in ck.iterdir() if p.name.isdigit()] if ck.is_dir() else []
    return max(steps) if steps else None
