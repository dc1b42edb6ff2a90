"""Evaluation: suites (what to evaluate on), metrics (KernelBench's fast_p, pass@k, ...), reports."""
