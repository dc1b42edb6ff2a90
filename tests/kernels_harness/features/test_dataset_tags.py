"""On the generated c2cuda dataset, the features separate the strategy tags of a task's implementations."""
import importlib
import pkgutil
import random
import re

import pytest

from kernels_harness import features
from kernels_harness.features import parse

pytestmark = pytest.mark.skipif(parse.parser() is None, reason="tree-sitter CUDA is not installed")


def _dataset_tasks(per_family: int = 6):
    pkg = pytest.importorskip("kernels_harness.datasets.c2cuda")
    for m in pkgutil.iter_modules(pkg.__path__):
        mod = importlib.import_module(f"{pkg.__name__}.{m.name}")
        if not (hasattr(mod, "variants") and hasattr(mod, "build")):
            continue
        vs = mod.variants(random.Random(0))
        random.Random(1).shuffle(vs)
        for p in vs[:per_family]:
            yield m.name, mod.build(p)


def test_strategy_tags_are_separated_on_the_dataset():
    pairs = ge = 0
    smem = smem_ok = shfl = shfl_ok = n = 0
    for _, task in _dataset_tasks():
        fs = [(i, features.analyse(task, i.source, compile=False)) for i in task.implementations if i.expected == "correct"]
        for i, f in fs:
            n += 1
            assert 0.0 <= f.score <= 1.0 and f.kernels, (task.id, i.name, f.notes)
            if "smem_tiled" in i.strategies and "__shared__" in i.source:  # some generated tags overstate
                smem += 1
                smem_ok += bool(f.memory["shared_arrays"])
            if re.search(r"__shfl\w*_sync|__reduce_\w+_sync", i.source):
                shfl += 1
                shfl_ok += bool(f.sync["warp_primitives"])
        naive = [f for i, f in fs if "naive" in i.strategies and "coalesced" not in i.strategies]
        coal = [f for i, f in fs if "coalesced" in i.strategies]
        for a in naive:
            for b in coal:
                if a.components["coalescing"] is not None and b.components["coalescing"] is not None:
                    pairs += 1
                    ge += b.components["coalescing"] >= a.components["coalescing"] - 1e-9
    if n == 0:
        pytest.skip("the dataset generator produced no tasks")
    assert shfl_ok == shfl and smem_ok == smem and smem > 10
    # `coalesced` implementations are at least as coalesced as the `naive` ones of the same task in
    # nearly every pair (the exceptions found are tagged `coalesced` but read a transposed operand strided)
    assert pairs >= 20 and ge >= 0.9 * pairs, (ge, pairs)
