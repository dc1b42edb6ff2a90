"""Suite selection: a family-balanced subset of a built dataset."""
import collections

import pytest

from cudaperf_jax.eval import suites
from kernels_harness.datasets import build, shards


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    out = tmp_path_factory.mktemp("tasks")
    build.build(out, seed=0, validate_sample=-1)
    return out


def test_spread_takes_families_in_turn(dataset):
    everything = list(shards.load(dataset, split="test"))
    families = collections.Counter(t.family for t in everything)
    n = 2 * len(families)
    first = suites.load_suite(dataset, split="test", max_tasks=n)
    spread = suites.load_suite(dataset, split="test", max_tasks=n, select="spread")
    assert len(spread) == n
    # every family twice (each family of the test split has at least two tasks), in the dataset's own order
    assert collections.Counter(t.family for t in spread) == {f: 2 for f in families}
    assert len({t.family for t in first}) < len(families)
    for f in families:
        mine = [t.id for t in spread if t.family == f]
        assert mine == [t.id for t in everything if t.family == f][:2]


def test_select_is_checked(dataset):
    with pytest.raises(ValueError, match="spread"):
        suites.load_suite(dataset, split="test", max_tasks=3, select="random")
