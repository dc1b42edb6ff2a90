"""The sampler: greedy equals transformers and the argmax chain, logprobs equal a forward pass, stops,
left padding, per-sample keys, chat templates, weights as arguments (no recompilation), donated caches."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from flax import nnx

from cudaperf_jax.generation import sampler as sampler_mod
from cudaperf_jax.generation.sampler import Sampler, SamplingParams
from cudaperf_jax.kernels import DecodeKernels
from cudaperf_jax.models.config import ModelConfig
from cudaperf_jax.models.hf_io import model_from_hf_state
from tests.cudaperf_jax.models import tiny

_forward = nnx.jit(lambda m, t: m(t))
PROMPTS = [[5, 6, 7, 8, 9, 10, 11], [3, 4], [40, 41, 42, 43]]


@pytest.fixture(scope="module")
def pair():
    ref = tiny.hf_model("llama", seed=11)
    model = model_from_hf_state(ModelConfig.from_hf(ref.config.to_dict()), tiny.state_dict(ref))
    return ref, model


def _forward_logprobs(model, prompt, generated):
    seq = jnp.asarray([list(prompt) + list(generated)])
    lp = jax.nn.log_softmax(_forward(model, seq)[0], axis=-1)
    rows = np.arange(len(prompt) - 1, len(prompt) - 1 + len(generated))
    return np.asarray(lp)[rows], np.asarray(lp)[rows, generated]


def test_greedy_matches_transformers_and_argmax_chain(pair):
    ref, model = pair
    out = Sampler(model, prompt_bucket=8).generate(PROMPTS, SamplingParams(max_new_tokens=16, temperature=0))
    for i, p in enumerate(PROMPTS):
        n = out.lengths[i]
        with torch.no_grad():
            want = ref.generate(torch.tensor([p]), max_new_tokens=16, do_sample=False)[0, len(p):].tolist()
        assert out.tokens[i, :n].tolist() == want[:n]
        assert (out.tokens[i, n:] == 0).all() and (out.logprobs[i, n:] == 0).all()
        full, lp = _forward_logprobs(model, p, out.tokens[i, :n].tolist())
        np.testing.assert_array_equal(np.argmax(full, axis=-1), out.tokens[i, :n])
        np.testing.assert_allclose(out.logprobs[i, :n], lp, atol=1e-4)


def test_sampled_logprobs_match_forward_and_left_padding_is_invisible(pair):
    _, model = pair
    params = SamplingParams(max_new_tokens=12, temperature=0.8, top_p=0.9, top_k=40, stop_token_ids=())
    keys = jax.random.split(jax.random.PRNGKey(7), len(PROMPTS))
    batch = Sampler(model, prompt_bucket=16).generate(PROMPTS, params, keys=keys)
    for i, p in enumerate(PROMPTS):
        _, lp = _forward_logprobs(model, p, batch.tokens[i].tolist())
        np.testing.assert_allclose(batch.logprobs[i], lp, atol=1e-4)
        alone = Sampler(model, prompt_bucket=1).generate([p], params, keys=keys[i:i + 1])  # no padding at all
        np.testing.assert_array_equal(alone.tokens[0], batch.tokens[i])
        np.testing.assert_allclose(alone.logprobs[0], batch.logprobs[i], atol=1e-5)
    other = Sampler(model, prompt_bucket=16).generate(PROMPTS, params, seed=8)
    assert not np.array_equal(other.tokens, batch.tokens)


def test_stop_tokens_end_each_sample(pair):
    _, model = pair
    s = Sampler(model, prompt_bucket=8)
    free = s.generate(PROMPTS, SamplingParams(max_new_tokens=10, temperature=0, stop_token_ids=()))
    assert (free.lengths == 10).all()
    stop = int(free.tokens[0, 3])
    first = [int(np.flatnonzero(row == stop)[0]) + 1 if stop in row else 10 for row in free.tokens]
    out = s.generate(PROMPTS, SamplingParams(max_new_tokens=10, temperature=0, stop_token_ids=(stop,)))
    np.testing.assert_array_equal(out.lengths, first)
    assert out.lengths[0] <= 4 and out.tokens[0, out.lengths[0] - 1] == stop
    for i, n in enumerate(out.lengths):
        np.testing.assert_array_equal(out.tokens[i, :n], free.tokens[i, :n])
        assert (out.tokens[i, n:] == s.pad_id).all()


@pytest.mark.parametrize("unroll,n", [(3, 10), (4, 11)])
def test_unrolled_decode_loop_gives_the_same_samples(pair, monkeypatch, unroll, n):
    """DecodeKernels(unroll=k) runs k steps an iteration, then single steps: the same tokens, log-probabilities and
    lengths as one step an iteration, also when the samples stop at different steps (one inside an unrolled
    iteration, the whole batch before its end)."""
    _, model = pair
    keys = jax.random.split(jax.random.PRNGKey(3), len(PROMPTS))
    free = SamplingParams(max_new_tokens=n, temperature=0.9, top_k=20, stop_token_ids=())
    one_step = DecodeKernels(unroll=1)
    base = Sampler(model, prompt_bucket=8, kernels=one_step).generate(PROMPTS, free, keys=keys)
    stop = int(base.tokens[0, 4])   # ends sample 0 at step 4 or earlier (inside the second 3- or 4-step iteration)
    stopped = SamplingParams(max_new_tokens=n, temperature=0.9, top_k=20, stop_token_ids=(stop,))
    base_stop = Sampler(model, prompt_bucket=8, kernels=one_step).generate(PROMPTS, stopped, keys=keys)
    assert base_stop.lengths[0] <= 5
    unrolled = DecodeKernels(unroll=unroll)
    assert unrolled.resolve(1).unroll == unroll
    loops, while_loop = [], jax.lax.while_loop   # the loops the decode program is traced with (the unrolled one too)

    def traced_loop(cond, body, init):
        loops.append(body.__name__)
        return while_loop(cond, body, init)
    monkeypatch.setattr(jax.lax, "while_loop", traced_loop)
    for params, want in ((free, base), (stopped, base_stop)):
        got = Sampler(model, prompt_bucket=8, kernels=unrolled).generate(PROMPTS, params, keys=keys)
        assert loops[-2:] == ["body_unrolled", "body"]
        np.testing.assert_array_equal(got.tokens, want.tokens)
        np.testing.assert_array_equal(got.lengths, want.lengths)
        np.testing.assert_allclose(got.logprobs, want.logprobs, atol=1e-6)
    one = Sampler(model, prompt_bucket=8, kernels=unrolled).generate(PROMPTS[:1], stopped, keys=keys[:1])
    np.testing.assert_array_equal(one.tokens[0], base_stop.tokens[0])   # stops mid-iteration
    with pytest.raises(ValueError, match="DecodeKernels.unroll"):
        DecodeKernels(unroll=-1)
    assert DecodeKernels().resolve(1).unroll == (4 if jax.default_backend() == "gpu" else 1)   # auto
    assert DecodeKernels().resolve(128).unroll == 1


def test_text_prompts_chat_template_and_stop_strings():
    tok = tiny.tokenizer()
    ref = tiny.hf_model("qwen3", seed=4)
    model = model_from_hf_state(ModelConfig.from_hf(ref.config.to_dict()), tiny.state_dict(ref))
    s = Sampler(model, tok, prompt_bucket=8)
    ids = s.encode(["add"], chat=True)[0]
    assert tok.decode(ids) == "<|im_start|>user\nadd<|im_end|>\n<|im_start|>assistant\n"
    params = SamplingParams(max_new_tokens=24, temperature=0, stop_token_ids=())
    free = s.generate(["def add(a, b):"], params)
    text = tok.decode(free.tokens[0].tolist(), skip_special_tokens=True)
    assert free.texts[0] == text
    # A stop string: the text of the first later generated token that decodes to printable ASCII.
    pieces = [tok.decode([t]) for t in free.tokens[0, 2:].tolist()]
    stop = next(p for p in pieces if p.strip() and p.isascii() and p.isprintable())
    cut = s.generate(["def add(a, b):"], SamplingParams(max_new_tokens=24, temperature=0, stop_token_ids=(),
                                                        stop_strings=(stop,)))
    assert cut.texts[0] == text[: text.find(stop)]
    n = cut.lengths[0]
    assert n < 24
    assert stop in tok.decode(cut.tokens[0, :n].tolist()) and stop not in tok.decode(cut.tokens[0, :n - 1].tolist())
    assert (cut.tokens[0, n:] == s.pad_id).all()


def test_truncate_at_stop_strings_on_known_text():
    from cudaperf_jax.generation.stops import truncate_at_stop_strings
    tok = tiny.tokenizer()
    rows = [tok.encode("int i = 0; return i; }"), tok.encode("a + b")]
    width = max(map(len, rows))
    tokens = np.array([r + [0] * (width - len(r)) for r in rows])
    lengths, texts = truncate_at_stop_strings(tokens, np.array([len(r) for r in rows]), ["return", "}"], tok)
    assert texts == ["int i = 0; ", "a + b"]
    assert "return" in tok.decode(rows[0][: lengths[0]]) and "return" not in tok.decode(rows[0][: lengths[0] - 1])
    assert lengths[1] == len(rows[1])


def test_new_weights_need_no_recompilation_and_cache_is_donated(pair):
    _, model = pair
    s = Sampler(model, prompt_bucket=8)
    params = SamplingParams(max_new_tokens=6, temperature=0, stop_token_ids=())
    a = s.generate(PROMPTS, params)
    compiled = sampler_mod._decode._cache_size()
    old_cache = next(iter(s._cache.values()))
    other = nnx.merge(*nnx.split(model))
    other.final_norm.scale.value = other.final_norm.scale[...] * -1.0
    s.update_weights(other)
    b = s.generate(PROMPTS, params)
    assert sampler_mod._decode._cache_size() == compiled
    assert not np.array_equal(a.tokens, b.tokens)
    assert old_cache.k[0].is_deleted()


def test_padded_lengths_are_a_short_ladder_with_at_most_a_quarter_of_padding():
    from cudaperf_jax.generation.sampler import padded_length
    lengths = {padded_length(n, 64) for n in range(1, 4097)}
    assert len(lengths) == 20 and all(v % 64 == 0 for v in lengths)
    assert [padded_length(n, 64) for n in (1, 64, 65, 512, 513, 1100)] == [64, 64, 128, 512, 640, 1280]
    for n in range(513, 20000, 7):
        p = padded_length(n, 64)
        assert n <= p < 1.25 * n + 64
