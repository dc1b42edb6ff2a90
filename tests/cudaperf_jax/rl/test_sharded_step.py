"""The GRPO train step on a (data=2, fsdp=2, tensor=2) mesh of 8 host CPU devices equals one device."""
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

SCRIPT = textwrap.dedent("""
    import numpy as np, jax, optax
    from flax import nnx
    assert len(jax.devices()) == 8, jax.devices()
    from cudaperf_jax.models.config import ModelConfig
    from cudaperf_jax.models.decoder import Decoder
    from cudaperf_jax.models.sharding import make_mesh, shard_model
    from cudaperf_jax.rl.train_step import make_logprob_fn, make_train_step, shard_batch, split_model
    from tests.cudaperf_jax.models import tiny
    from tests.cudaperf_jax.rl.test_grpo import _batch

    cfg = ModelConfig.from_hf(tiny.hf_config("llama").to_dict())
    batch = _batch(b=4)
    results = []
    for mesh in (None, make_mesh(data=2, fsdp=2, tensor=2)):
        model = Decoder(cfg, rngs=nnx.Rngs(0))
        if mesh is not None:
            shard_model(model, mesh)
        graphdef, params, others = split_model(model)
        b = dict(batch)
        lp = make_logprob_fn(graphdef, others)(params, b["tokens"], b["positions"], b["kv_mask"])
        b.update(old_logp=np.asarray(lp), ref_logp=np.asarray(lp))
        if mesh is not None:
            b = shard_batch(b, mesh)
        opt = optax.sgd(0.5)  # linear in the gradients: Adam would amplify reduction-order noise
        opt_state = opt.init(params)
        step = make_train_step(graphdef, others, opt)
        for _ in range(2):
            params, opt_state, m = step(params, opt_state, b)
        leaves = jax.tree.leaves(params)
        if mesh is not None:
            shards = {len(x.sharding.device_set) for x in leaves}
            assert max(shards) == 8, shards   # parameters really are spread over the mesh
        results.append((float(m["loss"]), [np.asarray(x) for x in leaves]))
    (l0, p0), (l1, p1) = results
    assert abs(l0 - l1) < 1e-5, (l0, l1)
    err = max(float(np.max(np.abs(a - b))) for a, b in zip(p0, p1))
    assert err < 1e-5, err
    print("OK", l0, l1, err)
""")


def test_sharded_train_step_matches_single_device():
    env = {"XLA_FLAGS": "--xla_force_host_platform_device_count=8", "JAX_PLATFORMS": "cpu",
           "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stderr[-3000:]
