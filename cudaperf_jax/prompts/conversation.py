"""Multi-turn conversations as token ids, built by appending: never re-tokenising what the sampler produced.

    conv = ChatTokens(tokenizer, prompt="worked_example")            # a registered prompt variant
    ids0 = conv.first_prompt(task)                                   # list[int]: system + user + assistant header
    ids1 = conv.next_prompt(task, ids0, completion_ids, feedback_text, status)   # + completion + feedback turn

The feedback turn (end of the assistant turn, a user message holding the harness feedback, the next
assistant header) is rendered by the tokenizer's chat template and tokenized alone, then appended to
the previous prompt ids and the exact completion ids the sampler returned. Re-tokenising the whole
conversation would merge tokens across the boundaries differently (the known cause of train/inference
mismatch in multi-turn RL); here the ids the loss sees are the ids the sampler saw and produced.
"""
from __future__ import annotations

from cudaperf_jax.prompts import variants
from kernels_harness.tasks.schema import Task

_SENTINEL = "\u2063CUDAPERF-ANSWER\u2063"


class ChatTokens:
    """Token-level chat turns for one tokenizer (a transformers tokenizer with a chat template)."""

    def __init__(self, tokenizer, stop_ids=None, prompt: str = variants.DEFAULT):
        if tokenizer is None or not getattr(tokenizer, "chat_template", None):
            raise ValueError("multi-turn rollouts need a tokenizer with a chat template; load the policy with its "
                             "tokenizer (a GGUF file or a Hugging Face directory holding tokenizer files)")
        self.tok = tokenizer
        eos = tokenizer.eos_token_id
        self.stop_ids = {int(s) for s in (stop_ids if stop_ids is not None else [eos] if eos is not None else [])}
        self._end_text = tokenizer.eos_token or ""
        self.prompt = variants.get(prompt)

    def _render(self, msgs: list[dict], generation_prompt: bool) -> str:
        return self.tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=generation_prompt)

    def encode_text(self, text: str) -> list[int]:
        return list(self.tok.encode(text, add_special_tokens=False))

    def first_prompt(self, task: Task) -> list[int]:
        """Token ids of the first turn's prompt (system, user task, assistant header)."""
        return self.encode_text(self._render(self.prompt.messages(task), True))

    def feedback_piece(self, task: Task, feedback: str, ended: bool, status: str | None = None) -> str:
        """The text appended after an assistant answer: end of that turn (unless the answer already ended with
        the end-of-turn token, `ended`), the user feedback message (on a verdict `status`), the next assistant
        header."""
        msgs = self.prompt.messages(task) + [{"role": "assistant", "content": _SENTINEL},
                                             {"role": "user", "content": self.prompt.feedback_prompt(task, feedback,
                                                                                                     status)}]
        text = self._render(msgs, True)
        at = text.rfind(_SENTINEL)
        if at < 0:
            raise ValueError("the chat template drops assistant messages; use a policy whose template keeps them")
        tail = text[at + len(_SENTINEL):]
        if ended and self._end_text and tail.startswith(self._end_text):
            tail = tail[len(self._end_text):]
        return tail

    def ended(self, completion_ids: list[int]) -> bool:
        return bool(completion_ids) and int(completion_ids[-1]) in self.stop_ids

    def feedback_ids(self, task: Task, completion_ids: list[int], feedback: str, status: str | None = None
                     ) -> list[int]:
        """Token ids of the feedback turn after `completion_ids` (tokenized alone)."""
        return self.encode_text(self.feedback_piece(task, feedback, self.ended(completion_ids), status))

    def next_prompt(self, task: Task, prompt_ids: list[int], completion_ids: list[int], feedback: str,
                    status: str | None = None) -> list[int]:
        """prompt_ids + completion_ids + the feedback turn's ids."""
        return (list(prompt_ids) + [int(t) for t in completion_ids]
                + self.feedback_ids(task, completion_ids, feedback, status))
