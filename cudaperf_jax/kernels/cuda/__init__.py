"""CUDA C++ sources built at run time (see cudaperf_jax/kernels/cuda_build.py)."""
