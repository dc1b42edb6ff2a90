"""Evaluation of a policy or of a directory of solutions on a suite (experiments/evaluate.py).

    python -m experiments.evaluate --config=experiments/configs/evaluate.py \
        --config.suite=data/kernelbench/level1 --config.solutions=DIR --workdir=runs/eval
"""
import ml_collections


def get_config():
    c = ml_collections.ConfigDict()
    c.seed = 0
    c.suite = "experiments/suites/smoke"  # a built dataset | a directory of task JSON files | a KernelBench-layout dir
    c.split = ""                   # for a built dataset: the split to evaluate ("" = all)
    c.max_tasks = 0                # 0 = every task of the suite
    c.select = "first"             # with max_tasks: "first" tasks | "spread" (round-robin over families, balanced)
    c.kernelbench_cache = "data/kernelbench/tasks"  # imported KernelBench tasks reused when their source matches
    c.solutions = ""               # a directory of <task_id>.cu / <task_id>/<name>.cu (instead of a policy)
    c.model = ""                   # a policy: an SFT run dir's export, a GGUF file, a HF directory, or a model name
    c.dtype = "float32"
    c.samples_per_task = 1         # policy: samples per task and turn (n of best-of-n, pass@k)
    c.turns = 1                    # policy: refinement turns (each sees the harness feedback)
    c.max_new_tokens = 1024         # the dataset's verified answers: median 476 tokens, p90 965; 512 cut 42%
    c.max_prompt_tokens = 4096
    c.temperature = 0.7
    c.top_p = 0.95
    c.gen_batch = 0                # most sequences per sampler call (KV-cache memory); 0: a whole turn at once
    c.prompt = "worked_example"    # the prompt variant posing the tasks (cudaperf_jax.prompts.PROMPTS)
    c.decode_kernels = ml_collections.ConfigDict({"path": "auto", "lm_head": "auto", "top_k": "auto", "unroll": 0,
                                                  "tilings": "", "interpret": False})   # see configs/rl.py
    c.pass_k = (1, 2, 5, 10)       # pass@k for the k <= samples_per_task
    c.ranker = ""                  # a ranker checkpoint: best-of-n selected by Ranker.score as well
    c.group_by = "level"           # per-group table: "level" (KernelBench level, else family) | "family"
    c.backend = "auto"             # auto | cpu | cuda
    c.workers = 0                  # harness workers (0 = the pool's default)
    c.torch_compile = True         # torch2cuda on cuda: also time torch.compile (speedup_compile, fast_p/compile)
    c.trials = 2
    return c
