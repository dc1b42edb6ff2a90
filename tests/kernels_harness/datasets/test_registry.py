"""The generator: deterministic, large enough, every task valid, splits hold out whole families."""
import collections
import json

import pytest

from kernels_harness.datasets import registry
from kernels_harness.tasks.schema import Task


@pytest.fixture(scope="module")
def all_tasks():
    return list(registry.generate(seed=0))


def test_counts_meet_the_issue(all_tasks):
    counts = registry.counts(0)
    assert counts["c2cuda"]["total"] >= 2900
    assert counts["torch2cuda"]["total"] >= 1000
    by_track = collections.Counter(t.track for t in all_tasks)
    assert by_track["c2cuda"] == counts["c2cuda"]["total"]
    assert by_track["torch2cuda"] == counts["torch2cuda"]["total"]
    for track in counts.values():
        assert all(n >= 48 for n in track["families"].values()), track["families"]


def test_generator_is_deterministic():
    fams = ["elementwise", "stencil", "softmax", "conv_epilogue", "polybench"]
    a = [t.to_json() for t in registry.generate(seed=0, families=fams, limit_per_family=20)]
    b = [t.to_json() for t in registry.generate(seed=0, families=fams, limit_per_family=20)]
    assert a == b
    c = [t.to_json() for t in registry.generate(seed=1, families=fams, limit_per_family=20)]
    assert a != c  # the seed changes the sampled programs and sizes


def test_every_task_is_a_valid_task_file(all_tasks):
    ids = set()
    for t in all_tasks:
        assert t.id not in ids, t.id
        ids.add(t.id)
        again = Task.from_dict(json.loads(t.to_json()))  # the harness's own validation
        assert again == t
        assert len(t.configs) >= 3
        assert [c["name"] for c in t.configs] == ["small", "medium", "large"]
        correct = [i for i in t.implementations if i.expected == "correct"]
        assert len(correct) >= 3, t.id
        assert sum(i.baseline for i in t.implementations) == 1 and t.baseline.expected == "correct"
        assert all(i.strategies for i in t.implementations)
        assert all(i.defect for i in t.implementations if i.expected == "wrong")
        for impl in t.implementations:  # the solution ABI, as the harness will call it
            assert t.c_prototype() in impl.source, (t.id, impl.name)
        if t.track == "c2cuda":
            assert f"void {t.entry}(" in t.source
        else:
            assert "class Model(nn.Module)" in t.source and "def get_inputs" in t.source
            assert set(t.extra["constants"]) <= set(t.configs[0])


def test_sizes_grow_from_tiny_to_gpu_filling(all_tasks):
    for t in all_tasks:
        sizes = [t.config_bytes({k: v for k, v in c.items() if k != "name"}) for c in t.configs]
        assert sizes[0] < 4 << 20, (t.id, sizes)          # tiny: emulated on the cpu
        assert sizes[0] < sizes[1] < sizes[2], (t.id, sizes)
        work = max(sizes[2], t.flops_at({k: v for k, v in t.configs[2].items() if k != "name"}))
        assert work >= 4 << 20, (t.id, sizes[2])          # large: tens of microseconds on an H200


def test_variety_within_families(all_tasks):
    by_fam = collections.defaultdict(list)
    for t in all_tasks:
        by_fam[t.family].append(t)
    for fam, ts in by_fam.items():
        programs = {(t.source, json.dumps([a.to_dict() for a in t.signature]), json.dumps(t.configs, sort_keys=True))
                    for t in ts}
        assert len(programs) == len(ts), fam  # no two programs are copies (same code and sizes)
        assert len({t.source for t in ts}) >= 8, fam  # the code itself varies (op, dtype, layout, boundary)
        strategies = {s for t in ts for i in t.implementations for s in i.strategies}
        assert len(strategies) >= 3, (fam, strategies)
    c2 = [t for t in all_tasks if t.track == "c2cuda"]
    dtypes = collections.Counter(a.dtype for t in c2 for a in t.arrays)
    assert {"float32", "float64", "int32", "uint8"} <= set(dtypes)


def test_negatives_exist_with_each_defect(all_tasks):
    defects = collections.Counter(i.defect for t in all_tasks for i in t.implementations if i.expected == "wrong")
    assert {"off_by_one", "missing_barrier", "race"} <= set(defects)
    assert sum(defects.values()) >= 200


def test_splits_hold_out_whole_families(all_tasks):
    split_by_fam = collections.defaultdict(set)
    for t in all_tasks:
        split_by_fam[(t.track, t.family)].add(t.split)
    for (track, fam), splits in split_by_fam.items():
        if fam in registry.HELD_OUT[track]:
            assert splits == {"test"}
        else:
            assert "test" not in splits and "train" in splits
    n_val = sum(t.split == "val" for t in all_tasks)
    assert 0.03 * len(all_tasks) < n_val < 0.1 * len(all_tasks)


def test_unknown_family_is_a_one_line_error():
    from kernels_harness.tasks.errors import TaskError
    with pytest.raises(TaskError, match="unknown families"):
        registry.select(["no_such_family"])


def test_timing_defects_may_pass_on_real_gpus_but_not_in_emulation():
    from kernels_harness.datasets.validate import agrees
    assert agrees("correct", "ok") and not agrees("correct", "wrong")
    assert agrees("wrong", "wrong", "missing_barrier", "cuda")
    assert agrees("wrong", "ok", "missing_barrier", "cuda")       # the GPU happened to order the threads well
    assert not agrees("wrong", "ok", "missing_barrier", "cpu")    # the emulation reproduces it every time
    assert not agrees("wrong", "ok", "off_by_one", "cuda")        # a deterministic defect must be caught
