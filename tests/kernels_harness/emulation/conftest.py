"""Fixtures of the emulation tests: a session-wide build directory and a helper that builds and loads."""
import pytest

from kernels_harness.emulation import EmulatedLibrary, build_shared_library


@pytest.fixture(scope="session")
def emu_build_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("emu_build")


@pytest.fixture(scope="session")
def build_lib(emu_build_dir):
    """build_lib(source, name) -> EmulatedLibrary (checks=False), failing the test with the compile log."""
    def _build(source: str, name: str) -> EmulatedLibrary:
        res = build_shared_library(source, emu_build_dir / f"{name}.so", checks=False)
        assert res.ok, res.log
        return EmulatedLibrary(res.path)
    return _build
