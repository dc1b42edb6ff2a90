"""Soak of the harness pool (issue 26): a labelled mix of correct, wrong, hanging, crashing, out-of-bounds,
hostile, huge-output and huge-compile candidates (benchmarks/soak_mix.py) through one HarnessPool, in chunks.

Per chunk: throughput, verdicts against the labels, processes (the pool's descendants, processes left in
the workers' sessions outside it, zombies), files and bytes in the pool's temporary root, files the
candidates managed to write outside it, and on cuda the GPU memory in use (nvidia-smi in a side process)
and GPU processes that are no longer the pool's. After the last chunk the pool is closed and the same
probes must read zero. Chunks are saved as they finish (`<out>/chunks/`); a rerun with the same --out
resumes after the last saved one (the mix is a function of --n and --seed). `--resume_from` an earlier run's
soak_<backend>.json continues that run on another machine (a later sitting): its chunks are taken as saved, after a
check that their candidates are this mix's.

    python benchmarks/soak.py --n 200 --backend cpu --workers 1 --chunk 50 --out benchmarks/results/soak_cpu
    python benchmarks/soak.py --n 2000 --backend cuda --chunk 200 --out $OUT/soak_cuda
    # verdicts and leaks, not timing precision: more workers and shorter timing runs (flags below)
    python benchmarks/soak.py --n 2000 --backend cuda --chunk 100 --workers_per_gpu 10 \
        --timing_params '{"warmup": 1, "min_reps": 2, "budget_s": 0.02}' ...

Writes <out>/soak_<backend>.json (summary, per-chunk records, every mismatch) and soak_<backend>.png.
Exit status 1 when a verdict disagrees with its label or anything leaked.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import soak_mix


# ---- probes --------------------------------------------------------------------------------------------------
def proc_table() -> dict[int, dict]:
    """pid -> {ppid, sid, state, cmd} of this user's processes (from /proc)."""
    out, uid = {}, os.getuid()
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            if os.stat(f"/proc/{d}").st_uid != uid:
                continue
            stat = Path(f"/proc/{d}/stat").read_text()
            fields = stat[stat.rindex(")") + 2:].split()
            cmd = Path(f"/proc/{d}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:120]
        except (OSError, ValueError):
            continue
        out[int(d)] = {"state": fields[0], "ppid": int(fields[1]), "sid": int(fields[3]), "cmd": cmd}
    return out


def descendants(table: dict, root: int) -> set[int]:
    kids = collections.defaultdict(list)
    for pid, p in table.items():
        kids[p["ppid"]].append(pid)
    seen, todo = set(), [root]
    while todo:
        for k in kids[todo.pop()]:
            if k not in seen:
                seen.add(k)
                todo.append(k)
    return seen


def gpu_memory() -> dict:
    """{used_mib, apps: {pid: MiB}} from nvidia-smi (a side process: this one never initialises CUDA)."""
    try:
        used = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                              check=False, capture_output=True, text=True, timeout=30).stdout.split()
        apps = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                              check=False, capture_output=True, text=True, timeout=30).stdout.splitlines()
    except (OSError, subprocess.TimeoutExpired):
        return {}
    pids = {}
    for ln in apps:
        parts = [p.strip() for p in ln.split(",")]
        if len(parts) == 2 and parts[0].isdigit():
            pids[int(parts[0])] = float(parts[1]) if parts[1].replace(".", "").isdigit() else 0.0
    return {"used_mib": sum(float(u) for u in used if u.replace(".", "").isdigit()), "apps": pids}


def tree_size(path: str, skip: str | None = None) -> tuple[int, int]:
    files = size = 0
    for dirpath, dirnames, filenames in os.walk(path):
        if skip and os.path.abspath(dirpath) == os.path.abspath(skip):
            dirnames[:] = []
            continue
        for f in filenames:
            files += 1
            try:
                size += os.lstat(os.path.join(dirpath, f)).st_size
            except OSError:
                pass
    return files, size


class Probe:
    """Counts what the pool leaves behind; `sessions` are the worker sessions seen so far."""

    def __init__(self, backend: str, escape_dir: str):
        self.backend, self.escape_dir, self.me = backend, escape_dir, os.getpid()
        self.sessions: set[int] = set()
        self.seen: set[int] = set()  # every process of the pool seen so far
        self.tmp_before = set(os.listdir(tempfile.gettempdir()))
        # children this process had before the pool (a test runner's, multiprocessing's resource tracker) are
        # not the pool's to leave behind
        self.before = descendants(proc_table(), self.me)

    def __call__(self, pool=None) -> dict:
        table = proc_table()
        mine = descendants(table, self.me) - self.before
        own_sid = table.get(self.me, {}).get("sid")
        self.sessions |= {table[p]["sid"] for p in mine if table[p]["sid"] != own_sid}
        self.seen |= mine
        orphans = [p for p, rec in table.items() if rec["sid"] in self.sessions and p not in mine]
        rec = {"descendants": len(mine), "zombies": sum(table[p]["state"] == "Z" for p in mine),
               "orphans": len(orphans), "orphan_cmds": [table[p]["cmd"] for p in orphans][:5],
               "escaped_files": len(os.listdir(self.escape_dir)) if os.path.isdir(self.escape_dir) else 0}
        if pool is not None:
            exec_alive = [w for w in list(pool._free.queue) if getattr(w, "alive", False)]
            comp_alive = [w for w in list(pool.compile_pool.free.queue) if w is not None and w.alive]
            pids = {w.proc.pid for w in exec_alive + comp_alive}
            rec.update(exec_workers=len(exec_alive), compile_workers=len(comp_alive),
                       # the workers' own children (a candidate's, or a compiler left running)
                       stray=len([p for p in mine if p not in pids and table[p]["ppid"] != self.me]))
            files, size = tree_size(pool.root, skip=None)
            bfiles, bsize = tree_size(pool.cache_dir)
            names = [os.path.relpath(os.path.join(d, f), pool.root) for d, _, fs in os.walk(pool.root) for f in fs]
            rec["root_names"] = sorted(n for n in names if not n.startswith("build" + os.sep))[:30]
            rec.update(root_files=files - bfiles, root_bytes=size - bsize, build_files=bfiles, build_bytes=bsize,
                       worker_dirs=len([d for d in os.listdir(pool.root) if d.startswith("w")]))
        else:
            new = set(os.listdir(tempfile.gettempdir())) - self.tmp_before
            rec["new_tmp_entries"] = sorted(n for n in new if n.startswith(("cudaperf", "tmp")))[:20]
        if self.backend == "cuda":
            g = gpu_memory()
            rec["gpu_used_mib"] = g.get("used_mib")
            apps = g.get("apps", {})
            # GPU processes that are not the pool's descendants now: foreign if they were the pool's (or run in a
            # worker's session), else another job sharing the GPU (counted apart, not a leak)
            outside = [p for p in apps if p not in mine]
            foreign = sum(p in self.seen or table.get(p, {}).get("sid") in self.sessions for p in outside)
            rec.update(gpu_foreign_apps=foreign, gpu_other_apps=len(outside) - foreign, gpu_apps=len(apps))
        return rec


# ---- the run -------------------------------------------------------------------------------------------------
def run_chunk(pool, tasks: dict, cands: list[dict]) -> dict:
    t0 = time.perf_counter()
    results = pool.evaluate([(tasks[c["task"]], c["source"]) for c in cands])
    wall = time.perf_counter() - t0
    verdicts, mismatches = [], []
    for c, r in zip(cands, results):
        status = r.status if r is not None else "no_result"
        sec = r.seconds if r is not None else {}
        verdicts.append({"i": c["i"], "category": c["category"], "name": c["name"], "status": status,
                         "compile_s": round(sec.get("compile", 0.0), 2), "execute_s": round(sec.get("execute", 0.0), 2),
                         # inside execute: the worker's checks and the timing (with its wait for the GPU lock)
                         "run_s": round(sec.get("run", 0.0), 2), "time_s": round(sec.get("time", 0.0), 2),
                         # inside time_s: the wait for the exclusive turn of the GPU lock, and the turn itself
                         "lock_wait_s": round(sec.get("lock_wait", 0.0), 2),
                         "lock_held_s": round(sec.get("lock_held", 0.0), 2),
                         "timing_setup_s": round(sec.get("timing_setup", 0.0), 2)})
        if status not in c["accept"]:
            mismatches.append({"i": c["i"], "task": c["task"], "name": c["name"], "category": c["category"],
                               "status": status, "accept": c["accept"],
                               "error": ((r.error or r.compile_log[-300:]) if r is not None else "")[:300]})
    return {"n": len(cands), "seconds": wall, "per_min": 60 * len(cands) / max(wall, 1e-9), "verdicts": verdicts,
            "mismatches": mismatches}


def summarize(chunks: list[dict], final: dict, args, n_done: int) -> dict:
    conf: dict = collections.defaultdict(collections.Counter)
    right = collections.Counter()
    total = collections.Counter()
    unchecked = unchecked_accepted = 0  # an accepted `unchecked` is no judged verdict either
    for ch in chunks:
        bad = {m["i"] for m in ch["mismatches"]}
        for v in ch["verdicts"]:
            conf[v["category"]][v["status"]] += 1
            total[v["category"]] += 1
            right[v["category"]] += v["i"] not in bad
            if v["status"] == "unchecked":
                unchecked += 1
                unchecked_accepted += v["i"] not in bad
    rates = [ch["per_min"] for ch in chunks]
    k = max(1, len(rates) // 4)
    leaks = {"orphans": max([ch["probe"]["orphans"] for ch in chunks] + [final["orphans"]]),
             "escaped_files": final["escaped_files"], "after_close_descendants": final["descendants"],
             "after_close_orphans": final["orphans"], "pool_root_left": final.get("root_left", False),
             "max_stray": max((ch["probe"].get("stray", 0) for ch in chunks), default=0),
             "max_zombies": max((ch["probe"]["zombies"] for ch in chunks), default=0),
             "max_worker_dirs": max((ch["probe"].get("worker_dirs", 0) for ch in chunks), default=0)}
    if args.backend == "cuda":
        leaks["gpu_foreign_apps_after_close"] = final.get("gpu_foreign_apps", 0)
        leaks["gpu_other_apps_after_close"] = final.get("gpu_other_apps", 0)  # not the pool's: not a leak
        leaks["gpu_used_mib_before_after"] = [chunks[0]["probe_before"].get("gpu_used_mib") if chunks else None,
                                              final.get("gpu_used_mib")]
    return {"backend": args.backend, "n_requested": args.n, "n_run": n_done, "workers": args.workers,
            "workers_per_gpu": args.workers_per_gpu, "timing_params": args.timing_params,
            "chunk": args.chunk, "seed": args.seed, "accuracy": sum(right.values()) / max(1, sum(total.values())),
            # `unchecked`: the harness established no verdict (its own failure, e.g. device memory held by other
            # processes): no reward either way, so not a wrong verdict, but counted here and excluded from the
            # accuracy over judged candidates
            "unchecked": unchecked,
            "accuracy_judged": (sum(right.values()) - unchecked_accepted) / max(1, sum(total.values()) - unchecked),
            "per_category": {c: {"n": total[c], "right": right[c], "statuses": dict(conf[c])} for c in total},
            "throughput_per_min": {"first_quarter": sum(rates[:k]) / k if rates else 0,
                                   "last_quarter": sum(rates[-k:]) / k if rates else 0, "chunks": rates},
            "leaks": leaks, "mismatches": [m for ch in chunks for m in ch["mismatches"]]}


def plot(chunks: list[dict], path: Path, backend: str) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.5))
    ax[0].plot([c["per_min"] for c in chunks], "o-")
    ax[0].set(xlabel="chunk", ylabel="candidates / min", title=f"soak throughput ({backend})", ylim=(0, None))
    ax[1].plot([c["probe"]["descendants"] for c in chunks], "o-", label="pool processes")
    ax[1].plot([c["probe"].get("root_files", 0) for c in chunks], "s-", label="temp files (no builds)")
    ax[1].plot([c["probe"]["orphans"] for c in chunks], "x-", label="orphans")
    ax[1].set(xlabel="chunk", title="left behind after each chunk")
    ax[1].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def earlier_chunks(path: str, args, cands: list) -> list[dict]:
    """The chunks of an earlier run's soak JSON, checked to be this run's mix (same --seed, --chunk and the
    same candidate at every index); a sentence naming the difference otherwise."""
    try:
        data = json.loads(Path(path).read_text())
        chunks, earlier = data["chunks"], data["summary"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SystemExit(f"--resume_from {path}: not a soak result JSON ({e}); give the soak_<backend>.json "
                         "an earlier run wrote.") from None
    for key, mine in {"backend": args.backend, "seed": args.seed, "chunk": args.chunk, "n_requested": args.n}.items():
        if earlier.get(key) != mine:
            raise SystemExit(f"--resume_from {path}: that run had {key} {earlier.get(key)!r}, this one {mine!r}; "
                             "run with the same --backend, --n, --seed and --chunk to continue it.")
    for ch in chunks:
        for v in ch["verdicts"]:
            if v["i"] >= len(cands) or cands[v["i"]]["name"] != v["name"]:
                raise SystemExit(f"--resume_from {path}: candidate {v['i']} was {v['name']!r} there, not in this "
                                 "mix (soak_mix.py changed since); start a new run instead.")
    return chunks


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--backend", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--workers", type=int, default=None, help="execution workers (default: the pool's)")
    ap.add_argument("--compile_workers", type=int, default=None)
    ap.add_argument("--workers_per_gpu", type=int, default=None, help="PoolConfig.workers_per_gpu (cuda)")
    ap.add_argument("--timing_params", type=json.loads, default=None,
                    help="JSON of Timer.measure keywords (warmup, min_reps, budget_s, ...; default: the pool's), "
                         "e.g. '{\"warmup\": 1, \"min_reps\": 2, \"budget_s\": 0.02}'")
    ap.add_argument("--chunk", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--per_family", type=int, default=2)
    ap.add_argument("--call_timeout", type=float, default=5.0)
    ap.add_argument("--compile_timeout", type=float, default=30.0)
    ap.add_argument("--compile_memory_mib", type=int, default=2048, help="PoolConfig.compile_memory_bytes")
    ap.add_argument("--max_minutes", type=float, default=0, help="stop after the chunk that passes this (0: never)")
    ap.add_argument("--no_torch", action="store_true", help="leave out the torch2cuda families")
    ap.add_argument("--out", default="benchmarks/results/soak")
    ap.add_argument("--resume_from", default=None,
                    help="an earlier run's soak_<backend>.json: its chunks count as saved (a later sitting)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    (out / "chunks").mkdir(parents=True, exist_ok=True)
    escape = out / "escape"
    escape.mkdir(exist_ok=True)
    from kernels_harness.run import HarnessPool, PoolConfig
    tasks, cands = soak_mix.build_mix(args.n, args.seed, args.backend, str(escape.resolve()), args.per_family,
                                      torch=not args.no_torch)
    starts = list(range(0, args.n, args.chunk))
    done = {int(p.stem.split("_")[1]): json.loads(p.read_text()) for p in (out / "chunks").glob("chunk_*.json")
            if json.loads(p.read_text()).get("seed") == args.seed}
    if args.resume_from:
        for ch in earlier_chunks(args.resume_from, args, cands):
            if ch["index"] not in done:
                (out / "chunks" / f"chunk_{ch['index']:04d}.json").write_text(json.dumps(ch))
                done[ch["index"]] = ch
    probe = Probe(args.backend, str(escape))
    t_start, ran = time.time(), 0   # a sitting runs at least one chunk before --max_minutes can stop it
    with HarnessPool(args.backend, workers=args.workers, compile_workers=args.compile_workers, features=False,
                     call_timeout_s=args.call_timeout, compile_timeout_s=args.compile_timeout,
                     cpu_budget_bytes=1 << 20,
                     timing_params=args.timing_params,
                     config=PoolConfig(compile_memory_bytes=args.compile_memory_mib << 20,
                                       **({} if args.workers_per_gpu is None else
                                          {"workers_per_gpu": args.workers_per_gpu}))) as pool:
        print(f"soak: {args.n} candidates on {args.backend}, {len(pool._slots)} workers, {len(tasks)} tasks, "
              f"{len(done)} chunks already saved", flush=True)
        print(f"{'chunk':>5} {'n':>4} {'s':>6} {'/min':>6} {'wrong':>5} {'procs':>5} {'orph':>4} {'stray':>5} {'zomb':>4} "
              f"{'tmpf':>5} {'tmpMB':>6} {'gpuMiB':>7}", flush=True)
        for k, s in enumerate(starts):
            if k in done:
                continue
            if args.max_minutes and ran and time.time() - t_start > 60 * args.max_minutes:
                print(f"stopping: --max_minutes {args.max_minutes} passed", flush=True)
                break
            before = probe(pool)
            ch = run_chunk(pool, tasks, cands[s:s + args.chunk])
            ch.update(seed=args.seed, index=k, probe_before=before, probe=probe(pool), finished=time.time())
            (out / "chunks" / f"chunk_{k:04d}.json").write_text(json.dumps(ch))
            done[k] = ch
            ran += 1
            p = ch["probe"]
            print(f"{k:>5} {ch['n']:>4} {ch['seconds']:>6.0f} {ch['per_min']:>6.1f} {len(ch['mismatches']):>5} "
                  f"{p['descendants']:>5} {p['orphans']:>4} {p.get('stray', 0):>5} {p['zombies']:>4} {p['root_files']:>5} "
                  f"{p['root_bytes'] / 2**20:>6.1f} {p.get('gpu_used_mib', '-')!s:>7}", flush=True)
        root = pool.root
    time.sleep(1.0)
    final = probe(None)
    final["root_left"] = os.path.exists(root)
    chunks = [done[k] for k in sorted(done)]
    n_done = sum(c["n"] for c in chunks)
    summary = summarize(chunks, final, args, n_done)
    summary["after_close"] = final
    summary["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    summary["command"] = " ".join([Path(sys.executable).name] + sys.argv)
    path = out / f"soak_{args.backend}.json"
    path.write_text(json.dumps({"summary": summary, "chunks": chunks}, indent=1))
    plot(chunks, out / f"soak_{args.backend}.png", args.backend)
    print(f"\n{n_done}/{args.n} candidates; verdict accuracy {summary['accuracy']:.4f} ({summary['unchecked']} unchecked; "
          f"{summary['accuracy_judged']:.4f} of the judged); throughput/min first quarter "
          f"{summary['throughput_per_min']['first_quarter']:.1f}, last {summary['throughput_per_min']['last_quarter']:.1f}")
    for c, v in summary["per_category"].items():
        print(f"  {c:<13} {v['right']:>5}/{v['n']:<5} {v['statuses']}")
    print(f"leaks: {summary['leaks']}\n-> {path}")
    for m in summary["mismatches"][:15]:
        print("  MISMATCH", m)
    leaked = any(summary["leaks"].get(k) for k in ("orphans", "escaped_files", "after_close_descendants",
                                               "after_close_orphans", "pool_root_left", "max_stray", "max_zombies",
                                               "gpu_foreign_apps_after_close"))
    return 1 if summary["mismatches"] or leaked else 0


if __name__ == "__main__":
    raise SystemExit(main())
