"""DedupingEvaluator: repeats of a (task, source) pair, within a call and across calls, are not judged again."""
from cudaperf_jax.eval.dedupe import DedupingEvaluator
from kernels_harness.result import EvalResult
from kernels_harness.run import HarnessPool
from tests.kernels_harness.adversarial.test_adversarial import TASK, cpu, src


class Counting:
    def __init__(self, pool):
        self.pool, self.calls = pool, []

    def evaluate(self, items):
        self.calls.append(len(items))
        return self.pool.evaluate(items)


@cpu
def test_repeats_take_the_first_verdict_and_are_counted():
    good, wrong = src("good_naive"), src("wrong_result")
    with HarnessPool("cpu", workers=1, cpu_budget_bytes=1 << 20, features=False) as pool:
        inner = Counting(pool)
        ev = DedupingEvaluator(inner)
        first = ev.evaluate([(TASK, good), (TASK, wrong), (TASK, good), (TASK, good)])
        second = ev.evaluate([(TASK, wrong), (TASK, good)])
    assert [r.status for r in first] == ["ok", "wrong", "ok", "ok"] and [r.status for r in second] == ["wrong", "ok"]
    assert inner.calls == [2] and ev.judged == 2 and ev.deduplicated == 4
    assert first[2] is not first[0] and first[2].seed == first[0].seed    # a copy of the same verdict
    first[0].feedback = "changed by a caller"
    assert second[1].feedback != "changed by a caller"


def test_an_empty_or_all_repeated_call_sends_nothing():
    class Never:
        def evaluate(self, items):
            raise AssertionError("nothing should be judged")
    ev = DedupingEvaluator(Never())
    assert ev.evaluate([]) == []
    ev.cache[(TASK.id, "x")] = EvalResult(task_id=TASK.id, backend="cpu", status="wrong")
    assert [r.status for r in ev.evaluate([(TASK, "x")] * 3)] == ["wrong"] * 3 and ev.deduplicated == 3
