"""How tasks are posed to the policy and answers read back: one module below sft/, rl/, eval/ and rewards/.

    from cudaperf_jax import prompts
    prompts.get("worked_args").messages(task)        # a registered variant (prompts.PROMPTS), chosen by config
    prompts.extract_solution(completion)             # the CUDA source of an answer
    prompts.ChatTokens(tokenizer, prompt=...)        # multi-turn conversations as token ids, built by appending
"""
from cudaperf_jax.prompts.conversation import ChatTokens
from cudaperf_jax.prompts.extract import extract_solution
from cudaperf_jax.prompts.variants import (
    DEFAULT,
    PROMPTS,
    PromptVariant,
    describe_signature,
    feedback_prompt,
    get,
    messages,
    register,
    task_prompt,
)

__all__ = ["DEFAULT", "PROMPTS", "ChatTokens", "PromptVariant", "describe_signature", "extract_solution",
           "feedback_prompt", "get", "messages", "register", "task_prompt"]
