"""Typed configs: dataclass trees <-> ConfigDicts, one-sentence errors, field help from source comments."""
import dataclasses

import pytest

from cudaperf_jax.experiment.config import (
    ConfigFieldError,
    all_fields,
    config_file_comments,
    field_docs,
    flat_fields,
    from_configdict,
    to_configdict,
)


@dataclasses.dataclass(frozen=True)
class Inner:
    backend: str = "auto"          # auto | cpu | cuda
    workers: int = 0               # harness worker processes
                                   # (0: the pool's default)
    lr: float = 1e-3

    def __post_init__(self):
        if self.backend not in ("auto", "cpu", "cuda"):
            raise ValueError(f"backend={self.backend!r}: choose auto, cpu or cuda")


@dataclasses.dataclass(frozen=True)
class Outer:
    steps: int = 3                 # how many steps
    targets: tuple[str, ...] = ("q", "v")
    name: str | None = None
    inner: Inner = Inner()


def test_round_trip_and_overrides():
    cd = to_configdict(Outer())
    cd.inner.workers = 4
    cd.targets = ("q", "k", "v")
    cd.inner.lr = 1                # an int where a float goes
    cfg = from_configdict(Outer, cd)
    assert cfg == Outer(targets=("q", "k", "v"), inner=Inner(workers=4, lr=1.0))
    assert isinstance(cfg.inner.lr, float)
    assert all_fields(Outer) == ["steps", "targets", "name", "inner.backend", "inner.workers", "inner.lr"]
    assert flat_fields(cd)["inner.workers"] == 4


def test_errors_are_one_sentence_naming_the_field():
    with pytest.raises(ConfigFieldError, match=r"^unknown config field inner.worker; did you mean inner.workers\?$"):
        from_configdict(Outer, {"inner": {"worker": 1}})
    with pytest.raises(ConfigFieldError, match=r"unknown config field step; did you mean steps\?"):
        from_configdict(Outer, {"step": 1})
    with pytest.raises(ConfigFieldError, match=r"steps='3': must be an integer, like the default 3"):
        from_configdict(Outer, {"steps": "3"})
    with pytest.raises(ConfigFieldError, match=r"config.inner: backend='gpu': choose auto, cpu or cuda"):
        from_configdict(Outer, {"inner": {"backend": "gpu"}})


def test_field_docs_come_from_the_comments():
    docs = field_docs(Outer)
    assert docs["steps"] == "how many steps"
    assert docs["inner.backend"] == "auto | cpu | cuda"
    assert docs["inner.workers"] == "harness worker processes (0: the pool's default)"
    assert "inner.lr" not in docs


def test_config_file_comments(tmp_path):
    f = tmp_path / "c.py"
    f.write_text("import ml_collections\n\ndef get_config():\n    c = ml_collections.ConfigDict()\n"
                 "    c.steps = 40                # forty steps\n"
                 "    c.tasks = ml_collections.ConfigDict({\"suite\": \"\",   # a directory\n"
                 "                                         \"split\": \"train\"})\n"
                 "    c.rollout.update(turns=2,   # two turns\n                     samples=4)\n    return c\n")
    assert config_file_comments(f) == {"steps": "forty steps", "tasks.suite": "a directory",
                                       "rollout.turns": "two turns"}
