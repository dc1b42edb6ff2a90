"""The tokenizer's eos is the chat's end of turn: transformers 5.17 reads both Qwen2.5-Coder GGUFs' eos as
<|endoftext|> although their metadata names <|im_end|> (5.25 reads <|im_end|>); load_tokenizer aligns it, so the
policy stops at the end of a turn and multi-turn prompts strip it, whatever the transformers version."""
from cudaperf_jax.models.loading import align_eos_to_chat, chat_end_id
from tests.cudaperf_jax.models import tiny


def _tok(eos):
    tok = tiny.tokenizer()              # <|endoftext|>=0, <|im_start|>=1, <|im_end|>=2; turns end with <|im_end|>
    tok.eos_token = eos
    return tok


def test_the_files_eos_wins_when_it_ends_a_chat_turn():
    tok = _tok("<|endoftext|>")         # as transformers 5.17 reads the Qwen files
    assert chat_end_id(tok, [2, 0]) == 2 and chat_end_id(tok, [0]) is None
    align_eos_to_chat(tok, [2])         # the file's metadata names <|im_end|>
    assert (tok.eos_token, tok.eos_token_id) == ("<|im_end|>", 2)


def test_nothing_changes_when_no_candidate_ends_a_turn_or_there_is_no_template():
    tok = _tok("<|endoftext|>")
    align_eos_to_chat(tok, [0])         # the file names <|endoftext|> too: no turn end among them
    assert tok.eos_token_id == 0
    tok = _tok("<|endoftext|>")
    tok.chat_template = None
    align_eos_to_chat(tok, [2])
    assert tok.eos_token_id == 0
    tok = _tok("<|im_end|>")            # already right (transformers 5.25)
    align_eos_to_chat(tok, [2])
    assert tok.eos_token_id == 2
