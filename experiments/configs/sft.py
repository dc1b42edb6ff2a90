"""SFT warm start of SmolLM2-135M-Instruct on one H200: the defaults of cudaperf_jax.sft.config.SFTConfig, the
production values; every field is a choice of the run.

    python -m experiments.train_sft --config=experiments/configs/sft.py --workdir=runs/sft [--config.steps=400]

Sized for one H200: bf16 compute over float32 weights, 6 packed rows of 3072 tokens per step (~18k tokens,
~10k of them response tokens), 300 steps (~2/3 of an epoch of the train split's ~3,400 fastest implementations, half of
them also taught as refinement examples),
checkpoints every 25 steps so a call of a few minutes resumes where the last one stopped. The CPU demo's
config is experiments/configs/sft_cpu.py. Gradient accumulation: --config.data.micro_rows=2 (3 micro-batches of 2
rows in one jitted step); several GPUs of one host: --config.mesh.fsdp=N.
"""
from cudaperf_jax.experiment.config import to_configdict
from cudaperf_jax.sft.config import SFTConfig

TYPED = SFTConfig


def get_config():
    return to_configdict(SFTConfig())
