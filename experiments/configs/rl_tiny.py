"""A tiny CPU run of experiments.train_rl (tests, smoke checks): smoke suite, 2 samples x 2 turns, cpu harness."""
from cudaperf_jax.rl.config import RLConfig
from experiments.configs import rl

TYPED = RLConfig


def get_config():
    c = rl.get_config()
    c.dtype = "float32"              # the CPU computes in float32
    c.memory_fraction = 0.0          # 0: leave JAX's default
    c.steps = 3                      # three steps, one task each
    c.tasks_per_step = 1
    c.prompt_bucket = 32             # short tiny-model prompts
    c.tasks.update(suite="experiments/suites/smoke",   # the three smoke tasks, not the dataset
                   dataset="", split="", max_tasks=2)
    c.rollout.update(samples_per_task=2, turns=2,      # 2 samples x 2 turns of 16 tokens
                     max_new_tokens=16, max_prompt_tokens=2048,
                     prompt="plain")                   # ~800 tokens of the tiny tokenizer (worked_example: ~2,400)
    c.grpo.update(lr=1e-3, micro_batch=4, kl_beta=0.05)   # a large step, so a few steps move the tiny policy
    c.harness.update(backend="cpu", workers=1, compile_workers=1)   # the CPU emulation, one worker
    return c
