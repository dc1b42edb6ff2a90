"""experiments.policy_eval's harness line: why torch.compile failed is carried to the line the ladder prints (on the
H100 ladder of 2026-12-07 every torch.compile baseline failed and only the count was printed)."""
import types

from experiments.policy_eval import harness_breakdown
from kernels_harness.result import ConfigResult, EvalResult


def _cand(i, configs, status="ok"):
    r = EvalResult(task_id=f"t{i}", backend="cuda", status=status, configs=configs,
                   seconds={"execute": 1.5 * (i + 1), "compile": 0.5})
    return types.SimpleNamespace(task_index=i, source=f"src{i}", result=r)


def test_breakdown_counts_compile_baselines_and_keeps_their_first_distinct_errors():
    failed = lambda msg: ConfigResult(0, {}, correct=True, compile_baseline_from="failed",
                                      error=f"torch.compile failed: {msg}")
    cands = [_cand(0, [failed("BackendCompilerFailed: no C compiler"), ConfigResult(1, {}, compile_baseline_from="measured")]),
             _cand(1, [failed("BackendCompilerFailed: no C compiler")]),
             _cand(2, [failed("OutOfMemoryError")] + [failed(f"E{k}") for k in range(3)]),
             _cand(2, [failed("a repeat of an answer already counted")])]
    cands[3].source = cands[2].source
    b = harness_breakdown(cands)
    assert b["compile_baseline"] == {"failed": 6, "measured": 1}
    assert b["compile_baseline_errors"] == ["torch.compile failed: BackendCompilerFailed: no C compiler",
                                            "torch.compile failed: OutOfMemoryError", "torch.compile failed: E0"]
    assert b["verdicts"]["ok"]["n"] == 3 and b["max_execute_s"] == 4.5
