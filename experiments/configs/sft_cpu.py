"""SFT in miniature on the CPU backend (the demo's SFT stage): SmolLM2-135M, a few steps on a few tasks.

    python -m experiments.train_sft --config=experiments/configs/sft_cpu.py --workdir=runs/sft_cpu
"""
from experiments.configs import sft


def get_config():
    c = sft.get_config()
    c.dtype = "float32"
    c.steps = 4
    c.eval_every = 4
    c.checkpoint_every = 2
    c.remat = False
    c.export_dtype = "float32"
    c.data.families = ("elementwise", "elementwise_chain")
    c.data.max_train_tasks = 8
    c.data.max_val_tasks = 2
    c.data.seq_len = 1024
    c.data.batch_rows = 1
    c.optim.learning_rate = 2e-5
    c.optim.warmup_steps = 0
    c.optim.schedule = "constant"
    return c
