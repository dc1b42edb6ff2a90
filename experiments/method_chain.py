"""What carries the method's chain from one machine to the next: chain files, the state archive, the eval archives.

    pack(root, out)              # writes OUT/<policy>.tgz (changed policies), OUT/state.tgz, OUT/evals*.tar.xz
    restore(root, [dir, ...])    # seeds ROOT from packed files, the committed chain directory or a ladder cells.tgz
    collect(dir, chain_dir)      # replaces the chain directory's files with a pack's (one file per policy)

A chain file `<policy>.tgz` holds one policy's run directory, exactly: in progress, its newest Orbax checkpoint
(what is trained, Adam's state, the RNG, the step) with config.json, policy.json and metrics.jsonl, so the training
resumes on another machine to the metrics of an uninterrupted run; finished, the PEFT adapter alone (what the later
stages load) with the run's small files; the finished ranker, its checkpoint without the optimizer state (what
Ranker.load reads). `chain.json` inside says which and at what step. state.tgz: the plan, the stamps of finished
stages, every run's metrics and summaries, the tails of the logs, the driver's history. evals*.tar.xz: the evaluation
cells (records of every judged answer), split so that no file exceeds the per-file limit.
"""
from __future__ import annotations

import dataclasses
import io
import json
import os
import shutil
import tarfile
import tempfile
import time
from pathlib import Path

FORMAT = "cudaperf_jax.method_chain/1"
SMALL = ("config.json", "policy.json", "metrics.jsonl", "summary.json", "environment.json", "loss.png",
         "rl_curves.png", "ranker.json", "results.json", "results.txt", "results.png")
LOG_TAIL_LINES = 400


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one device call brings back: at most `files` files of `file_bytes` each, `total_bytes` in all."""
    files: int = 8
    file_bytes: int = 16_000_000
    total_bytes: int = 64_000_000


class ChainError(RuntimeError):
    """A chain file or directory that cannot be used; the message says what to do."""


# ---- stamps and signatures ------------------------------------------------------------------------
def stamp_path(root: Path, stage: str) -> Path:
    return root / "stamps" / f"{stage}.done"


def is_done(root: Path, stage: str) -> bool:
    return stamp_path(root, stage).is_file()


def write_stamp(root: Path, stage: str, info: dict) -> None:
    p = stamp_path(root, stage)
    p.parent.mkdir(parents=True, exist_ok=True)
    _atomic(p, json.dumps({**info, "utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())}))


def latest_step(run: Path) -> int | None:
    """The newest finished Orbax checkpoint step of a run directory (digit-named directories are finished)."""
    ck = run / "checkpoints"
    steps = [int(p.name) for p in ck.iterdir() if p.name.isdigit()] if ck.is_dir() else []
    return max(steps) if steps else None


def signature(root: Path, policy: str) -> dict | None:
    """{"state": "finished" | "in_progress", "step"} of a policy's run directory on this machine (None: nothing to
    carry yet). Finished: its stage is stamped (and the chain file has what later stages need)."""
    run = root / "runs" / policy
    if is_done(root, policy):
        return {"state": "finished", "step": latest_step(run) if latest_step(run) is not None else _chain_step(run)}
    step = latest_step(run)
    return None if step is None else {"state": "in_progress", "step": step}


def _chain_step(run: Path) -> int | None:
    p = run / "chain.json"
    return json.loads(p.read_text()).get("step") if p.is_file() else None


def _newer(a: dict | None, b: dict | None) -> bool:
    """Whether signature a is further along than b."""
    if a is None:
        return False
    if b is None:
        return True
    rank = {"in_progress": 0, "finished": 1}
    return (rank[a["state"]], a["step"] or -1) > (rank[b["state"]], b["step"] or -1)


# ---- pack -------------------------------------------------------------------------------------------
def _atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime = len(data), int(time.time())
    tar.addfile(info, io.BytesIO(data))


def _slim_ranker_checkpoint(run: Path, step: int, dest: Path) -> None:
    """The ranker's checkpoint without its optimizer state (Ranker.load reads params and stats) at dest/<step>."""
    import orbax.checkpoint as ocp
    src = ocp.CheckpointManager((run / "checkpoints").resolve())
    try:
        raw = src.restore(step, args=ocp.args.StandardRestore())
    finally:
        src.close()
    dst = ocp.CheckpointManager(dest.resolve(), options=ocp.CheckpointManagerOptions(create=True))
    try:
        dst.save(step, args=ocp.args.StandardSave({"params": raw["params"], "stats": raw["stats"],
                                                    "step": raw["step"]}))
        dst.wait_until_finished()
    finally:
        dst.close()


def write_chain_file(root: Path, policy: str, sig: dict, out: Path) -> Path:
    """OUT: the chain file of a policy (see the module docstring)."""
    run = root / "runs" / policy
    path = out / f"{policy}.tgz"
    meta = {"format": FORMAT, "policy": policy, **sig, "written": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())}
    with tempfile.TemporaryDirectory() as tmp, tarfile.open(path, "w:gz") as tar:
        _add_bytes(tar, "chain.json", json.dumps(meta, indent=1).encode())
        for name in SMALL:
            if (run / name).is_file():
                tar.add(run / name, arcname=name)
        if sig["state"] == "in_progress":
            tar.add(run / "checkpoints" / str(sig["step"]), arcname=f"checkpoints/{sig['step']}")
        elif policy == "ranker":
            _slim_ranker_checkpoint(run, sig["step"], Path(tmp) / "checkpoints")
            tar.add(Path(tmp) / "checkpoints" / str(sig["step"]), arcname=f"checkpoints/{sig['step']}")
        else:
            if not (run / "adapter" / "adapter_model.safetensors").is_file():
                raise ChainError(f"{run} is finished but has no adapter/ (PEFT); run its stage again to export it")
            tar.add(run / "adapter", arcname="adapter")
    return path


def _tail(path: Path, lines: int = LOG_TAIL_LINES) -> bytes:
    text = path.read_bytes().decode("utf-8", "replace").replace("\r", "\n")
    keep = [x for x in text.splitlines() if x.strip()][-lines:]
    return ("\n".join(keep) + "\n").encode()


def write_state(root: Path, out: Path) -> Path:
    """OUT/state.tgz: plan, stamps of the stages that are not machine-local, run directories' small files, log
    tails, history."""
    path = out / "state.tgz"
    local = set(json.loads((root / "plan.json").read_text()).get("local_stages", [])) if (
        root / "plan.json").is_file() else set()
    with tarfile.open(path, "w:gz") as tar:
        for name in ("plan.json", "history.jsonl"):
            if (root / name).is_file():
                tar.add(root / name, arcname=name)
        for p in sorted((root / "stamps").glob("*.done")):
            if p.stem not in local:
                tar.add(p, arcname=f"stamps/{p.name}")
        for run in sorted((root / "runs").glob("*")):
            for name in SMALL:
                if (run / name).is_file():
                    tar.add(run / name, arcname=f"runs/{run.name}/{name}")
        for log in sorted((root / "logs").glob("*.log")):
            _add_bytes(tar, f"logs/{log.name}", _tail(log))
    return path


def _cell_files(root: Path) -> list[Path]:
    cells = root / "cells"
    return sorted(p for p in cells.glob("*/*") if p.is_file() and p.suffix in (".json", ".jsonl")) \
        if cells.is_dir() else []


def write_evals(root: Path, out: Path, limit: int) -> list[Path]:
    """OUT/evals.tar.xz (or evals_1.. when one would exceed `limit` bytes): every cell's files."""
    files = _cell_files(root)
    if not files:
        return []
    groups = [files]
    while True:
        paths = []
        for i, group in enumerate(groups):
            path = out / ("evals.tar.xz" if len(groups) == 1 else f"evals_{i + 1}.tar.xz")
            with tarfile.open(path, "w:xz") as tar:
                for f in group:
                    tar.add(f, arcname=str(f.relative_to(root)))
            paths.append(path)
        big = [i for i, p in enumerate(paths) if p.stat().st_size > limit]
        if not big:
            return paths
        if any(len(groups[i]) == 1 for i in big):
            raise ChainError(f"an evaluation file alone exceeds {limit} bytes compressed; raise the limit")
        for p in paths:
            p.unlink()
        groups = [half for g in groups for half in ((g[:len(g) // 2], g[len(g) // 2:]) if len(g) > 1 else (g,))]


def pack(root: Path, out: Path, limits: Limits = Limits(), echo=print) -> list[Path]:
    """Writes what must come back from a machine into OUT (see the module docstring); the chain files of policies
    unchanged since `restore` are left out (they are in the chain directory already). Files that would break the
    limits are left out, in-progress chain files last, each named in one line."""
    root, out = Path(root), Path(out)
    out.mkdir(parents=True, exist_ok=True)
    restored = json.loads((root / "restored.json").read_text()) if (root / "restored.json").is_file() else {}
    plan = json.loads((root / "plan.json").read_text()) if (root / "plan.json").is_file() else {}
    chain = []
    for policy in plan.get("policies", []):
        sig = signature(root, policy)
        if sig is None or not _newer(sig, restored.get(policy)):
            continue
        chain.append((0 if sig["state"] == "in_progress" else 1, write_chain_file(root, policy, sig, out)))
    state = write_state(root, out)
    evals = write_evals(root, out, limits.file_bytes)
    ordered = [p for _, p in sorted(chain, key=lambda x: x[0])] + [state] + evals
    kept, total = [], 0
    for p in ordered:
        size = p.stat().st_size
        if size > limits.file_bytes or len(kept) >= limits.files or total + size > limits.total_bytes:
            echo(f"[method] pack: left out {p.name} ({size / 1e6:.1f} MB): over the limits of {limits.files} files "
                 f"of {limits.file_bytes / 1e6:.0f} MB, {limits.total_bytes / 1e6:.0f} MB in all")
            p.unlink()
            continue
        kept.append(p)
        total += size
    for p in kept:
        echo(f"[method] pack: {p.name} {p.stat().st_size / 1e6:.2f} MB")
    echo(f"[method] pack: {len(kept)} files, {total / 1e6:.1f} MB in {out}")
    return kept


# ---- restore ----------------------------------------------------------------------------------------
def _members(tar: tarfile.TarFile) -> list[tarfile.TarInfo]:
    """The archive's files and directories, refusing anything that would land outside the target."""
    out = []
    for m in tar.getmembers():
        if m.name.startswith("/") or ".." in Path(m.name).parts or not (m.isfile() or m.isdir()):
            raise ChainError(f"{tar.name} holds an unsafe entry {m.name!r}; use a file written by `method.py pack`")
        out.append(m)
    return out


def _extract_new(tar: tarfile.TarFile, dest: Path, rename=lambda n: n) -> int:
    """Extracts the files that do not exist under dest yet; returns how many."""
    n = 0
    for m in _members(tar):
        if not m.isfile():
            continue
        target = dest / rename(m.name)
        if target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        with tar.extractfile(m) as src, open(target, "wb") as dst:
            shutil.copyfileobj(src, dst)
        n += 1
    return n


def restore_chain_file(root: Path, path: Path, restored: dict, echo=print) -> None:
    with tarfile.open(path) as tar:
        try:
            meta = json.loads(tar.extractfile("chain.json").read())
        except KeyError:
            raise ChainError(f"{path} has no chain.json; it is not a chain file of `method.py pack`") from None
        if meta.get("format") != FORMAT:
            raise ChainError(f"{path} is in format {meta.get('format')!r}, this code reads {FORMAT}")
        policy, sig = meta["policy"], {"state": meta["state"], "step": meta["step"]}
        here = signature(root, policy)
        if here is not None and not _newer(sig, here):
            echo(f"[method] restore: {policy} here is at {here['state']} step {here['step']}; kept")
            restored.setdefault(policy, here)
            return
        run = root / "runs" / policy
        shutil.rmtree(run, ignore_errors=True)
        run.mkdir(parents=True)
        for m in _members(tar):
            if m.name != "chain.json":
                tar.extract(m, run, filter="data")
        (run / "chain.json").write_text(json.dumps(meta, indent=1))
    if sig["state"] == "finished":
        write_stamp(root, policy, {"restored_from": str(path)})
    restored[policy] = sig
    echo(f"[method] restore: {policy} {sig['state']} at step {sig['step']} from {path.name}")


def restore(root: Path, sources: list[Path], echo=print) -> dict:
    """Seeds ROOT from packed files, a chain directory or a ladder's cells.tgz (files, or directories of them);
    never goes back: a policy already further along here is kept, existing files are not overwritten. Writes
    ROOT/restored.json (what `pack` leaves out unless it moved on)."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    files = []
    for i, s in enumerate(map(Path, sources)):
        if not s.exists():
            raise ChainError(f"{s} does not exist; pass packed files or a directory of them")
        files += [(i, f) for f in (sorted(s.iterdir()) if s.is_dir() else [s])]
    restored = json.loads((root / "restored.json").read_text()) if (root / "restored.json").is_file() else {}
    # chain files first (each kept only where it is further along); then the archives, the last source first, so
    # that where two sources hold a file the later one's is kept (existing files are never overwritten)
    ordered = sorted(files, key=lambda x: (0, 0, x[1].name) if _is_chain_file(x[1]) else (1, -x[0], x[1].name))
    for _, f in ordered:
        name = f.name
        if name == "state.tgz":
            with tarfile.open(f) as tar:
                n = _extract_new(tar, root)
            echo(f"[method] restore: {n} files of {name}")
        elif name.startswith("evals") and name.endswith(".tar.xz"):
            with tarfile.open(f) as tar:
                n = _extract_new(tar, root)
            echo(f"[method] restore: {n} cell files of {name}")
        elif name == "cells.tgz":          # a zero-shot ladder's cells (benchmarks/zero_shot.py)
            with tarfile.open(f) as tar:
                n = _extract_new(tar, root / "cells")
            echo(f"[method] restore: {n} ladder cell files of {f}")
        elif name.endswith(".tgz"):
            restore_chain_file(root, f, restored, echo)
    _atomic(root / "restored.json", json.dumps(restored, indent=1))
    return restored


def _is_chain_file(f: Path) -> bool:
    return f.name.endswith(".tgz") and f.name not in ("state.tgz", "cells.tgz")


# ---- collect ----------------------------------------------------------------------------------------
def collect(src: Path, chain_dir: Path, max_bytes: int = 20_000_000, echo=print) -> list[Path]:
    """Moves a pack's files into the chain directory kept in the repository: each policy's file replaces its
    predecessor, state.tgz replaces state.tgz, the evals files replace all earlier ones. Refuses a file over
    max_bytes."""
    src, chain_dir = Path(src), Path(chain_dir)
    new = sorted(p for p in src.iterdir() if p.is_file() and p.name.endswith((".tgz", ".tar.xz")))
    big = [p.name for p in new if p.stat().st_size > max_bytes]
    if big:
        raise ChainError(f"{', '.join(big)} exceed {max_bytes / 1e6:.0f} MB; the tree holds at most that per file")
    chain_dir.mkdir(parents=True, exist_ok=True)
    if any(p.name.startswith("evals") for p in new):
        for old in chain_dir.glob("evals*.tar.xz"):
            old.unlink()
    for p in new:
        shutil.copyfile(p, chain_dir / p.name)
    total = sum(p.stat().st_size for p in chain_dir.iterdir() if p.is_file())
    for p in sorted(chain_dir.iterdir()):
        echo(f"[method] chain: {p.name} {p.stat().st_size / 1e6:.2f} MB")
    echo(f"[method] chain: {total / 1e6:.1f} MB in {chain_dir}")
    return new
