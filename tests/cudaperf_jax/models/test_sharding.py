"""A model sharded over an 8-device (data 2, fsdp 2, tensor 2) CPU mesh computes what the unsharded one does."""
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import numpy as np
from jax.sharding import PartitionSpec as P

from cudaperf_jax.models.sharding import fit_spec, make_mesh

REPO = Path(__file__).resolve().parents[3]

SCRIPT = textwrap.dedent("""
    import numpy as np, jax, jax.numpy as jnp
    from flax import nnx
    from cudaperf_jax.models.config import ModelConfig
    from cudaperf_jax.models.decoder import Decoder
    from cudaperf_jax.models.sharding import make_mesh, shard_model
    from cudaperf_jax.generation.sampler import Sampler, SamplingParams
    assert len(jax.devices()) == 8
    cfg = ModelConfig(model_type="qwen2", vocab_size=96, hidden_size=64, intermediate_size=128, num_layers=2,
                      num_heads=4, num_kv_heads=2, head_dim=16, qkv_bias=True)
    toks = jnp.asarray(np.random.RandomState(0).randint(0, 96, (4, 12)))
    plain = Decoder(cfg, rngs=nnx.Rngs(0))
    mesh = make_mesh(data=2, fsdp=2, tensor=2)
    sharded = shard_model(Decoder(cfg, rngs=nnx.Rngs(0)), mesh)
    spec = sharded.layers[0].attn.qkv[...].sharding.spec
    assert tuple(spec) == ("fsdp", "tensor"), spec
    assert len(sharded.layers[0].mlp.down[...].addressable_shards) == 8
    diff = np.abs(np.asarray(jax.jit(lambda m, t: m(t))(sharded, toks)) - np.asarray(plain(toks))).max()
    prompts = [[1, 2, 3], [4, 5, 6, 7, 8], [9], [10, 11]]
    params = SamplingParams(max_new_tokens=8, temperature=0.7, top_p=0.9)
    a = Sampler(plain, prompt_bucket=4, pad_id=0).generate(prompts, params, seed=3)
    b = Sampler(sharded, prompt_bucket=4, pad_id=0, mesh=mesh).generate(prompts, params, seed=3)
    print("RESULT", diff, bool((a.tokens == b.tokens).all()), np.abs(a.logprobs - b.logprobs).max())
""")


def test_sharded_forward_and_sampling_equal_unsharded():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu",
               PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-c", SCRIPT], check=False, capture_output=True, text=True, env=env, cwd=REPO,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")][-1].split()
    assert float(line[1]) < 1e-5
    assert line[2] == "True"
    assert float(line[3]) < 1e-5


def test_fit_spec_drops_axes_that_do_not_divide():
    mesh = make_mesh(data=1, fsdp=1, tensor=1)
    assert fit_spec(("fsdp", "tensor"), (6, 4), mesh) == P("fsdp", "tensor")

    class FakeMesh:
        shape = types.MappingProxyType({"data": 2, "fsdp": 2, "tensor": 2})
    assert fit_spec((("data", "fsdp"), None, "tensor"), (4, 7, 3), FakeMesh) == P(("data", "fsdp"), None, None)
    assert fit_spec((("data", "fsdp"),), (2, 5), FakeMesh) == P("data", None)
    assert np.prod(list(FakeMesh.shape.values())) == 8
