"""A toy experiment (SGD on a quadratic with JAX + Optax) that exercises launch, workdir and resume."""
import os

import jax
import jax.numpy as jnp
import optax

from cudaperf_jax.experiment import open_run
from experiments import launch

launch.define_config("tests/experiments/toy/config.py")


def main(config, workdir):
    run = open_run(workdir, config, name="toy")
    key = jax.random.PRNGKey(config.seed)
    target = jax.random.normal(key, (8,))
    opt = optax.sgd(config.opt.lr, momentum=config.opt.momentum)
    params = jnp.zeros((8,))
    state = {"params": params, "opt": opt.init(params), "key": jax.random.PRNGKey(config.seed + 1)}
    restored = run.restore(state)
    state = restored if restored is not None else state

    @jax.jit
    def step_fn(state):
        key, sub = jax.random.split(state["key"])
        noise = 0.01 * jax.random.normal(sub, (8,))
        loss, grad = jax.value_and_grad(lambda p: jnp.sum((p - target - noise) ** 2))(state["params"])
        updates, opt_state = opt.update(grad, state["opt"], state["params"])
        return {"params": optax.apply_updates(state["params"], updates), "opt": opt_state, "key": key}, loss

    for step in range(run.restore_step(), config.steps):
        if step == int(os.environ.get("TOY_CRASH_AT", "-1")):  # simulates a killed run
            raise SystemExit(17)
        state, loss = step_fn(state)
        run.log(step, {"loss": float(loss)})
        run.save(step, state)
    run.close()


if __name__ == "__main__":
    launch.run(main, name="toy")
