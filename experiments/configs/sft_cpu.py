"""SFT in miniature on the CPU backend (the demo's SFT stage): SmolLM2-135M, a few steps on a few tasks.

Measured (2026-12-04, shared 2-core dev machine, load average ~10, with 4 steps, 8 tasks, checkpoints every 2):
10:08 wall but only 207 CPU-seconds in all (user 154 + sys 53; the job got 34% of one core): loading ~40 s,
first step with compilation 194 s wall, later steps 60-125 s wall per 1024-token row; train loss 0.98 -> 0.50,
val loss 0.83 -> 0.47; peak RSS 9.0 GB. On an idle 2-core machine that is roughly 2 minutes; not measured idle.
"""
from cudaperf_jax.sft.config import SFTConfig
from experiments.configs import sft

TYPED = SFTConfig


def get_config():
    c = sft.get_config()
    c.dtype = "float32"              # the CPU computes in float32
    c.steps = 3                      # a few steps
    c.eval_every = 3                 # one validation, after the last step
    c.checkpoint_every = 3           # one checkpoint (params + Adam state of 135M: 1.6 GB) at the end
    c.remat = False                  # short rows: keep the activations
    c.export_dtype = "float32"       # the export as trained
    c.data.families = ("elementwise", "elementwise_chain")   # a few small tasks
    c.data.max_train_tasks = 6
    c.data.max_val_tasks = 1
    c.data.seq_len = 1024            # rows that fit these tasks' prompts and answers
    c.data.batch_rows = 1            # one row per step
    c.optim.learning_rate = 2e-5     # no warmup, a constant small rate
    c.optim.warmup_steps = 0
    c.optim.schedule = "constant"
    return c
