"""The one train step of every stage (SFT, RL): gradients accumulated over micro-batches inside jit, one optimizer
update, donated state, in/out shardings named by the parameters' logical axes when a mesh is given.

    graphdef, params, opt_state, rest = init_train_state(model, optimizer, trained=nnx.Param, mesh=mesh)
    step = make_train_step(graphdef, optimizer, loss_fn, mesh=mesh)
    params, opt_state, metrics = step(params, opt_state, rest, stack_micro_batches(batch, n))   # one program

    acc = None                                     # micro-batches of several shapes (RL's bucketed lengths):
    for mb in micro_batches:                       # each shape's accumulate program adds into the donated acc
        acc = step.accumulate(params, rest, acc, stack([mb]))
    params, opt_state, metrics = step.apply(params, opt_state, acc)

What is trained: `trained` (an nnx filter) splits the model into the trained state `params` (nnx.Param for a full
fine-tune; nnx.LoRAParam for adapters) and `rest`, the other variables. Gradients, the optimizer state and the
donated buffers hold only `params`; `rest` is an ordinary argument (neither differentiated nor donated, nor baked
into the program as constants).

The loss: `loss_fn(model, micro_batch) -> (loss_sum f32[], loss_weight f32[], aux)`, aux a dict name ->
(sum f32[], weight f32[]). Dropout (LoRA's): a step given `rng` (a PRNG key, uint32[2] key data) hands micro-batch i
the key fold_in(rng, i) as micro_batch[DROPOUT_RNG], which the loss passes to the model as `dropout_rng`; without
`rng` the micro-batches have no such entry and the programs are those of a step without dropout. The step's loss is sum(loss_sum) / sum(loss_weight) over all its micro-batches (a token
mean over the whole step when the weights are token counts), and so is its gradient: micro-batches accumulate
float32 sums of gradients and weights, the division happens once in `apply`. Splitting a batch into micro-batches
therefore changes the result only by the order of float additions (tests/cudaperf_jax/training/test_step.py).

Batches are dicts of arrays stacked over micro-batches, [n, b, ...]; `lax.scan` runs the n micro-batches of one
shape in one program. Micro-batches of different shapes (RL pads each one only to its own bucketed length, see
rl/batch.py) go through `accumulate` one shape at a time, so the programs are one per micro-batch shape (compiled
once, reused every step) plus one `apply`, and nothing is padded to the step's longest sequence.

Metrics (float32 scalars): loss, each aux term (sum / weight), grad_norm (global norm of the averaged gradients,
before clipping), weight (the step's total loss weight).
"""
from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from cudaperf_jax.training.sharding import (
    batch_shardings,
    place,
    replicated,
    shardings_of,
)
from cudaperf_jax.training.state import split_model

LossFn = Callable[[nnx.Module, dict], tuple]
DROPOUT_RNG = "dropout_rng"       # the micro-batch entry holding its dropout key (only when the step is given rng)


def init_train_state(model: nnx.Module, optimizer: optax.GradientTransformation, *, trained=nnx.Param, mesh=None):
    """(graphdef, params: the `trained` variables, opt_state over params only, rest: every other variable), placed on
    `mesh` by their logical axes when one is given."""
    graphdef, params, rest = split_model(model, trained)
    params, rest = place(params, mesh), place(rest, mesh)
    return graphdef, params, init_opt_state(optimizer, params, mesh), rest


def init_opt_state(optimizer: optax.GradientTransformation, params, mesh=None):
    """optimizer.init(params), created directly in its sharding on `mesh` (Adam's moments like their parameters)."""
    if mesh is None:
        return optimizer.init(params)
    abstract = jax.eval_shape(optimizer.init, params)
    return jax.jit(optimizer.init, out_shardings=shardings_of(abstract, mesh))(params)


def stack_micro_batches(batch: dict, n: int) -> dict:
    """[B, ...] arrays -> [n, B // n, ...]: micro-batch i holds rows i*B/n .. (i+1)*B/n - 1."""
    b = next(iter(batch.values())).shape[0]
    if n < 1 or b % n:
        raise ValueError(f"a batch of {b} rows does not split into {n} equal micro-batches")
    return {k: np.asarray(v).reshape(n, b // n, *np.shape(v)[1:]) for k, v in batch.items()}


def stack(batches: list[dict]) -> dict:
    """Micro-batches of one shape, each a dict of [b, ...] arrays -> one dict of [n, b, ...] arrays."""
    return {k: np.stack([np.asarray(mb[k]) for mb in batches]) for k in batches[0]}


def _without_rng(fn):
    """fn(*args, None): the step or accumulate function of a step without dropout (no rng argument)."""
    def call(*args):
        return fn(*args, None)
    return call


class TrainStep:
    """The jitted programs of one (graphdef, optimizer, loss): __call__ (accumulate + apply in one program),
    accumulate, apply. Build with `make_train_step`."""

    def __init__(self, graphdef, optimizer: optax.GradientTransformation, loss_fn: LossFn, mesh=None):
        self.graphdef, self.optimizer, self.loss_fn, self.mesh = graphdef, optimizer, loss_fn, mesh
        self._names: tuple[str, ...] | None = None   # the loss's sum terms ("loss" and the aux names)
        self._programs: dict = {}
        self._sh = None                                 # (params, opt_state, rest) shardings on the mesh

    # ---- the pure functions -------------------------------------------------------------------------------
    def _grads(self, params, rest, mb):
        """(gradients of the micro-batch's loss_sum, {term: (sum, weight)})."""
        def objective(p):
            num, den, aux = self.loss_fn(nnx.merge(self.graphdef, p, rest), mb)
            return num, (den, aux)
        (num, (den, aux)), grads = jax.value_and_grad(objective, has_aux=True)(params)
        return grads, {"loss": (num, den), **aux}

    def _zeros(self, params):
        grads = jax.tree.map(lambda x: jnp.zeros(x.shape, jnp.float32), params)
        if self.mesh is not None:
            grads = jax.lax.with_sharding_constraint(grads, self._sh[0])
        return {"grads": grads, "sums": {k: (jnp.float32(0), jnp.float32(0)) for k in self._names}}

    def _accumulate(self, params, rest, acc, stacked, rng=None):
        if rng is not None:   # micro-batch i drops with fold_in(rng, i)
            n = next(iter(stacked.values())).shape[0]
            stacked = {**stacked, DROPOUT_RNG: jax.vmap(lambda i: jax.random.fold_in(rng, i))(jnp.arange(n))}

        def body(acc, mb):
            grads, sums = self._grads(params, rest, mb)
            f32 = lambda a, g: a + jnp.asarray(g, jnp.float32)
            return {"grads": jax.tree.map(f32, acc["grads"], grads), "sums": jax.tree.map(f32, acc["sums"], sums)}, None
        return jax.lax.scan(body, acc, stacked)[0]

    def _apply(self, params, opt_state, acc):
        _, den = acc["sums"]["loss"]
        safe = jnp.where(den > 0, den, 1.0)
        grads = jax.tree.map(lambda g, p: (g / safe).astype(p.dtype), acc["grads"], params)
        updates, opt_state = self.optimizer.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        metrics = {k: jnp.where(w > 0, s / jnp.where(w > 0, w, 1.0), 0.0) for k, (s, w) in acc["sums"].items()}
        metrics.update(grad_norm=optax.global_norm(grads), weight=den)
        return params, opt_state, metrics

    def _step(self, params, opt_state, rest, stacked, rng=None):
        return self._apply(params, opt_state, self._accumulate(params, rest, self._zeros(params), stacked, rng))

    # ---- compiled programs ------------------------------------------------------------------------------------
    def _prepare(self, params, rest, stacked, opt_state=None):
        """Learns the loss's term names (one abstract trace) and, on a mesh, the state's shardings."""
        if self._names is None:
            one = {k: jax.ShapeDtypeStruct(np.shape(v)[1:], v.dtype if hasattr(v, "dtype") else np.asarray(v).dtype)
                   for k, v in stacked.items()}
            _, sums = jax.eval_shape(self._grads, params, rest, one)
            self._names = tuple(sums)
        if self.mesh is not None and self._sh is None:
            if opt_state is None:
                opt_state = jax.eval_shape(self.optimizer.init, params)
            self._sh = (shardings_of(params, self.mesh), shardings_of(opt_state, self.mesh),
                        shardings_of(rest, self.mesh))

    def _program(self, kind: str, stacked: dict | None = None, rng: bool = False):
        key = (kind, rng, None if stacked is None or self.mesh is None else
               tuple((k, tuple(np.shape(v))) for k, v in sorted(stacked.items())))
        if key in self._programs:
            return self._programs[key]
        fns = {"step": (self._step, (0, 1)), "accumulate": (self._accumulate, (2,)), "apply": (self._apply, (0, 1)),
               "zeros": (self._zeros, ())}
        fn, donate = fns[kind]
        if kind in ("step", "accumulate") and not rng:   # no rng argument: the program of a step without dropout
            fn = _without_rng(fn)
        if self.mesh is None:
            prog = jax.jit(fn, donate_argnums=donate)
        else:
            p, o, r = self._sh
            rep = replicated(self.mesh)
            acc = {"grads": p, "sums": rep}
            b = batch_shardings(stacked, self.mesh, axis=1) if stacked is not None else None
            ins, outs = {"step": ((p, o, r, b), (p, o, rep)), "accumulate": ((p, r, acc, b), acc),
                         "apply": ((p, o, acc), (p, o, rep)), "zeros": ((p,), acc)}[kind]
            ins = (*ins, rep) if rng else ins
            prog = jax.jit(fn, in_shardings=ins, out_shardings=outs, donate_argnums=donate)
        self._programs[key] = prog
        return prog

    def __call__(self, params, opt_state, rest, stacked: dict, rng=None):
        """One optimizer update over the stacked micro-batches [n, b, ...]: (params, opt_state, metrics); params and
        opt_state are donated. rng: the step's dropout key (uint32[2]; None: no dropout)."""
        self._prepare(params, rest, stacked, opt_state)
        args = (params, opt_state, rest, stacked) + (() if rng is None else (rng,))
        return self._program("step", stacked, rng is not None)(*args)

    def lower(self, params, opt_state, rest, stacked: dict, rng=None):
        """The jax `Lowered` of __call__'s program for these arguments: `.compile()` gives the executable (called
        like __call__, same donation) with its memory_analysis() and cost_analysis() (benchmarks)."""
        self._prepare(params, rest, stacked, opt_state)
        args = (params, opt_state, rest, stacked) + (() if rng is None else (rng,))
        return self._program("step", stacked, rng is not None).lower(*args)

    def accumulate(self, params, rest, acc, stacked: dict, rng=None):
        """acc (None: zeros) plus the gradient and loss sums of the stacked micro-batches [n, b, ...]; acc is donated.
        rng: these micro-batches' dropout key (uint32[2]; None: no dropout)."""
        self._prepare(params, rest, stacked)
        if acc is None:
            acc = self._program("zeros")(params)
        args = (params, rest, acc, stacked) + (() if rng is None else (rng,))
        return self._program("accumulate", stacked, rng is not None)(*args)

    def apply(self, params, opt_state, acc):
        """The optimizer update from accumulated sums: (params, opt_state, metrics); params and opt_state are donated."""
        if acc is None:
            raise ValueError("apply needs the sums of at least one accumulate call")
        return self._program("apply")(params, opt_state, acc)


def make_train_step(graphdef, optimizer: optax.GradientTransformation, loss_fn: LossFn, *, mesh=None) -> TrainStep:
    """The train step of `loss_fn` for the model `graphdef` (from init_train_state / split_model); see the module
    docstring."""
    return TrainStep(graphdef, optimizer, loss_fn, mesh)
