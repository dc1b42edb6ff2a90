"""LoRA adapters for the policy decoder: one Flax `nnx.LoRA` per targeted projection, beside the fused base weights.

    add_adapters(model, LoRAConfig(rank=16, alpha=32.0, targets="q,k,v,o"), nnx.Rngs(0))   # in place
    graphdef, adapters, rest = nnx.split(model, ADAPTERS, ...)   # trained: float32 nnx.LoRAParam; frozen: the rest
    nnx.value_and_grad(loss, argnums=nnx.DiffState(0, ADAPTERS))  # or differentiate `adapters` as a pytree
    merged = merge(graphdef, adapters, rest)   # an adapter-free Decoder's state: Sampler.update_weights(merged)
                                               # (new arrays for the targeted kernels only; the rest is shared)
    reference = nnx.merge(graphdef, zero_adapters(adapters), rest)   # the base policy, no second copy of weights

The base kernels keep their fused layout and paths (`attn.qkv` [D, (H+2Hkv)Dh], `attn.o`, `mlp.gate_up` [D, 2, F],
`mlp.down`, stored [in, out] in the storage dtype): checkpoints and the decode kernels read them as before. A target's
adapter (A [in, r], B [r, out_target], float32, B zero at the start, A as PEFT initialises it) adds
(alpha / r) * dropout(x) @ A @ B to its slice of the fused output: q/k/v slices of qkv, gate/up halves of gate_up,
and the whole of o/down. nnx.LoRA does not wrap the base here because the base kernels are bare nnx.Params (a
wrapped module would move them to new paths). The adapters of a block sit at `layers/<i>/attn/lora/<target>` and
`layers/<i>/mlp/lora/<target>` (`lora_a`, `lora_b`); a decoder without adapters has no such attribute, so its graph,
parameter paths, checkpoints and decode-kernel path are those of a plain Decoder.

nnx.LoRAParam subclasses nnx.Param, so a filter of nnx.Param alone includes the adapters: code that means "the base
weights" uses BASE, and "everything but the adapters" REST.

Shapes: D hidden, H/Hkv heads, Dh head dim, F intermediate, r rank, L layers.
"""
from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
from flax import nnx

from cudaperf_jax.experiment.config import ConfigFieldError
from cudaperf_jax.models.config import ModelConfig
from cudaperf_jax.models.decoder import Decoder

TARGETS = ("q", "k", "v", "o", "gate", "up", "down")
ATTN_TARGETS, MLP_TARGETS = TARGETS[:4], TARGETS[4:]
ADAPTERS = nnx.LoRAParam                                # the trained state of a LoRA run
BASE = nnx.All(nnx.Param, nnx.Not(nnx.LoRAParam))       # the base weights only (nnx.Param alone includes adapters)
REST = nnx.Not(nnx.LoRAParam)                           # everything but the adapters (= an adapter-free model's state)
# PEFT's A: kaiming_uniform(a=sqrt(5)) on [r, in], i.e. U(-1/sqrt(in), 1/sqrt(in)); B starts at zero.
PEFT_A_INIT = nnx.initializers.variance_scaling(1.0 / 3.0, "fan_in", "uniform")


@dataclasses.dataclass(frozen=True)
class LoRAConfig:
    """Which projections get adapters, of what rank and scale (PEFT's r, lora_alpha, target_modules, lora_dropout)."""
    rank: int = 0               # adapter rank r; 0: no adapters (every weight is trained: full fine-tune)
    alpha: float = 32.0         # adapters add (alpha / rank) * x @ A @ B (PEFT's lora_alpha)
    targets: str = "q,k,v,o"    # comma-separated projections with adapters, among q,k,v,o,gate,up,down
    dropout: float = 0.0        # dropout on the adapters' inputs in training steps (never when sampling)

    def __post_init__(self):
        if not isinstance(self.rank, int) or isinstance(self.rank, bool) or self.rank < 0:
            raise ConfigFieldError(f"lora.rank must be an integer >= 0 (0 turns adapters off), not {self.rank!r}")
        if (not isinstance(self.alpha, (int, float)) or isinstance(self.alpha, bool) or not math.isfinite(self.alpha)
                or self.alpha <= 0):
            raise ConfigFieldError(f"lora.alpha must be a finite number > 0, not {self.alpha!r}")
        if not isinstance(self.targets, str):
            raise ConfigFieldError(f"lora.targets must be a comma-separated string such as 'q,v', not "
                                   f"{self.targets!r}")
        names = [t.strip() for t in self.targets.split(",") if t.strip()]
        bad = [t for t in names if t not in TARGETS]
        if bad or not names or len(set(names)) != len(names):
            raise ConfigFieldError(f"lora.targets must name distinct projections among {','.join(TARGETS)}, not "
                                   f"{self.targets!r}")
        if (not isinstance(self.dropout, (int, float)) or isinstance(self.dropout, bool)
                or not 0.0 <= self.dropout < 1.0):
            raise ConfigFieldError(f"lora.dropout must be a number in [0, 1), not {self.dropout!r}")
        object.__setattr__(self, "targets", ",".join(t for t in TARGETS if t in names))   # canonical order

    @property
    def on(self) -> bool:
        return self.rank > 0

    @property
    def names(self) -> tuple[str, ...]:
        """The targets, in the order of TARGETS (as `targets` is kept)."""
        return tuple(self.targets.split(","))

    @property
    def scaling(self) -> float:
        return self.alpha / self.rank


def _axes(spec) -> dict:
    # The same logical axes as the base kernel on the shared dimension; placed later by sharding.shard_model.
    return {"out_sharding": spec, "eager_sharding": False}


class Adapters(nnx.Module):
    """The adapters of one attention or MLP block: attribute `<target>` is an nnx.LoRA (lora_a [in, r], lora_b
    [r, out], float32 nnx.LoRAParam) for each of its targets."""

    def __init__(self, shapes: dict[str, tuple[int, int, str | None, str | None]], cfg: LoRAConfig, *,
                 rngs: nnx.Rngs, dtype):
        """shapes: target -> (in, out, logical axis of in, logical axis of out); dtype: the compute dtype."""
        self.cfg = cfg
        for name, (n_in, n_out, ax_in, ax_out) in shapes.items():
            setattr(self, name, nnx.LoRA(n_in, cfg.rank, n_out, dtype=dtype, param_dtype=jnp.float32,
                                         a_initializer=PEFT_A_INIT, rngs=rngs, a_metadata=_axes((ax_in, None)),
                                         b_metadata=_axes((None, ax_out))))

    def add(self, name: str, x: jax.Array, y: jax.Array, dropout_rng: jax.Array | None = None) -> jax.Array:
        """y + (alpha / r) * dropout(x) @ A @ B for target `name` (y itself when it has no adapter here).

        x [..., in] the projection's input, y [..., out] its output (compute dtype); dropout_rng: a PRNG key for the
        dropout of a training step (None: no dropout)."""
        lora = getattr(self, name, None)
        if lora is None:
            return y
        rate = self.cfg.dropout
        if dropout_rng is not None and rate > 0:
            keep = jax.random.bernoulli(jax.random.fold_in(dropout_rng, TARGETS.index(name)), 1.0 - rate, x.shape)
            x = jnp.where(keep, x / (1.0 - rate), jnp.zeros_like(x))
        return y + (lora(x) * self.cfg.scaling).astype(y.dtype)


def adapter_shapes(cfg: ModelConfig, targets: tuple[str, ...]) -> dict[str, tuple[int, int, str, str]]:
    """{target: (in, out, logical axis of in, logical axis of out)} of each target's A [in, r] and B [r, out]."""
    d, f = cfg.hidden_size, cfg.intermediate_size
    hq, hkv = cfg.num_heads * cfg.head_dim, cfg.num_kv_heads * cfg.head_dim
    every = {"q": (d, hq, "fsdp", "tensor"), "k": (d, hkv, "fsdp", "tensor"), "v": (d, hkv, "fsdp", "tensor"),
             "o": (hq, d, "tensor", "fsdp"), "gate": (d, f, "fsdp", "tensor"), "up": (d, f, "fsdp", "tensor"),
             "down": (f, d, "tensor", "fsdp")}
    return {t: every[t] for t in targets}


def add_adapters(model: Decoder, cfg: LoRAConfig, rngs: nnx.Rngs) -> Decoder:
    """Gives every layer of `model` the adapters of `cfg` (in place; returns model); rank 0 leaves it unchanged."""
    if not cfg.on:
        return model
    if model.has_adapters:
        raise ValueError("this model already has LoRA adapters; add adapters once, to a model without them")
    shapes = adapter_shapes(model.cfg, cfg.names)
    attn = {t: v for t, v in shapes.items() if t in ATTN_TARGETS}
    mlp = {t: v for t, v in shapes.items() if t in MLP_TARGETS}
    for layer in model.layers:
        if attn:
            layer.attn.lora = Adapters(attn, cfg, rngs=rngs, dtype=model.dtype)
        if mlp:
            layer.mlp.lora = Adapters(mlp, cfg, rngs=rngs, dtype=model.dtype)
    return model


def lora_config(model: Decoder) -> LoRAConfig | None:
    """The LoRAConfig of a model's adapters (None without adapters)."""
    for layer in model.layers:
        for block in (layer.attn, layer.mlp):
            if block.lora is not None:
                return block.lora.cfg
    return None


def num_adapter_params(model_cfg: ModelConfig, cfg: LoRAConfig) -> int:
    """The number of adapter parameters (A and B of every target in every layer)."""
    if not cfg.on:
        return 0
    shapes = adapter_shapes(model_cfg, cfg.names).values()
    return model_cfg.num_layers * sum(cfg.rank * (n_in + n_out) for n_in, n_out, _, _ in shapes)


def zero_adapters(adapters: nnx.State) -> nnx.State:
    """The adapter state with every array zero: passed in place of the trained adapters (nnx.merge(graphdef,
    zero_adapters(adapters), rest)) it runs the base policy exactly (x @ A @ 0 adds 0), with no copy of the base."""
    return jax.tree.map(jnp.zeros_like, adapters)


def _fold(block: nnx.Module, w: nnx.Param, names: tuple[str, ...], widths: tuple[int, ...],
          stack: bool = False) -> jax.Array | None:
    """w + (alpha / r) A @ B of block's adapters for `names`, side by side in w's columns (stacked on axis 1 for
    gate_up [D, 2, F]; zeros for a name without an adapter); added in float32, rounded once to w's storage dtype.
    None when none of `names` has an adapter (w is unchanged)."""
    loras = [None if block.lora is None else getattr(block.lora, t, None) for t in names]
    if all(lo is None for lo in loras):
        return None
    f32 = jnp.float32
    deltas = [jnp.zeros((w.shape[0], n), f32) if lo is None else
              block.lora.cfg.scaling * (lo.lora_a[...].astype(f32) @ lo.lora_b[...].astype(f32))
              for lo, n in zip(loras, widths)]
    delta = jnp.stack(deltas, axis=1) if stack else jnp.concatenate(deltas, axis=1)
    return (w[...].astype(f32) + delta).astype(w.dtype)


@functools.partial(jax.jit, static_argnames=("graphdef",))
def fold(graphdef: nnx.GraphDef, *states: nnx.State) -> dict[str, jax.Array]:
    """{"layers/<i>/<attn|mlp>/<kernel>": W + (alpha / r) A @ B} for each base kernel with an adapter (q/k/v columns
    of qkv, gate/up halves of gate_up, o, down), in W's shape and storage dtype; kernels without one are left out.

    graphdef, *states: a Decoder with adapters as nnx.split gives it. Jitted with graphdef static: one compilation per
    model structure (its cache size is what `merge` compiles)."""
    model = nnx.merge(graphdef, *states)
    cfg: ModelConfig = model.cfg
    d, f = cfg.hidden_size, cfg.intermediate_size
    hq, hkv = cfg.num_heads * cfg.head_dim, cfg.num_kv_heads * cfg.head_dim
    out = {}
    for i, layer in enumerate(model.layers):
        a, m = layer.attn, layer.mlp
        for block, part, name, names, widths, stack in (
                (a, "attn", "qkv", ("q", "k", "v"), (hq, hkv, hkv), False), (a, "attn", "o", ("o",), (d,), False),
                (m, "mlp", "gate_up", ("gate", "up"), (f, f), True), (m, "mlp", "down", ("down",), (d,), False)):
            w = _fold(block, getattr(block, name), names, widths, stack)
            if w is not None:
                out[f"layers/{i}/{part}/{name}"] = w
    return out


def merge(graphdef: nnx.GraphDef, *states: nnx.State) -> nnx.State:
    """The state of an adapter-free Decoder of the same base structure and dtypes, with W + (alpha / r) A @ B folded
    into each targeted kernel; nothing else changes.

    graphdef, *states: a Decoder with adapters as nnx.split gives it (e.g. graphdef, adapters, rest). Only the
    targeted kernels are new arrays (`fold`, jitted: compiled once per model structure); every other variable is the
    caller's own array, not a copy, so the merged weights cost the memory of the targeted kernels alone (q,k,v,o of a
    7B model: ~1.6 GB in bf16, not a second copy of its 15 GB). A training loop calls it after every update and hands
    the result to Sampler.update_weights, which does not recompile either (the structure is that of the Sampler's)."""
    folded = fold(graphdef, *states)
    flat = []
    for state in states:
        for path, var in nnx.to_flat_state(state):
            if isinstance(var, nnx.LoRAParam):
                continue
            new = folded.get("/".join(str(k) for k in path))
            flat.append((path, var if new is None else var.replace(new)))
    return nnx.from_flat_state(flat)


def base_model(model: Decoder) -> Decoder:
    """An abstract (shapes only) adapter-free Decoder of the same config and dtypes as `model`."""
    return nnx.eval_shape(lambda: Decoder(model.cfg, rngs=nnx.Rngs(0), dtype=model.dtype,
                                          param_dtype=model.embed[...].dtype))


def merged_model(model: Decoder) -> Decoder:
    """A new adapter-free Decoder whose kernels are `model`'s with its adapters folded in (`merge`); `model` itself
    when it has none. Build the Sampler on it once, then feed it `merge(...)` states after each update."""
    if not model.has_adapters:
        return model
    return nnx.merge(nnx.graphdef(base_model(model)), merge(*nnx.split(model)))
