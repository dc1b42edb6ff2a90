"""Multi-turn GRPO of Qwen2.5-Coder-1.5B-Instruct with LoRA adapters: RLConfig's defaults (experiments/configs/rl.py)
except what LoRA changes.

    python -m experiments.train_rl --config=experiments/configs/rl_lora.py --workdir=runs/rl_lora \
        [--config.model=runs/sft_lora]       # on the SFT stage's merged policy: a fresh adapter, the SFT policy as
                                             # its reference

The reference policy is the base itself (the adapters zeroed), so the KL term keeps the adapters near the start
policy without a second copy of the weights; the defaults kl_beta 0.02 (within the usual 0.01..0.04 for GRPO with a
reference) and the DAPO-style asymmetric clip 0.2 / 0.28 (more room for raising the probability of rare good
tokens) apply unchanged. The sampler decodes from the merged weights (lora.merge after every update).
"""
from cudaperf_jax.rl.config import RLConfig
from experiments.configs import rl

TYPED = RLConfig


def get_config():
    c = rl.get_config()
    c.model = "qwen2.5-coder-1.5b"       # or an SFT run directory (--config.model=runs/sft_lora)
    c.lora.rank = 16                     # alpha 32, targets q,k,v,o: LoRAConfig's defaults; dropout 0 (its default):
                                         # the sampler's log-probs (the ratio's old policy) are drawn without it
    c.grpo.update(lr=2e-5,               # adapters need ~10x a full fine-tune's 1e-6 (1e-5..5e-5 for LoRA RL): they
                                         # start at zero and reach the weights only through alpha / r * A @ B
                  micro_batch=4)         # sequences of up to ~5k tokens: XLA's attention scores [4, 12, L, L] float32
                                         # are ~5 GB per layer at 5k (16 at once: 20 GB)
    return c
