"""SFT warm start of Qwen2.5-Coder-1.5B-Instruct with LoRA adapters: SFTConfig's defaults (experiments/configs/sft.py)
except what LoRA changes.

    python -m experiments.train_sft --config=experiments/configs/sft_lora.py --workdir=runs/sft_lora

Rank 16 (alpha 32: the adapters add 2 * x @ A @ B) on q,k,v,o: 4.4M float32 parameters, a 52 MB checkpoint with Adam's
moments, beside a frozen bfloat16 base of 3.1 GB (training.adapters.base_param_dtype). The run writes
runs/sft_lora/export (merged, transformers) and runs/sft_lora/adapter (PEFT, base Qwen/Qwen2.5-Coder-1.5B-Instruct);
`--config.model=runs/sft_lora` starts an RL stage on the merged policy (experiments/configs/rl_lora.py).
"""
from cudaperf_jax.sft.config import SFTConfig
from experiments.configs import sft

TYPED = SFTConfig


def get_config():
    c = sft.get_config()
    c.model = "qwen2.5-coder-1.5b"       # the registered GGUF (cudaperf_jax.assets), fetched on first use
    c.lora.update(rank=16,               # alpha 32 and targets q,k,v,o are LoRAConfig's defaults
                  dropout=0.05)          # PEFT's usual SFT dropout: ~3,400 examples for 4.4M adapter parameters
    c.optim.update(learning_rate=2e-4,   # adapters start at B = 0 and move only through A @ B: LoRA's usual rate is
                                         # ~10x a full fine-tune's (5e-5 here), 1e-4..3e-4 for SFT
                   warmup_steps=30,      # 10% of the 300 steps, then the default cosine decay to 10%
                   b2=0.999)             # Adam's standard b2: the 0.95 default steadies full fine-tunes, not adapters
    c.data.micro_rows = 2                # Qwen's 151,936-word head: float32 logits of 2 rows x 3072 tokens are 3.7 GB
                                         # (6 rows at once: 11 GB, twice that with their gradient)
    return c
