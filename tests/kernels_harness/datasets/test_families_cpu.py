"""A sample of every family's implementations passes the harness on the cpu backend (and the labelled
negatives fail): one program per family, the smallest config, every implementation."""
import pytest

from kernels_harness.datasets import registry, validate


def _sample_one_per_family():
    tasks = []
    for fam in registry.FAMILIES:
        vs = registry.variants(fam.name)
        # prefer a program that carries a labelled negative, so both verdicts are exercised
        built = [registry.build(fam.name, v) for v in vs[:12]]
        pick = next((t for t in built if any(i.expected == "wrong" for i in t.implementations)), built[0])
        tasks.append(pick)
    return tasks


@pytest.fixture(scope="module")
def records():
    from kernels_harness.run import HarnessPool
    tasks = _sample_one_per_family()
    with HarnessPool(backend="cpu", workers=2, features=False) as pool:
        return tasks, validate.validate_tasks(tasks, backend="cpu", pool=pool)


def test_every_family_sample_gets_the_labelled_verdicts(records):
    tasks, recs = records
    assert len(recs) == len(registry.FAMILIES)
    failed = [(r["id"], r["mismatches"]) for r in recs if not r["ok"]]
    assert not failed, failed
    # the verdicts are real: correct ones are ok, negatives are not
    by_id = {t.id: t for t in tasks}
    n_wrong = 0
    for r in recs:
        for impl in by_id[r["id"]].implementations:
            status = r["verdicts"][impl.name]
            assert (status == "ok") == (impl.expected == "correct"), (r["id"], impl.name, status)
            n_wrong += impl.expected == "wrong"
    assert n_wrong >= 5


def test_validation_reports_a_broken_implementation():
    import dataclasses
    t = registry.build("elementwise", registry.variants("elementwise")[0])
    good = t.baseline
    broken = dataclasses.replace(good, name="broken", baseline=False,
                                 source=good.source.replace("if (i < n)", "if (i < n / 2)"))
    assert broken.source != good.source
    t = dataclasses.replace(t, implementations=(good, broken))
    rec = validate.validate_tasks([t], backend="cpu", workers=1, progress=False)[0]
    assert not rec["ok"] and rec["verdicts"]["broken"] == "wrong" and rec["verdicts"][good.name] == "ok"
    assert "broken: expected correct, got wrong" in rec["mismatches"][0]
