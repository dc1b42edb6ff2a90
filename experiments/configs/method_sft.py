"""The SFT stage of the method's chain (issue 45, experiments/method.py): Qwen2.5-Coder-1.5B-Instruct with a rank-1
LoRA adapter on every projection, the default (scaffold) prompt, the train split with its refinement examples, until the
val loss flattens. experiments/configs/sft_lora.py's values except what the chain changes.

    python -m experiments.train_sft --config=experiments/configs/method_sft.py[:dev] --config.model=base/1.5b \
        --workdir=runs/sft-1.5b          # what experiments/method.py runs, from its ROOT

Why rank 1 on q,k,v,o,gate,up,down: the chain carries an SFT run from one 30-minute GPU lease to the next in one file
of at most 16 MB (what one device call brings back; 20 MB in the tree) holding the exact training state, adapter +
Adam's two moments in float32 + RNG + step, so 12 bytes per adapter parameter: at most ~1.3 M parameters. Rank 1 on
all seven projections of the 1.5B is 1.15 M (13.8 MB; rank 2 would be 27.7 MB), the same budget as rank 4 on q,k,v,o
(1.09 M), and LoRA Without Regret (Thinking Machines, 2025) found adapters on every layer, the MLPs above all, beat
attention-only ones at equal parameters. Rank 1 is capacity-limited for large SFT sets; ~5k examples of ~1.5k tokens
are the regime where low ranks still track a full fine-tune there. The finished run carries the adapter alone
(4.6 MB). The learning rate stays sft_lora's 2e-4: with alpha fixed at 32 (scale alpha / r) the best LoRA rate is
nearly independent of the rank and ~10x a full fine-tune's (5e-5 here).

`:dev` shrinks everything for a CPU smoke run (a few steps on a few elementwise tasks, float32).
"""
from cudaperf_jax.sft.config import SFTConfig
from experiments.configs import sft_lora

TYPED = SFTConfig
SIZES = ("full", "dev")


def get_config(size: str = "full"):
    if size not in SIZES:
        raise ValueError(f"unknown size {size!r}; use one of {', '.join(SIZES)}")
    c = sft_lora.get_config()
    c.model = "qwen2.5-coder-1.5b"       # experiments/method.py passes base/<tag>, its bfloat16 copy of this model
    c.lora.update(rank=1, targets="q,k,v,o,gate,up,down",   # 1.15 M parameters, 13.8 MB with Adam (see above)
                  dropout=0.0)           # 1.15 M parameters for ~5k examples: the rank is the regulariser
    c.steps = 600                        # ~1.4 epochs of the ~2,500 packed rows (6 a step) at most: the early stop
                                         # below usually ends it sooner
    c.eval_every = 25                    # val loss every 25 steps (~50 s of training on an H100) ...
    c.data.val_rows = 48                 # ... on the same 48 packed val rows (~150k tokens, ~6 s) each time
    c.early_stop_patience = 4            # stop when 4 validations in a row (100 steps) do not lower the best val
    c.early_stop_min_delta = 0.005       # loss by 0.005 nats per token: the curve has flattened
    c.checkpoint_every = 10              # a stage killed at its budget loses at most 10 steps (~20 s)
    c.export_merged = False              # only WORKDIR/adapter (PEFT): the chain and the evaluations use
                                         # BASE+ADAPTER; a 3 GB merged copy would be written for nothing
    if size == "dev":                    # CPU smoke run (tests/experiments/test_method.py): minutes, not hours
        c.dtype = "float32"
        c.remat = False
        c.export_dtype = "float32"
        c.steps = 6
        c.eval_every = 2
        c.checkpoint_every = 1
        c.early_stop_patience = 2
        c.early_stop_min_delta = 0.0
        c.data.update(families=("elementwise",), max_train_tasks=3, max_val_tasks=1,
                      seq_len=4096,      # the worked example is ~2,600 tokens of the tiny test tokenizer
                      batch_rows=1, micro_rows=0, val_rows=0)
        c.optim.update(learning_rate=2e-3, warmup_steps=0, schedule="constant")   # move a tiny policy in 6 steps
    return c
