"""A tiny CPU run of experiments.train_rl (tests, smoke checks): smoke suite, 2 samples x 2 turns, cpu harness."""
from experiments.configs import rl


def get_config():
    c = rl.get_config()
    c.dtype = "float32"
    c.memory_fraction = 0.0          # 0: leave JAX's default
    c.steps = 3
    c.tasks_per_step = 1
    c.prompt_bucket = 32
    c.tasks.update(suite="experiments/suites/smoke", dataset="", split="", max_tasks=2)
    c.rollout.update(samples_per_task=2, turns=2, max_new_tokens=16, max_prompt_tokens=2048)
    c.grpo.update(lr=1e-3, micro_batch=4, kl_beta=0.05)
    c.harness.update(backend="cpu", workers=1, compile_workers=1)
    return c
