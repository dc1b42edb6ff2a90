"""CUDA C++ sources built at run time (see cudaperf_jax/models/cuda_matvec.py)."""
