"""SFT warm start of SmolLM2-135M-Instruct on one H200 (the default); every field is a choice of the run.

    python -m experiments.train_sft --config=experiments/configs/sft.py --workdir=runs/sft [--config.steps=400]

Sized for one H200: bf16 compute over float32 weights, 6 packed rows of 3072 tokens per step (~18k tokens,
~10k of them response tokens), 300 steps (~2/3 of an epoch of the train split's ~3,400 fastest implementations, half of
them also taught as refinement examples),
checkpoints every 25 steps so a call of a few minutes resumes where the last one stopped. The CPU demo's
config is experiments/configs/sft_cpu.py.
"""
import ml_collections


def get_config():
    c = ml_collections.ConfigDict()
    c.seed = 0
    c.model = "default"              # a model name (default = smollm2-135m, qwen2.5-coder-0.5b...) | .gguf | HF dir | SFT run
    c.dtype = "bfloat16"             # compute dtype
    c.param_dtype = "float32"        # stored weights and Adam moments
    c.steps = 300
    c.eval_every = 50                # val loss every N steps (and after the last)
    c.checkpoint_every = 25
    c.keep_checkpoints = 2
    c.remat = True                   # recompute layer activations in the backward pass
    c.export = True                  # <workdir>/export: a Hugging Face directory of the result
    c.export_dtype = "bfloat16"
    c.progress = True

    c.data = ml_collections.ConfigDict()
    c.data.dataset_seed = 0          # kernels_harness.datasets.registry seed
    c.data.tracks = ("c2cuda", "torch2cuda")
    c.data.families = ()             # () = all families of the tracks
    c.data.responses = "fastest"     # fastest | all_correct | baseline (verified on the H200 times)
    c.data.refine = 0.5              # fraction of answers also taught as a refinement turn (earlier answer + feedback)
    c.data.prompt = "worked_example"  # the prompt variant posing the tasks (cudaperf_jax.prompts.PROMPTS)
    c.data.times = "data/times/h200"
    c.data.max_train_tasks = 0       # 0 = all
    c.data.max_val_tasks = 0
    c.data.shuffle_seed = 0
    c.data.seq_len = 3072            # tokens per packed row (longer examples are dropped and counted): 2048 dropped
                                     # 522 of the 5,135 train examples (67 single-turn), 3072 drops 53
    c.data.batch_rows = 6            # rows per step (~18k tokens)
    c.data.val_rows = 0              # 0 = every val row

    c.optim = ml_collections.ConfigDict()
    c.optim.learning_rate = 5e-5
    c.optim.schedule = "cosine"      # cosine | linear | constant after warmup
    c.optim.warmup_steps = 20
    c.optim.end_lr_fraction = 0.1
    c.optim.weight_decay = 0.0
    c.optim.b1 = 0.9
    c.optim.b2 = 0.95
    c.optim.eps = 1e-8
    c.optim.grad_clip = 1.0
    return c
