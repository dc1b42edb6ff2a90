"""SFT examples from real dataset tasks: the H200-fastest verified answer, token-identical RL prompts."""
import numpy as np
import pytest

from cudaperf_jax import prompts
from cudaperf_jax.experiment.config import ConfigFieldError, from_configdict
from cudaperf_jax.sft import data
from cudaperf_jax.sft.config import DataConfig, SFTConfig, SFTConfigError


@pytest.fixture(scope="module")
def times():
    return data.load_times("data/times/h200")


@pytest.fixture(scope="module")
def tasks():
    return data.load_tasks(DataConfig(families=("elementwise", "elementwise_chain")), "train", limit=6)


def test_responses_modes_pick_verified_implementations(tasks, times):
    rows = data.task_rows(times)
    for t in tasks:
        ok = data.verified_implementations(t, times, rows)
        assert ok and all(impl.expected == "correct" for impl, _ in ok)
        fastest = data.pick_implementations(t, times, "fastest", rows)
        assert len(fastest) == 1 and fastest[0].name == min(ok, key=lambda x: x[1])[0].name
        # the geometric mean is of the measured H200 times of that implementation
        r = rows[t.id]
        i = times.index["impls"][r].index(fastest[0].name)
        ms = times.time_ms[r, i, :len(times.index["configs"][r])]
        assert {impl.name: g for impl, g in ok}[fastest[0].name] == pytest.approx(np.exp(np.log(ms).mean()))
        assert len(data.pick_implementations(t, times, "all_correct", rows)) == len(ok)
        base = data.pick_implementations(t, times, "baseline", rows)
        assert len(base) == 1 and base[0].baseline
    assert {t.split for t in tasks} == {"train"}


def test_examples_are_the_rl_prompt_and_a_cuda_block(tasks, times):
    from cudaperf_jax.generation.sampler import Sampler
    from tests.cudaperf_jax.models import tiny
    from tests.cudaperf_jax.sft.test_packing import _tiny_decoder
    tok = tiny.tokenizer()
    sampler = Sampler(_tiny_decoder(), tok)
    examples, stats = data.build_examples(tasks[:2], times, "fastest", lambda m: sampler.encode(m, chat=True), tok, 2)
    assert stats["examples"] == 2 and stats["skipped_unverified"] == 0
    for t, e in zip(tasks, examples):
        assert e.prompt.tolist() == sampler.encode([prompts.messages(t)], chat=True)[0]
        assert e.response[-1] == 2
        text = tok.decode(e.response[:-1].tolist())
        impl = next(i for i in t.implementations if i.name == e.implementation)
        assert prompts.extract_solution(text) == impl.source.strip() + "\n"


def test_refinement_examples_are_the_rl_second_turn(tasks, times):
    """refine=1: every answer is also taught after an earlier attempt and its feedback, in the exact prompt the RL
    rollout's turn 1 poses (prompts.messages with that history); the earlier attempt is a labelled-wrong or a
    slower verified implementation, its feedback worded as the harness words it."""
    from cudaperf_jax.generation.sampler import Sampler
    from tests.cudaperf_jax.models import tiny
    from tests.cudaperf_jax.sft.test_packing import _tiny_decoder
    tok = tiny.tokenizer()
    sampler = Sampler(_tiny_decoder(), tok)
    enc = lambda m: sampler.encode(m, chat=True)
    examples, stats = data.build_examples(tasks[:3], times, "fastest", enc, tok, 2, refine=1.0, seed=3)
    assert stats["examples"] == 6 and stats["refinement"] == 3
    rng = np.random.default_rng(3)
    rng.random(3)                                  # build_examples draws the choice of answers first
    for t, e in zip(tasks[:3], examples[3:]):
        prev, feedback, status = data.earlier_attempt(t, data.pick_implementations(t, times, "fastest")[0], times,
                                                      rng)
        assert status == ("ok" if feedback.startswith("Correct") else "wrong")
        assert prev.name != e.implementation      # these tasks have wrong or slower implementations to show
        assert feedback.startswith(("Wrong result: config", "Correct on all"))
        hist = [(data.answer_text(prev.source), feedback, status)]
        assert e.prompt.tolist() == enc([prompts.messages(t, hist)])[0]
        assert e.response.tolist() == examples[tasks.index(t)].response.tolist()   # the same verified answer
    red = data.load_tasks(DataConfig(families=("reduction",)), "train", limit=2)[1]   # it has a wrong implementation
    kinds = {data.earlier_attempt(red, data.pick_implementations(red, times, "fastest")[0], times,
                                  np.random.default_rng(k))[1].split(":")[0].split(" on")[0] for k in range(64)}
    assert kinds == {"Wrong result", "Correct"}, kinds
    with pytest.raises(ConfigFieldError, match=r"config.data: refine=1.5"):
        from_configdict(SFTConfig, {"data": {"refine": 1.5}})
    with pytest.raises(SFTConfigError, match=r"data.refine=1.5"):
        data.build_examples([], times, "fastest", enc, tok, 2, refine=1.5)


def test_bad_config_fields_are_one_sentence():
    with pytest.raises(ConfigFieldError, match=r"config.data: responses='best'"):
        from_configdict(SFTConfig, {"data": {"responses": "best"}})
    with pytest.raises(ConfigFieldError, match=r"^unknown config field optim.lr;"):
        from_configdict(SFTConfig, {"optim": {"lr": 1.0}})
    from experiments.configs import sft, sft_cpu
    assert from_configdict(SFTConfig, sft.get_config()).data.seq_len == 3072
    assert from_configdict(SFTConfig, sft_cpu.get_config()).dtype == "float32"
