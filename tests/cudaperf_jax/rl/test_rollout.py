"""Multi-turn rollouts on a tiny random policy judged by the real harness (cpu backend): the ids of the loss are
the sampler's ids, turn t+1's prompt is turn t's prompt + completion + the feedback turn, and the sampler's
log-probs match a teacher-forced forward pass over the batch the trainer builds."""
from pathlib import Path

import numpy as np
import pytest

from cudaperf_jax.prompts import ChatTokens
from cudaperf_jax.rl.rollout import RolloutConfig, rollout, truncation_note

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    from cudaperf_jax.generation.sampler import Sampler
    from cudaperf_jax.models.loading import load_policy
    from tests.cudaperf_jax.models import tiny
    d = tmp_path_factory.mktemp("policy")
    tiny.hf_model("llama").save_pretrained(d)
    tiny.tokenizer().save_pretrained(d)
    model, tok = load_policy(d)
    return model, Sampler(model, tok, prompt_bucket=32)


@pytest.fixture(scope="module")
def smoke_tasks():
    from kernels_harness.tasks.schema import load_task
    return [load_task(p) for p in sorted((REPO / "experiments/suites/smoke").glob("*.json"))][:2]


class _Recorder:
    """Wraps the real pool and keeps what it was asked (sources per call); a HarnessClient's pool."""

    def __init__(self, pool):
        self.pool, self.calls = pool, []

    def evaluate(self, items):
        self.calls.append([s for _, s in items])
        return self.pool.evaluate(items)


def test_multi_turn_ids_are_appended_never_retokenised(policy, smoke_tasks):
    from cudaperf_jax.rewards.bridge import HarnessClient
    from cudaperf_jax.rl.batch import build_batch
    from cudaperf_jax.rl.objective import make_logprob_fn
    from cudaperf_jax.training import split_model
    from kernels_harness.run.pool import HarnessPool
    model, sampler = policy
    cfg = RolloutConfig(samples_per_task=2, turns=2, max_new_tokens=12, max_prompt_tokens=4096, temperature=1.0)
    hooked, lines = [], []
    with HarnessPool("cpu", workers=1, compile_workers=1) as pool:
        rec = _Recorder(pool)
        client = HarnessClient(rec, smoke_tasks, sampler.tokenizer)
        ro = rollout(sampler, client, smoke_tasks, cfg, seed=3,
                     on_generated=lambda t, cs: hooked.append((t, len(cs))), log=lines.append)
    assert len(ro.candidates) == 2 * 2 * 2 and hooked == [(0, 4), (1, 4)]
    assert [ln.split(":")[0] for ln in lines] == ["turn 0", "turn 1"] and all("4 samples" in ln for ln in lines)
    assert len(rec.calls) == 2 and all(len(c) == 4 for c in rec.calls)   # one harness call per turn, batched
    conv = ChatTokens(sampler.tokenizer, stop_ids=sampler.cfg.eos_ids)
    for k, task in enumerate(smoke_tasks):
        for g in range(2):
            c0, c1 = ro.at(0, k, g), ro.at(1, k, g)
            assert c0.prompt_ids.tolist() == conv.first_prompt(task)
            said = c0.result.feedback or c0.result.status
            if not c0.stopped:  # cut at the 12-token budget: the feedback says so before the harness's words
                said = truncation_note(12) + " " + said
            fb = conv.feedback_ids(task, c0.completion_ids.tolist(), said, c0.result.status)
            assert c1.prompt_ids.tolist() == c0.prompt_ids.tolist() + c0.completion_ids.tolist() + fb
            assert c1.context == "full" and c0.result.status in ("compile_error", "hack", "wrong", "runtime_error")
            assert c0.text == sampler.tokenizer.decode(c0.completion_ids.tolist(), skip_special_tokens=True)
    cut = [c for c in ro.turn(0) if not c.stopped]
    assert cut and all(len(c.completion_ids) == 12 for c in cut)
    after = len(cut[0].prompt_ids) + 12   # turn 1's prompt past turn 0's prompt and completion: the feedback turn
    assert "cut off after 12 tokens" in sampler.tokenizer.decode(
        ro.at(1, cut[0].task_index, cut[0].sample).prompt_ids[after:].tolist())
    # the feedback piece holds the harness's words, rendered by the chat template
    piece = conv.feedback_piece(smoke_tasks[0], "it did not compile", ended=True)
    assert "it did not compile" in piece and piece.endswith("<|im_start|>assistant\n")
    assert not piece.startswith("<|im_end|>") and conv.feedback_piece(smoke_tasks[0], "x", False).startswith("<|im_end|>")
    # the train batch holds the sampler's ids, and a teacher-forced pass gives the sampler's log-probs
    cands = ro.turn(1)
    batch = build_batch(cands, np.zeros(len(cands)), sampler.pad_id, bucket=32)
    p = batch["tokens"].shape[1] - 32
    for i, c in enumerate(cands):
        row = batch["tokens"][i][batch["kv_mask"][i]]
        assert row.tolist() == c.prompt_ids.tolist() + c.completion_ids.tolist()
    graphdef, params, rest = split_model(model)
    logp = np.asarray(make_logprob_fn(graphdef)(params, rest, batch["tokens"], batch["positions"], batch["kv_mask"]))
    m = batch["loss_mask"] > 0
    np.testing.assert_allclose(logp[m], batch["old_logp"][m], atol=2e-4)
    assert m.sum() == sum(len(c.completion_ids) for c in cands) and p > 0
    # the client rewarded every candidate from its verdict (the unified reward's rows, "total" last)
    for c in ro.candidates:
        assert c.rewards.shape == (len(client.names),) and c.rewards[-1] == pytest.approx(c.rewards[:-1].sum())
    assert ro.rewards("correct").shape == (2, 2, 2)


def test_rollout_is_a_function_of_its_seed_and_windows_long_prompts(policy, smoke_tasks):
    from cudaperf_jax.rewards.bridge import HarnessClient
    _, sampler = policy

    class Fixed:  # a verdict without running anything: here only the prompt bookkeeping is under test
        def evaluate(self, items):
            from kernels_harness.result import EvalResult
            return [EvalResult(task_id=t.id, backend="cpu", status="compile_error", feedback="error: " + "x " * 200)
                    for t, _ in items]

    fixed = HarnessClient(Fixed(), smoke_tasks, sampler.tokenizer)
    first = len(ChatTokens(sampler.tokenizer).first_prompt(smoke_tasks[0]))
    cfg = RolloutConfig(samples_per_task=2, turns=3, max_new_tokens=8, max_prompt_tokens=first + 40)
    a = rollout(sampler, fixed, smoke_tasks[:1], cfg, seed=5)
    b = rollout(sampler, fixed, smoke_tasks[:1], cfg, seed=5)
    assert [c.completion_ids.tolist() for c in a.candidates] == [c.completion_ids.tolist() for c in b.candidates]
    import dataclasses
    chunked = rollout(sampler, fixed, smoke_tasks, dataclasses.replace(cfg, gen_batch=3), seed=5)
    whole = rollout(sampler, fixed, smoke_tasks, cfg, seed=5)   # 4 sequences a turn: chunks of 3 and 1 (padded)
    assert [x.completion_ids.tolist() for x in chunked.candidates] == [x.completion_ids.tolist() for x in whole.candidates]
    np.testing.assert_allclose(np.concatenate([x.logprobs for x in chunked.candidates]),
                               np.concatenate([x.logprobs for x in whole.candidates]), atol=1e-5)
    c = rollout(sampler, fixed, smoke_tasks[:1], cfg, seed=6)
    assert [x.completion_ids.tolist() for x in a.candidates] != [x.completion_ids.tolist() for x in c.candidates]
    # the feedback (~200 tokens) does not fit in 40 more tokens: later turns start afresh from the first prompt
    assert all(x.context == "fresh" and len(x.prompt_ids) == first for x in a.turn(1) + a.turn(2))
    assert all(len(x.prompt_ids) <= cfg.max_prompt_tokens for x in a.candidates)


def test_config_is_validated():
    with pytest.raises(ValueError, match="samples_per_task"):
        RolloutConfig(samples_per_task=0)
    with pytest.raises(ValueError, match="history"):
        RolloutConfig(history="all")
    with pytest.raises(ValueError, match="unknown prompt 'x'"):
        RolloutConfig(prompt="x")


def test_train_batches_take_the_ladders_lengths():
    from types import SimpleNamespace

    from cudaperf_jax.generation.sampler import padded_length
    from cudaperf_jax.rl.batch import build_batch
    c = SimpleNamespace(prompt_ids=np.arange(1, 1101, dtype=np.int32) % 50, completion_ids=np.ones(70, np.int32),
                        logprobs=np.zeros(70, np.float32), ref_logprobs=None)
    b = build_batch([c], np.zeros(1), pad_id=0, bucket=64)
    assert b["tokens"].shape[1] == padded_length(1100 + 128, 64) == 1280   # not 1152 + 128
    assert int(b["kv_mask"][0].sum()) == 1170


def test_generation_chunks_grow_as_prompts_shrink():
    from types import SimpleNamespace

    from cudaperf_jax.rl.rollout import _chunks, chunk_size
    assert [chunk_size(16, p) for p in (4096, 3072, 2560, 2048, 1024, 256)] == [16, 16, 32, 64, 128, 128]
    sampler = SimpleNamespace(prompt_bucket=64)
    prompts_ = [[0] * 4000] * 20 + [[0] * 900] * 200
    chunks = _chunks(sampler, prompts_, 16)
    assert sorted(i for c in chunks for i in c) == list(range(220))
    assert [len(c) for c in chunks] == [128, 72, 16, 4]      # short prompts first, 8x the long prompts' batch
    assert _chunks(sampler, prompts_, 0) == [list(range(220))]
