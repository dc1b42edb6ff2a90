"""Structural features of CUDA kernels and the structural score (see ../shared/DESIGN.md)."""
