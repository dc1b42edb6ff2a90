"""The pool's torch.compile medians (kernels_harness.run.baselines.CompileMedians): one per (task, config),
the first measurement kept, an edited task measured again; and the job keys the worker reads."""
import json
from pathlib import Path

from kernels_harness.result import ConfigResult
from kernels_harness.run.baselines import CompileMedians
from kernels_harness.tasks.schema import Task

RELU = Path(__file__).resolve().parents[3] / "data/kernelbench/tasks/level1_19_relu.json"


def _task(**change) -> Task:
    d = json.loads(RELU.read_text())
    d.update(change)
    return Task.from_dict(d)


def test_the_first_measured_median_of_each_config_is_kept_and_handed_to_later_jobs():
    m, task = CompileMedians(), _task()
    assert m.for_job(task) == {}
    first = [ConfigResult(index=0, config={}, compile_baseline_ms=0.5, compile_baseline_from="measured").__dict__,
             ConfigResult(index=3, config={}, compile_baseline_ms=3.2, compile_baseline_from="measured").__dict__,
             ConfigResult(index=1, config={}, compile_baseline_from="failed").__dict__]
    assert m.record(task, first) == 2
    assert m.for_job(task) == {0: 0.5, 3: 3.2}
    # a racing worker measured config 3 too: the first value stays, so every later job compares with one number
    assert m.record(task, [ConfigResult(index=3, config={}, compile_baseline_ms=9.9,
                                        compile_baseline_from="measured")]) == 0
    # a reused median is not recorded again, and a failed compile is not remembered (a later job tries again)
    assert m.record(task, [ConfigResult(index=1, config={}, compile_baseline_ms=1.0,
                                        compile_baseline_from="reused")]) == 0
    assert m.for_job(task) == {0: 0.5, 3: 3.2} and len(m) == 2


def test_an_edited_task_or_another_task_starts_without_medians():
    m, task = CompileMedians(), _task()
    m.record(task, [ConfigResult(index=0, config={}, compile_baseline_ms=0.5, compile_baseline_from="measured")])
    assert m.for_job(_task(source=task.source + "\n# edited\n")) == {}
    assert m.for_job(_task(id="level1_19_relu_copy")) == {}
    assert m.for_job(_task()) == {0: 0.5}


def test_a_config_result_says_where_its_compile_baseline_came_from():
    d = ConfigResult(index=0, config={}, compile_baseline_ms=1.0, compile_baseline_from="reused").__dict__
    assert ConfigResult(**d).compile_baseline_from == "reused"
    assert ConfigResult(index=0, config={}).compile_baseline_from == ""  # older records load unchanged
