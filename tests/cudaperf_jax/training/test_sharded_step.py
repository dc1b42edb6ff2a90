"""The training core's step on a (data=2, fsdp=2, tensor=2) mesh of 8 host CPU devices equals the one-device step:
SFT's scanned micro-batches and RL's micro-batches of two lengths (accumulate + apply), parameters and optimizer
state sharded by their logical axes and kept in place from step to step; LoRA adapters with dropout over a sharded
frozen base, and their merged kernels."""
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

SCRIPT = textwrap.dedent("""
    import numpy as np, jax, optax
    assert len(jax.devices()) == 8, jax.devices()
    from cudaperf_jax.rl.batch import micro_batches
    from cudaperf_jax.rl.grpo import GRPOConfig
    from cudaperf_jax.rl.objective import TRAIN_KEYS, grpo_objective
    from cudaperf_jax.sft.step import token_nll_loss
    from cudaperf_jax.training import (MeshConfig, OptimConfig, init_train_state, make_optimizer, make_train_step,
                                       mesh_of, stack, stack_micro_batches)
    from tests.cudaperf_jax.training.test_step import candidates, sft_batch, tiny_model, with_policy_logprobs

    def run(mesh, opt):
        graphdef, params, opt_state, rest = init_train_state(tiny_model(), opt, mesh=mesh)
        sft = make_train_step(graphdef, opt, token_nll_loss(), mesh=mesh)
        batch = stack_micro_batches(sft_batch(rows=8), 2)                  # [2, 4, L]: 4 rows over data x fsdp
        for _ in range(2):
            params, opt_state, m_sft = sft(params, opt_state, rest, batch)
        rl = make_train_step(graphdef, opt, grpo_objective(GRPOConfig(kl_beta=0.1)), mesh=mesh)
        cands = with_policy_logprobs(candidates([(5, 3), (7, 6), (6, 2), (9, 4), (20, 12), (30, 25), (18, 9),
                                                 (25, 3)]), graphdef, params, rest, 8)
        mbs = micro_batches(cands, np.linspace(-1, 1, 8).astype(np.float32), 0, size=4, bucket=8)
        assert len({mb["tokens"].shape for mb in mbs}) == 2
        acc = None
        for mb in mbs:
            acc = rl.accumulate(params, rest, acc, stack([{k: mb[k] for k in TRAIN_KEYS}]))
        params, opt_state, m_rl = rl.apply(params, opt_state, acc)
        return params, opt_state, jax.device_get(m_sft), jax.device_get(m_rl)

    mesh = mesh_of(MeshConfig(data=2, fsdp=2, tensor=2))
    assert mesh_of(MeshConfig()) is None and mesh.devices.size == 8
    opt = optax.sgd(0.5)  # linear in the gradients: Adam would amplify reduction-order noise
    p0, _, s0, r0 = run(None, opt)
    p1, o1, s1, r1 = run(mesh, opt)
    for m0, m1 in ((s0, s1), (r0, r1)):
        for k in m0:
            assert abs(float(m0[k]) - float(m1[k])) <= 1e-5 * max(1.0, abs(float(m0[k]))), (k, m0[k], m1[k])
    err = max(float(np.max(np.abs(np.asarray(a) - np.asarray(b)))) for a, b in zip(jax.tree.leaves(p0),
                                                                                   jax.tree.leaves(p1)))
    assert err < 1e-5, err
    assert max(len(x.sharding.device_set) for x in jax.tree.leaves(p1)) == 8    # really spread over the mesh
    # the production optimizer (AdamW, clipping, masked decay): its moments sharded like their parameters, and the
    # step's outputs stay where its inputs were (the next call reuses the program)
    adamw, _ = make_optimizer(OptimConfig(weight_decay=0.1), 10)
    graphdef, params, opt_state, rest = init_train_state(tiny_model(), adamw, mesh=mesh)
    before = [x.sharding for x in jax.tree.leaves((params, opt_state))]
    step = make_train_step(graphdef, adamw, token_nll_loss(), mesh=mesh)
    for _ in range(2):
        params, opt_state, m = step(params, opt_state, rest, stack_micro_batches(sft_batch(rows=8), 2))
    assert [x.sharding for x in jax.tree.leaves((params, opt_state))] == before
    assert len(step._programs) == 1 and np.isfinite(float(m["loss"]))
    mu = [x for x in jax.tree.leaves(opt_state) if x.ndim >= 2]
    assert mu and all(len(x.sharding.device_set) > 1 for x in mu)
    # LoRA: the adapters (trained, sharded by their logical axes) over a frozen sharded base, with dropout keys:
    # the one-device result; lora.merge on the mesh gives the sampler sharded kernels
    from flax import nnx
    from cudaperf_jax.models import lora
    from cudaperf_jax.training import LoRAConfig, with_adapters

    def lora_run(mesh):
        model, trained = with_adapters(tiny_model(), LoRAConfig(rank=4, targets="q,k,v,o,gate,up,down",
                                                                dropout=0.2), rngs=nnx.Rngs(1))
        graphdef, params, opt_state, rest = init_train_state(model, opt, trained=trained, mesh=mesh)
        step = make_train_step(graphdef, opt, token_nll_loss(), mesh=mesh)
        for i in range(2):
            params, opt_state, m = step(params, opt_state, rest, stack_micro_batches(sft_batch(rows=8), 2),
                                        rng=jax.random.PRNGKey(i))
        return graphdef, params, rest, jax.device_get(m)
    _, a0, _, l0 = lora_run(None)
    g1, a1, rest1, l1 = lora_run(mesh)
    assert all(abs(float(l0[k]) - float(l1[k])) <= 1e-5 * max(1.0, abs(float(l0[k]))) for k in l0), (l0, l1)
    err_lora = max(float(np.max(np.abs(np.asarray(a) - np.asarray(b)))) for a, b in zip(jax.tree.leaves(a0),
                                                                                        jax.tree.leaves(a1)))
    assert err_lora < 1e-5, err_lora
    assert max(len(x.sharding.device_set) for x in jax.tree.leaves(a1)) > 1
    merged = dict(nnx.to_flat_state(lora.merge(g1, a1, rest1)))
    assert len(merged[("layers", 0, "attn", "qkv")][...].sharding.device_set) == 8
    print("OK", float(s0["loss"]), float(r0["loss"]), err, err_lora)
""")


def test_sharded_train_step_matches_single_device():
    env = {"XLA_FLAGS": "--xla_force_host_platform_device_count=8", "JAX_PLATFORMS": "cpu",
           "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=900, check=False)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stderr[-3000:]
