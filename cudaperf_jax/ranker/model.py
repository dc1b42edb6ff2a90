"""The ranker model: s(candidate) = head([code embedding, MLP(normalised structural features)]) -> float32.

Encoders (RankerConfig.encoder), one interface `encoder(tokens int32[B, L], mask bool[B, L]) -> [B, E]`:
  "features"     no code encoder (E = 0): the features-only baseline
  "transformer"  a small pre-norm transformer over hashed code tokens (tokens.code_tokens), from scratch
  "backbone"     the policy decoder (cudaperf_jax.models.loading.load_policy), masked mean of its final
                 hidden states; fine-tuned in its last `train_layers` layers (the rest frozen)
Feature statistics (mean / std over the training rows) are part of the model state (FeatureStats).
"""
from __future__ import annotations

import dataclasses
import itertools

import jax
import jax.numpy as jnp
from flax import nnx

ENCODERS = ("features", "transformer", "backbone")


@dataclasses.dataclass(frozen=True)
class RankerConfig:
    encoder: str = "transformer"
    hidden: int = 128              # feature MLP and head width
    # transformer
    vocab: int = 4096
    max_len: int = 512
    dim: int = 128
    depth: int = 2
    heads: int = 4
    dropout: float = 0.0
    # backbone
    backbone: str = "default"      # a policy checkpoint: a registered model name, a GGUF file or a HF directory
    train_layers: int = 2          # backbone layers fine-tuned from the top (0: head only)
    dtype: str = "float32"         # compute dtype of the backbone

    def __post_init__(self):
        if self.encoder not in ENCODERS:
            raise ValueError(f"encoder must be one of {ENCODERS}, got {self.encoder!r}")
        if self.hidden < 1 or self.dim < 1 or self.depth < 0 or self.max_len < 2:
            raise ValueError("hidden, dim and max_len must be positive and depth >= 0")
        if self.encoder == "transformer" and self.dim % self.heads:
            raise ValueError(f"dim ({self.dim}) must be a multiple of heads ({self.heads})")
        if self.train_layers < 0:
            raise ValueError("train_layers must be >= 0")

    @classmethod
    def from_dict(cls, d: dict) -> RankerConfig:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in dict(d).items() if k in names})


class FeatureStats(nnx.Variable):
    """Non-trained normalisation statistics of the feature vector."""


class MLP(nnx.Module):
    def __init__(self, sizes: list[int], *, rngs: nnx.Rngs):
        self.layers = nnx.List([nnx.Linear(a, b, rngs=rngs) for a, b in itertools.pairwise(sizes)])

    def __call__(self, x):
        for k, layer in enumerate(self.layers):
            x = layer(x)
            if k < len(self.layers) - 1:
                x = jax.nn.gelu(x)
        return x


class Block(nnx.Module):
    def __init__(self, dim: int, heads: int, *, rngs: nnx.Rngs):
        self.n1 = nnx.LayerNorm(dim, rngs=rngs)
        self.attn = nnx.MultiHeadAttention(heads, dim, decode=False, rngs=rngs)
        self.n2 = nnx.LayerNorm(dim, rngs=rngs)
        self.mlp = MLP([dim, 4 * dim, dim], rngs=rngs)

    def __call__(self, x, mask):
        h = self.n1(x)
        x = x + self.attn(h, h, h, mask=mask[:, None, None, :] & mask[:, None, :, None])
        return x + self.mlp(self.n2(x))


class CodeTransformer(nnx.Module):
    """Hashed code tokens int32[B, L] (mask bool[B, L]) -> float32[B, dim] (masked mean + the first slot)."""

    def __init__(self, cfg: RankerConfig, *, rngs: nnx.Rngs):
        self.embed = nnx.Embed(cfg.vocab, cfg.dim, rngs=rngs)
        self.pos = nnx.Param(nnx.initializers.normal(0.02)(rngs.params(), (cfg.max_len, cfg.dim)))
        self.blocks = nnx.List([Block(cfg.dim, cfg.heads, rngs=rngs) for _ in range(cfg.depth)])
        self.norm = nnx.LayerNorm(cfg.dim, rngs=rngs)
        self.out_dim = 2 * cfg.dim

    def __call__(self, tokens, mask):
        x = self.embed(tokens) + self.pos[...][None, :tokens.shape[1]]
        for b in self.blocks:
            x = b(x, mask)
        x = self.norm(x)
        m = mask[..., None].astype(x.dtype)
        mean = (x * m).sum(1) / jnp.maximum(m.sum(1), 1.0)
        return jnp.concatenate([mean, x[:, 0]], -1)


class Backbone(nnx.Module):
    """The policy decoder's final hidden states, masked mean over tokens: float32[B, hidden_size]."""

    def __init__(self, decoder):
        self.decoder = decoder
        self.out_dim = decoder.cfg.hidden_size

    def __call__(self, tokens, mask):
        positions = jnp.maximum(jnp.cumsum(mask, 1) - 1, 0).astype(jnp.int32)
        h, _ = self.decoder.hidden(tokens, positions, kv_mask=mask)
        m = mask[..., None].astype(jnp.float32)
        return (h.astype(jnp.float32) * m).sum(1) / jnp.maximum(m.sum(1), 1.0)


class RankerModel(nnx.Module):
    """__call__(x float32[B, F], tokens int32[B, L], mask bool[B, L]) -> scores float32[B]."""

    def __init__(self, cfg: RankerConfig, num_features: int, *, rngs: nnx.Rngs, decoder=None):
        self.cfg = cfg
        self.mean = FeatureStats(jnp.zeros((num_features,), jnp.float32))
        self.std = FeatureStats(jnp.ones((num_features,), jnp.float32))
        self.features = MLP([num_features, cfg.hidden, cfg.hidden], rngs=rngs)
        if cfg.encoder == "transformer":
            self.encoder = CodeTransformer(cfg, rngs=rngs)
        elif cfg.encoder == "backbone":
            if decoder is None:
                raise ValueError("the backbone encoder needs the policy decoder (load it with load_policy)")
            self.encoder = Backbone(decoder)
        else:
            self.encoder = None
        code = 0 if self.encoder is None else self.encoder.out_dim
        self.code_norm = nnx.LayerNorm(code, rngs=rngs) if code else None
        self.head = MLP([cfg.hidden + code, cfg.hidden, 1], rngs=rngs)

    def __call__(self, x, tokens, mask):
        z = self.features(jnp.clip((x - self.mean[...]) / self.std[...], -8.0, 8.0))
        if self.encoder is not None:
            z = jnp.concatenate([z, self.code_norm(self.encoder(tokens, mask))], -1)
        return self.head(jax.nn.gelu(z))[:, 0].astype(jnp.float32)


def trainable(cfg: RankerConfig):
    """The nnx filter of the parameters that are trained (backbone: only its top `train_layers` layers)."""
    if cfg.encoder != "backbone":
        return nnx.Param

    def pred(path, value):
        if not isinstance(value, nnx.Param):
            return False
        names = [str(getattr(p, "key", p)) for p in path]
        if "decoder" not in names:
            return True
        if "final_norm" in names:
            return cfg.train_layers > 0
        if "layers" in names:
            return int(names[names.index("layers") + 1]) >= _num_layers[0] - cfg.train_layers
        return False
    _num_layers = [0]
    pred.num_layers = _num_layers  # set by build()
    return pred


def build(cfg: RankerConfig, num_features: int, seed: int = 0, decoder=None) -> tuple[RankerModel, object]:
    """(model, trainable filter)."""
    model = RankerModel(cfg, num_features, rngs=nnx.Rngs(seed), decoder=decoder)
    filt = trainable(cfg)
    if decoder is not None:
        filt.num_layers[0] = decoder.cfg.num_layers
    return model, filt


def flat_state(tree) -> dict:
    """A pytree (an nnx.State) -> {key path string: array} (string keys, for Orbax)."""
    return {jax.tree_util.keystr(path): leaf for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]}


def from_flat(like, flat: dict):
    """`like` (a pytree) with its leaves replaced by flat[key path] (from flat_state); KeyError names a missing key."""
    leaves, treedef = jax.tree_util.tree_flatten_with_path(like)
    out = []
    for path, leaf in leaves:
        key = jax.tree_util.keystr(path)
        if key not in flat:
            raise KeyError(f"the checkpoint has no {key}; it was written by another ranker configuration")
        out.append(jnp.asarray(flat[key], dtype=leaf.dtype).reshape(leaf.shape))
    return jax.tree_util.tree_unflatten(treedef, out)
