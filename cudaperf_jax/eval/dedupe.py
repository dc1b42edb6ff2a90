"""An evaluator that judges each distinct (task, source) once and copies the verdict to its repeats.

    ev = DedupingEvaluator(pool)            # pool: anything with evaluate([(Task, source)]) -> [EvalResult]
    results = ev.evaluate(items)            # same order and length as items
    ev.judged, ev.deduplicated              # candidates sent to the harness / answered from an earlier verdict

At a low temperature many samples of a task are the same text; their verdict (compile, checks, timing) is the same
too, up to timing noise, so judging them again only costs harness time. The cache lives as long as the object
(a rollout's turns share it: a refinement that repeats an earlier answer is not judged again either). A copy is a
deep copy of the first verdict, so callers may annotate results freely.
"""
from __future__ import annotations

import copy


class DedupingEvaluator:
    """Wraps an evaluator; see the module docstring."""

    def __init__(self, evaluator):
        self.evaluator = evaluator
        self.cache: dict[tuple[str, str], object] = {}
        self.judged = 0
        self.deduplicated = 0

    def evaluate(self, items: list) -> list:
        """items: [(Task, source str)] -> [EvalResult], judging only the pairs not seen before."""
        keys = [(task.id, source) for task, source in items]
        todo: dict[tuple[str, str], int] = {}
        for i, k in enumerate(keys):
            if k not in self.cache and k not in todo:
                todo[k] = i
        fresh = dict(zip(todo, self.evaluator.evaluate([items[i] for i in todo.values()]))) if todo else {}
        self.cache.update((k, copy.deepcopy(r)) for k, r in fresh.items())   # kept apart from what callers get
        self.judged += len(todo)
        self.deduplicated += len(items) - len(todo)
        return [fresh.pop(k) if k in fresh else copy.deepcopy(self.cache[k]) for k in keys]
