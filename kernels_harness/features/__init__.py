"""Structural features of CUDA kernels and the structural score (see docs/design.md, "The harness").

    from kernels_harness import features
    f = features.analyse(task, source, result)   # -> Features (.score in [0, 1], .feedback, .to_dict())

Pieces: `occupancy.theoretical` (sm_90 rules), `static.analyse_source` (tree-sitter CUDA parse:
coalescing, synchronisation, memory hierarchy), `roofline.analyse`, `score` (the combination).
"""
from kernels_harness.features.analyse import Features, analyse

__all__ = ["Features", "analyse"]
