"""Shared pytest setup: slow and gpu tests are deselected by default (see setup.cfg addopts)."""
import os

# Keep JAX on the CPU and quiet in tests, except in a GPU run (`-m gpu`, as `make test-gpu`).
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def pytest_configure(config):
    marks = config.getoption("markexpr", "") or ""
    if not ("gpu" in marks and "not gpu" not in marks):
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
