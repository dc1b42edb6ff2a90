"""Packing: no attention across examples (packed logits equal those of each example alone), loss weights on
response tokens only, the step -> rows schedule."""
import numpy as np
import pytest
from flax import nnx

from cudaperf_jax.sft import packing
from cudaperf_jax.sft.data import Example


def _tiny_decoder(kind="qwen2"):
    from cudaperf_jax.models.config import ModelConfig
    from cudaperf_jax.models.decoder import Decoder
    from tests.cudaperf_jax.models import tiny
    return Decoder(ModelConfig.from_hf(tiny.hf_config(kind).to_dict()), rngs=nnx.Rngs(0))


def _examples(lengths, seed=0):
    rng = np.random.default_rng(seed)
    return [Example(f"t{i}", "impl", rng.integers(3, 320, p).astype(np.int32), rng.integers(3, 320, r).astype(np.int32))
            for i, (p, r) in enumerate(lengths)]


def test_packed_row_logits_equal_each_example_alone():
    model = _tiny_decoder()
    ex = _examples([(9, 7), (5, 12), (11, 4), (6, 6)])
    packed, stats = packing.pack(ex, seq_len=40, pad_id=0)
    assert stats["examples_packed"] == 4 and stats["rows"] == 2
    fwd = nnx.jit(lambda m, t, p, s: m(t, p, segment_ids=s))
    logits = np.asarray(fwd(model, packed.tokens, packed.positions, packed.segment_ids))
    # each example alone (right-padded to one batch: causal, so its own positions are unaffected)
    alone_toks = np.zeros((4, 40), np.int32)
    for i, e in enumerate(ex):
        alone_toks[i, :len(e)] = np.concatenate([e.prompt, e.response])
    alone = np.asarray(fwd(model, alone_toks, np.tile(np.arange(40, dtype=np.int32), (4, 1)), np.ones((4, 40), np.int32)))
    seen = 0
    for r in range(packed.rows):
        for s in range(1, packed.segment_ids[r].max() + 1):
            cols = np.flatnonzero(packed.segment_ids[r] == s)
            toks = packed.tokens[r, cols]
            match = [i for i, e in enumerate(ex) if len(e) == len(toks) and (alone_toks[i, :len(e)] == toks).all()]
            assert len(match) == 1
            np.testing.assert_allclose(logits[r, cols], alone[match[0], :len(cols)], rtol=1e-5, atol=1e-5)
            assert (packed.positions[r, cols] == np.arange(len(cols))).all()
            seen += 1
    assert seen == 4
    # without the segment mask the second example of a row would see the first: the logits differ
    unmasked = np.asarray(fwd(model, packed.tokens, packed.positions, np.ones_like(packed.segment_ids)))
    second = packed.segment_ids[0] == 2
    assert np.abs(unmasked[0, second] - logits[0, second]).max() > 1e-3


def test_weights_mark_predictions_of_response_tokens_only():
    ex = _examples([(5, 3), (4, 6)])
    packed, _ = packing.pack(ex, seq_len=32, pad_id=0)
    assert packed.rows == 1
    row = {k: v[0] for k, v in packed.take([0]).items()}
    for s in (1, 2):
        cols = np.flatnonzero(row["segment_ids"] == s)
        seq = row["tokens"][cols]
        e = next(e for e in ex if len(e) == len(cols))
        p, r = len(e.prompt), len(e.response)
        np.testing.assert_array_equal(row["targets"][cols[:-1]], seq[1:])      # next token of the same example
        expected = np.zeros(len(cols))
        expected[p - 1:p - 1 + r] = 1                                           # positions predicting the response
        np.testing.assert_array_equal(row["weights"][cols], expected)
        np.testing.assert_array_equal(row["targets"][cols][row["weights"][cols] > 0], e.response)
    assert row["weights"][row["segment_ids"] == 0].sum() == 0                  # padding carries no loss


def test_too_long_examples_are_dropped_and_counted():
    packed, stats = packing.pack(_examples([(10, 10), (30, 20), (3, 3)]), seq_len=24, pad_id=0)
    assert stats["dropped_too_long"] == 1 and stats["examples_packed"] == 2 and packed.rows == 2


def test_schedule_is_a_function_of_the_step_and_covers_each_epoch():
    first_epoch = np.concatenate([packing.batch_rows(10, s, 2, seed=3) for s in range(5)])
    assert sorted(first_epoch) == list(range(10))
    np.testing.assert_array_equal(packing.batch_rows(10, 7, 4, seed=3), packing.batch_rows(10, 7, 4, seed=3))
    assert not np.array_equal(packing.batch_rows(10, 0, 10, seed=3), packing.batch_rows(10, 1, 10, seed=3))
    with pytest.raises(ValueError, match="no packed rows"):
        packing.batch_rows(0, 0, 2, seed=0)
    b = list(packing.eval_batches(packing.pack(_examples([(4, 4)] * 3), 8, 0)[0], batch=2))
    assert len(b) == 2 and b[1]["weights"][1].sum() == 0 and b[1]["tokens"].shape == (2, 8)
