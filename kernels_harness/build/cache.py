"""An on-disk cache of builds, shared by concurrent processes: a repeated candidate is compiled once.

    cache = BuildCache()                                  # $CUDAPERF_CACHE/builds, 4 GiB at most
    key = build_key("solution", "cuda", source, entry, compiler=nvcc.compiler_id("sm_90"))
    hit = cache.get(key, dest_dir)      # build dict {ok, log, path (a copy in dest_dir), resources, ...}
    cache.put(key, build)               # after a build (its library, if any, is linked or copied in)

An entry is a directory `<root>/entries/<key>/` with meta.json and, for a successful build, lib.so;
it is written in a private temporary directory and renamed into place, so a reader sees a whole entry
or none, and two processes that build the same key both succeed (the second rename loses, harmlessly).
`get` copies (hard-links where it can) the library out, so an eviction never pulls a library from under
a running job. When the entries exceed `max_bytes`, the least recently used are removed.
The key covers the source, the entry, the kind, backend, arch and checks, the compiler's version and
flags, and the harness's own build code (kernels_harness/build, the emulation, the compile job).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

_PKG = Path(__file__).resolve().parents[1]
_CODE_FILES = ("build/nvcc.py", "build/batch.py", "run/compile.py", "emulation/build.py", "emulation/rewrite.py")
_CODE_HASH: list[str] = []


def cache_root() -> Path:
    """The project's one cache directory: $CUDAPERF_CACHE, else ~/.cache/cudaperf (builds, emulation runtime, device
    peaks, the JAX side's models and CUDA FFI library: cudaperf_jax.assets.cache_dir is this)."""
    return Path(os.environ.get("CUDAPERF_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "cudaperf"))


def default_root() -> Path:
    """<cache_root()>/builds."""
    return cache_root() / "builds"


def code_hash() -> str:
    """A hash of the harness code that turns a source into a library (a change invalidates the cache)."""
    if not _CODE_HASH:
        h = hashlib.sha256()
        for rel in _CODE_FILES:
            p = _PKG / rel
            h.update(rel.encode() + b"\0" + (p.read_bytes() if p.is_file() else b""))
        for p in sorted((_PKG / "emulation" / "include").glob("*.h")):
            h.update(p.name.encode() + b"\0" + p.read_bytes())
        _CODE_HASH.append(h.hexdigest()[:16])
    return _CODE_HASH[0]


def build_key(kind: str, backend: str, source: str, entry: str = "", compiler: str = "", **flags) -> str:
    """The hex key of one build: everything that decides what the library (and its log) holds."""
    parts = [kind, backend, entry, compiler, code_hash(), json.dumps(flags, sort_keys=True, default=str), source]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def _link_or_copy(src: str | Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


class BuildCache:
    """See the module docstring. `max_bytes`: bound on the libraries' total size (least recently used
    entries go first); checked every `check_every` puts."""

    def __init__(self, root: str | Path | None = None, max_bytes: int = 4 << 30, check_every: int = 64):
        if max_bytes <= 0:
            raise ValueError("max_bytes must be positive; disable the cache instead of giving it no room")
        self.root = Path(root) if root else default_root()
        self.entries = self.root / "entries"
        self.entries.mkdir(parents=True, exist_ok=True)
        self.max_bytes, self.check_every = max_bytes, check_every
        self.hits = self.misses = self.puts = 0

    def _dir(self, key: str) -> Path:
        return self.entries / key

    def get(self, key: str, dest_dir: str | Path) -> dict | None:
        """The cached build (its library copied into dest_dir as <key>.so), or None."""
        d = self._dir(key)
        try:
            meta = json.loads((d / "meta.json").read_text())
            if meta.get("ok"):
                dst = Path(dest_dir) / f"{key}.so"
                if not dst.exists():
                    tmp = Path(dest_dir) / f".{key}.{os.getpid()}.tmp"
                    _link_or_copy(d / "lib.so", tmp)
                    os.replace(tmp, dst)
                meta["path"] = str(dst)
            os.utime(d)  # least recently used goes first
        except (OSError, ValueError):
            self.misses += 1
            return None
        self.hits += 1
        meta["cached"] = True
        return meta

    def put(self, key: str, build: dict) -> None:
        """Stores a finished build (not a compiler crash or timeout: those are not the source's fault)."""
        log = build.get("log") or ""
        if build.get("setup_error") or "timed out" in log or "compiler worker failed" in log \
                or "compiler process failed" in log:
            return
        if self._dir(key).is_dir():
            return
        meta = {k: build.get(k) for k in ("ok", "log", "resources", "symbol", "seconds", "batch_size")}
        try:
            tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=self.root))
            if build.get("ok"):
                _link_or_copy(build["path"], tmp / "lib.so")
            (tmp / "meta.json").write_text(json.dumps(meta))
            try:
                os.rename(tmp, self._dir(key))
            except OSError:  # another process stored it first
                shutil.rmtree(tmp, ignore_errors=True)
        except OSError:
            return
        self.puts += 1
        if self.puts % self.check_every == 0:
            self.evict()

    def size(self) -> int:
        total = 0
        for d in self.entries.iterdir():
            try:
                total += (d / "lib.so").stat().st_size if (d / "lib.so").exists() else 0
                total += (d / "meta.json").stat().st_size
            except OSError:
                continue
        return total

    def evict(self) -> int:
        """Removes least recently used entries until the total is under 90% of max_bytes; returns how many."""
        rows = []
        for d in self.entries.iterdir():
            try:
                lib = d / "lib.so"
                size = (lib.stat().st_size if lib.exists() else 0) + (d / "meta.json").stat().st_size
                rows.append((d.stat().st_mtime, size, d))
            except OSError:
                continue
        total = sum(r[1] for r in rows)
        removed = 0
        for _, size, d in sorted(rows):
            if total <= 0.9 * self.max_bytes:
                break
            trash = self.root / f".trash-{os.getpid()}-{time.monotonic_ns()}"
            try:
                os.rename(d, trash)  # atomic: readers see the whole entry or none
            except OSError:
                continue
            shutil.rmtree(trash, ignore_errors=True)
            total -= size
            removed += 1
        return removed
