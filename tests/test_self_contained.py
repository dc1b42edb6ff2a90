"""The repository explains itself: no tracked file points at a document or path outside the clone."""
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# spelled in pieces so that this file does not match itself
OUTSIDE = ("../" + "shared", "/work/" + "shared", "DESIGN" + ".md")


def _tracked_text_files():
    names = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    for name in filter(None, names.split("\0")):
        path = REPO / name
        if path.suffix in (".png", ".npz", ".zarr", ".so", ".gz", ".whl") or not path.is_file():
            continue
        try:
            yield name, path.read_text()
        except UnicodeDecodeError:
            continue


def test_no_file_points_outside_the_repository():
    hits = [f"{name}:{i + 1}: {line.strip()[:120]}" for name, text in _tracked_text_files()
            for i, line in enumerate(text.splitlines()) if any(p in line for p in OUTSIDE)]
    assert not hits, "files point outside the repository (use docs/design.md):\n" + "\n".join(hits)


def test_the_design_note_is_in_the_repository():
    text = (REPO / "docs" / "design.md").read_text()
    for section in ("## The two halves", "## Tasks and the solution ABI", "## One RL step", "## The unified reward",
                    "## Prompts", "## The run directory"):
        assert section in text
