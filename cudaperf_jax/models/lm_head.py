"""Log-probabilities of given next tokens from hidden states, with the LM head run in chunks of positions.

    logp, hit = target_logprobs(model, h, targets, chunk=256)   # h [B, T, D] -> float32[B, T], bool[B, T]

A vocabulary of 151,936 (Qwen2.5) makes float32 logits of an SFT step's 6 x 3,072 positions 11.2 GB, and as much
again for their gradient. Here the head and its log-normaliser run over `chunk` positions at a time (lax.map), each
chunk rematerialised in the backward pass, so logits [B, chunk, V] exist one chunk at a time: the values are those
of a log_softmax over all positions at once. SFT's token NLL (sft.step) and RL's sequence log-probs (rl.objective)
both read them from here.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

DEFAULT_CHUNK = 256


def target_logprobs(model, h: jax.Array, targets: jax.Array, chunk: int = DEFAULT_CHUNK, hits: bool = False,
                    ) -> tuple[jax.Array, jax.Array | None]:
    """(log p(targets[b, t]) float32[B, T], with `hits` bool[B, T]: targets is the argmax of the logits, else None)
    for hidden states h [B, T, D] of `model` (a Decoder: its `logits`) and int32 targets [B, T]; `chunk` positions
    at a time."""
    b, t, d = h.shape
    chunk = max(1, min(chunk, t))
    n = -(-t // chunk)
    pad = n * chunk - t
    hs = jnp.pad(h, ((0, 0), (0, pad), (0, 0))).reshape(b, n, chunk, d).swapaxes(0, 1)
    ts = jnp.pad(targets, ((0, 0), (0, pad))).reshape(b, n, chunk).swapaxes(0, 1)

    @jax.checkpoint
    def one(args):
        hc, tc = args
        logits = model.logits(hc).astype(jnp.float32)                       # [B, chunk, V]
        picked = jnp.take_along_axis(logits, tc[..., None], axis=-1)[..., 0]
        logp = picked - jax.nn.logsumexp(logits, axis=-1)
        return (logp, jnp.argmax(logits, axis=-1) == tc) if hits else (logp,)

    out = jax.lax.map(one, (hs, ts))                                        # [n, B, chunk] each

    def unchunk(x):
        return x.swapaxes(0, 1).reshape(b, n * chunk)[:, :t]
    return unchunk(out[0]), (unchunk(out[1]) if hits else None)
