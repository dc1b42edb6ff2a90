"""Multi-turn GRPO on the unified reward (issue 27): SmolLM2-135M on the dataset's train split.

    python -m experiments.train_rl --config=experiments/configs/rl.py --config.model=runs/sft --workdir=runs/rl
Ablation without the structural and ranker terms: --config.reward.terms=correct,speed,penalty
"""
import ml_collections


def get_config():
    c = ml_collections.ConfigDict()
    c.seed = 0
    c.model = "default"              # an SFT run directory, a GGUF file, a HF directory, or a model name (assets list)
    c.dtype = "bfloat16"             # policy compute dtype (float32 on the CPU)
    c.memory_fraction = 0.55         # XLA_PYTHON_CLIENT_MEM_FRACTION, set before JAX starts (rest: the harness)
    c.steps = 40
    c.tasks_per_step = 8
    c.save_every = 1
    c.export_policy = True           # the final policy as a HF directory, WORKDIR/policy
    c.prompt_bucket = 64
    # the rollout sampler's decode kernels (cudaperf_jax.kernels.DecodeKernels): path auto|xla|pallas|cuda,
    # lm_head auto|xla|pallas, top_k auto|xla|cuda, unroll (0: auto), tilings (a JSON table, "": packaged)
    c.decode_kernels = ml_collections.ConfigDict({"path": "auto", "lm_head": "auto", "top_k": "auto", "unroll": 0,
                                                  "tilings": "", "interpret": False})
    c.tasks = ml_collections.ConfigDict({"suite": "", "dataset": "data/tasks", "split": "train", "max_tasks": 0})
    c.rollout = ml_collections.ConfigDict({
        "samples_per_task": 8, "turns": 3, "max_new_tokens": 1024, "max_prompt_tokens": 4096,
        "temperature": 1.0, "top_p": 1.0, "top_k": 0, "feedback_chars": 1200, "history": "full",
        "prompt": "worked_example"})
    c.reward = ml_collections.ConfigDict({
        "terms": "correct,speed,structure,ranker,penalty", "w_correct": 1.0, "w_speed": 0.5,
        "speed_clip_low": -1.0, "speed_clip_high": 2.0, "w_structure": 0.3, "w_ranker": 0.3,
        "gate_compiled": 0.25, "penalty_compile": 0.2, "penalty_hack": 1.0, "ranker_path": ""})
    c.grpo = ml_collections.ConfigDict({
        "advantage": "grpo", "loss": "grpo", "gamma": 0.4, "clip_eps": 0.2, "clip_eps_high": 0.28,
        "kl_beta": 0.02, "lr": 1e-6, "weight_decay": 0.0, "max_grad_norm": 1.0, "micro_batch": 16, "epochs": 1})
    c.harness = ml_collections.ConfigDict({"backend": "auto", "workers": 0, "compile_workers": 0, "seed": 0})
    return c
