"""On an NVIDIA GPU: one program per family, every config, every implementation through the harness
(`make test-gpu`): correct-labelled implementations pass, labelled negatives fail."""
import pytest

from kernels_harness.datasets import registry, validate

pytestmark = pytest.mark.gpu


def test_every_family_on_the_gpu():
    from kernels_harness.run import HarnessPool
    tasks = []
    for fam in registry.FAMILIES:
        built = [registry.build(fam.name, v) for v in registry.variants(fam.name)[:12]]
        tasks.append(next((t for t in built if any(i.expected == "wrong" for i in t.implementations)), built[0]))
    with HarnessPool(backend="cuda", features=False) as pool:
        recs = validate.validate_tasks(tasks, backend="cuda", pool=pool)
    failed = [(r["id"], r["mismatches"]) for r in recs if not r["ok"]]
    assert not failed, failed
