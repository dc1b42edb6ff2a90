"""Shared pytest setup: slow and gpu tests are deselected by default (see setup.cfg addopts)."""
import os

# Keep JAX on the CPU and quiet in tests unless a GPU test asks otherwise.
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
