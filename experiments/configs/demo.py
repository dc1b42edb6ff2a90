"""The main job on embedded defaults: the policy writes kernels for the demo suite (three elementwise tasks).

Override any field on the command line, e.g. `--config.samples_per_task=4 --config.backend=cpu`.
"""
import ml_collections

from cudaperf_jax import prompts


def get_config():
    c = ml_collections.ConfigDict()
    c.seed = 0
    # a model name (`python -m cudaperf_jax.assets list`) | a GGUF file | a HF directory. The default is the
    # smallest code model that writes a correct kernel of this suite: Qwen2.5-Coder-0.5B-Instruct (491 MB, fetched
    # once into $CUDAPERF_CACHE; 6 s here). smollm2-135m ("default" elsewhere) wrote none (0 of 12, 2026-12-07).
    c.model = "qwen2.5-coder-0.5b"
    c.suite = "experiments/suites/demo"    # a directory of task JSON files (experiments/suites/smoke: harder ones)
    c.max_tasks = 3
    c.backend = "auto"             # auto | cpu | cuda
    c.workers = 2                  # harness worker processes
    c.check_references = True      # first run the suite's own implementations through the harness
    c.samples_per_task = 2         # candidates the policy writes per task and turn
    c.turns = 2                    # refinement turns (the second sees the harness feedback)
    c.max_new_tokens = 320         # the 0.5B's answers to this suite: 227 tokens on average, none cut at 320
    c.max_prompt_tokens = 2048     # the scaffold prompt of a demo task is ~1,200-1,300 tokens (SmolLM2)
    c.temperature = 0.2            # the code-policies ladder's temperature
    c.top_p = 0.95
    c.top_k = 20                   # Qwen2.5-Coder's own generation config; on the CPU it also spares a sort of the
                                   # 151,936-word vocabulary per token (0.64 -> 0.19 s a decode step at batch 6)
    c.prompt = prompts.DEFAULT     # the prompt variant (cudaperf_jax.prompts.PROMPTS)
    c.dtype = "float32"            # policy compute dtype on the CPU (bfloat16 matmuls are ~5x slower there)
    return _method(c)


def _method(c):
    # The training stages cost minutes each on 2 CPU cores with the 0.5B (2026-12-07, idle machine): one LoRA SFT
    # step on a 2,368-token row 224 s (its compile included, 312 s with the stage's validation and export); one RL
    # step over 1 task x 2 samples x 2 turns 383 s (rollouts 201 s, then the reference and update passes over four
    # ~1,500-token sequences: ~20 TFLOP on 2 cores), which took `make demo` to 10 minutes. So `make demo` runs one
    # RL step of one turn after the two-turn zero-shot stage, and `make demo-method` the whole miniature (README).
    c.zero_shot = True             # stage 2: the zero-shot run of the policy on the suite
    c.sft_steps = 0                # stage 3: SFT steps of experiments/configs/sft_cpu.py; 0: off
    c.rl_steps = 1                 # stage 4: multi-turn GRPO steps on the suite (LoRA, the unified reward); 0: off
    c.rl_turns = 1                 # turns of an RL rollout (the zero-shot stage's `turns` is its own)
    c.rl_tasks_per_step = 1        # suite tasks per RL step (samples_per_task x turns candidates each)
    c.rl_lr = 1e-4                 # adapters move only through A @ B: ~10x a full fine-tune's rate
    c.rl_kl_beta = 0.02
    c.lora_rank = 8                # SFT and RL train rank-r adapters on q,k,v,o (base frozen); 0: every weight
    c.eval_families = "scan,nbody"  # stage 5: held-out families (the test split)
    c.eval_tasks = 0               # held-out tasks evaluated for the start and RL policies; 0: no evaluation
    return c
