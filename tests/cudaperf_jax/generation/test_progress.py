"""Decode progress: the bar follows the loop inside jit, the tokens are those of a call without it, and a call
without progress compiles no second program."""
import io

import jax
import numpy as np
import pytest

from cudaperf_jax.generation import progress as progress_lib
from cudaperf_jax.generation import sampler as sampler_mod
from cudaperf_jax.generation.sampler import Sampler, SamplingParams
from cudaperf_jax.models.config import ModelConfig
from cudaperf_jax.models.hf_io import model_from_hf_state
from tests.cudaperf_jax.models import tiny

PROMPTS = [[5, 6, 7, 8, 9], [3, 4], [40, 41, 42, 43]]


@pytest.fixture(scope="module")
def model():
    ref = tiny.hf_model("llama", seed=11)
    return model_from_hf_state(ModelConfig.from_hf(ref.config.to_dict()), tiny.state_dict(ref))


def test_progress_reports_from_inside_the_loop_and_changes_nothing(model, monkeypatch):
    seen = []
    real = progress_lib.DecodeProgress.update
    monkeypatch.setattr(progress_lib.DecodeProgress, "update",
                        lambda self, step, tokens, active: (seen.append((step, tokens, active)),
                                                            real(self, step, tokens, active)))
    params = SamplingParams(max_new_tokens=24, temperature=0.8, stop_token_ids=())   # no stop: all 24 steps run
    sampler = Sampler(model, prompt_bucket=8, progress_every=4)
    keys = jax.random.split(jax.random.PRNGKey(3), len(PROMPTS))
    plain = sampler.generate(PROMPTS, params, keys=keys)
    programs = sampler_mod._decode._cache_size()
    sampler.generate(PROMPTS, params, keys=keys)
    assert sampler_mod._decode._cache_size() == programs          # off: the same program, no other
    shown = sampler.generate(PROMPTS, params, keys=keys, progress="test")
    np.testing.assert_array_equal(shown.tokens, plain.tokens)
    np.testing.assert_array_equal(shown.logprobs, plain.logprobs)
    reports = seen[:-1]   # the last row is finish(): the final count
    assert [s for s, _, _ in reports] == [4, 8, 12, 16, 20, 24]
    assert [t for _, t, _ in reports] == [3 * s for s, _, _ in reports]   # 3 samples, one token a step each
    assert seen[-1] == (24, 3 * 24, 0)
    assert not progress_lib._BARS                                        # unregistered when the call ends


def test_bar_shows_rate_and_running_samples():
    out = io.StringIO()
    with progress_lib.DecodeProgress("turn 0", max_steps=10, batch=4, file=out, leave=True) as bar:
        progress_lib.report(bar.id, 5, 20, 3)
        progress_lib.report(bar.id + 1000, 9, 1, 1)   # an unknown id is ignored
    text = out.getvalue()
    assert "turn 0" in text and "5/10" in text and "tok/s" in text and "3/4 running" in text
