"""The main job on embedded defaults: the policy writes kernels for the demo suite (three elementwise tasks).

Override any field on the command line, e.g. `--config.samples_per_task=4 --config.backend=cpu`.
"""
import ml_collections


def get_config():
    c = ml_collections.ConfigDict()
    c.seed = 0
    # a model name (`python -m cudaperf_jax.assets list`; "default": smollm2-135m) | a GGUF file | a HF directory.
    # Measured 2026-12-07 (2 shared cores): smollm2-135m wrote no correct kernel of this suite (0 of 12),
    # qwen2.5-coder-0.5b 4 of 12 (relu and scale, both turns) at max_new_tokens 384 (README, "Two commands")
    c.model = "default"
    c.suite = "experiments/suites/demo"    # a directory of task JSON files (experiments/suites/smoke: harder ones)
    c.max_tasks = 3
    c.backend = "auto"             # auto | cpu | cuda
    c.workers = 2                  # harness worker processes
    c.check_references = True      # first run the suite's own implementations through the harness
    c.samples_per_task = 2         # candidates the policy writes per task and turn
    c.turns = 2                    # refinement turns (the second sees the harness feedback)
    c.max_new_tokens = 256          # 320 took the demo past 10 minutes on 2 cores (2026-12-06)
    c.max_prompt_tokens = 2048     # the worked_example prompt of a demo task is 1,100-1,300 SmolLM2 tokens
    c.temperature = 0.7
    c.top_p = 0.95
    c.prompt = "worked_example"    # the prompt variant (cudaperf_jax.prompts.PROMPTS)
    c.dtype = "float32"            # policy compute dtype on the CPU; bfloat16 on GPUs is fine
    return _method(c)


def _method(c):
    c.zero_shot = True             # stage 2: the zero-shot run of the policy on the suite
    c.sft_steps = 2                # stage 3: SFT steps of experiments/configs/sft_cpu.py (1024-token rows); 0: off
    c.rl_steps = 2                 # stage 4: multi-turn GRPO steps on the suite; 0: off
    c.rl_lr = 1e-5
    c.rl_kl_beta = 0.02
    c.eval_families = "scan,nbody"  # stage 5: held-out families (the test split)
    c.eval_tasks = 1               # 0: no evaluation
    return c
