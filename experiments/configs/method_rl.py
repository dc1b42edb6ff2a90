"""The RL stages of the method's chain (issue 45, experiments/method.py): multi-turn GRPO of the SFT policy with a
fresh rank-1 LoRA adapter on every projection, 200 steps of 8 train tasks x 8 samples x 2 turns (gamma 0.4) on the
full unified reward; experiments/configs/rl_lora.py's values except what the chain changes.

    python -m experiments.train_rl --config=experiments/configs/method_rl.py[:dev] \
        --config.model=base/1.5b+runs/sft-1.5b/adapter --config.seed=0 --workdir=runs/rl_full_s0-1.5b
    # the ablation: --config.reward.terms=correct,speed,penalty --config.reward.ranker_path=''

Paths are relative to the driver's ROOT (it runs every stage there): ROOT/tasks is the built dataset (train split
only: never the test split or KernelBench), ROOT/runs/ranker the ranker of the chain's `ranker` stage. The policy is
the SFT policy (its adapter merged into the base), so the KL reference, the base with the RL adapter zeroed, is the
SFT policy.

LoRA: rank 1 on q,k,v,o,gate,up,down (1.15 M parameters of the 1.5B; adapter + Adam + RNG + step = 13.8 MB, so the
exact state of a run fits the one 16 MB file a device call brings back and the 20 MB the tree may hold). LoRA Without
Regret (Thinking Machines, 2025) found rank-1 LoRA matches full fine-tuning for policy-gradient RL (the reward carries
~1 bit an episode), with adapters on every layer and a learning rate ~10x full fine-tuning's.
Learning rate 2e-5: rl.py's full fine-tune rate is 1e-6; LoRA at alpha 32 (scale alpha / r = 32 at rank 1) wants
~10x that, and the best LoRA rate barely moves with the rank at fixed alpha (1e-5..5e-5 for LoRA RL).
KL 0.01 (rl.py 0.02): a rank-1 adapter is itself a strong constraint on how far the policy moves from the SFT
reference; the KL term stays on (and logged, `kl`) to stop slow drift over 200 steps without fighting the reward.
Clip 0.2 / 0.28 (DAPO's clip-higher, RLConfig's default): LoRA changes nothing in the ratio's statistics.
Sampling at temperature 1.0 with top_p 0.95: the log-probs of the loss are the policy's own (temperature 1); the
nucleus cut keeps 1,024-token answers of a 1.5B model from derailing on tail tokens. The share of (task, turn) groups
whose rewards are all equal (no gradient) is logged every step (`equal_groups` / `groups`).

`:dev` shrinks everything for a CPU smoke run (2 steps of 1 task x 2 samples x 2 turns of 16 tokens, cpu harness).
"""
from cudaperf_jax.rl.config import RLConfig
from experiments.configs import rl_lora

TYPED = RLConfig
SIZES = ("full", "dev")


def get_config(size: str = "full"):
    if size not in SIZES:
        raise ValueError(f"unknown size {size!r}; use one of {', '.join(SIZES)}")
    c = rl_lora.get_config()
    c.model = "qwen2.5-coder-1.5b"       # experiments/method.py passes base/<tag>+runs/sft-<tag>/adapter
    c.lora.update(rank=1, targets="q,k,v,o,gate,up,down")   # see above; alpha 32, dropout 0
    c.steps = 200
    c.tasks_per_step = 8
    c.export_merged = False              # only WORKDIR/adapter: the chain evaluates BASE+SFT adapter+RL adapter
    c.tasks.update(dataset="tasks", split="train")           # ROOT/tasks, built by the chain's `tasks` stage
    c.reward.ranker_path = "runs/ranker"                     # the chain's `ranker` stage (train split only)
    c.rollout.update(samples_per_task=8, turns=2,            # 8 x 8 x 2 = 128 answers a step
                     temperature=1.0, top_p=0.95,            # see above
                     gen_batch=16)       # 16 sequences of a 4,096-token prompt per sampler call (the ladder's size
                                         # on an 80 GB H100 beside the harness), up to 8x for shorter prompts
    c.grpo.update(gamma=0.4, lr=2e-5, kl_beta=0.01, clip_eps=0.2, clip_eps_high=0.28)
    if size == "dev":                    # CPU smoke run (tests/experiments/test_method.py)
        c.dtype = "float32"
        c.memory_fraction = 0.0
        c.steps = 2
        c.tasks_per_step = 1
        c.rollout.update(samples_per_task=2, max_new_tokens=16, gen_batch=0)
        c.grpo.update(lr=1e-3)           # a large step, so 2 steps move a tiny policy
        c.harness.update(backend="cpu", workers=1, compile_workers=1)
    return c
