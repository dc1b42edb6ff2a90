"""The task dataset: generated C-to-CUDA and PyTorch-to-CUDA programs with configs and implementations.

    from kernels_harness.datasets import registry, shards, times
    registry.counts()                                   # programs per track and family (no code generated)
    tasks = list(registry.generate(seed=0, families=["stencil"]))   # Task objects, deterministic
    tasks = list(shards.load("data/tasks", split="train"))          # a built dataset (experiments.build_dataset)
    m = times.load("data/times/h200")                    # measured times (kernels_harness.datasets.measure)

Modules: base (family/code helpers), c2cuda/* and torch2cuda/* (the families), registry (all families,
splits), shards (on-disk format), build (writer + incremental validation), validate (harness checks),
measure (GPU timing script) with gpu_timing (one task on the GPU), times (tensorstore store),
card (docs/dataset.md).
"""
