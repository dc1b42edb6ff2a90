"""The CUDA decode kernels' Python side on the CPU: the nvcc build, the shape checks of the FFI calls, the tilings,
the step launch's plan and the group-major gate_up layout (the kernels themselves: test_cuda_*_emulated.py on the
CPU, test_cuda_gpu.py on an H200)."""
import ctypes
import dataclasses
import subprocess

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from cudaperf_jax.kernels import DecodeKernels, cuda_build, cuda_ffi, cuda_step
from cudaperf_jax.kernels import step as kstep
from cudaperf_jax.kernels.config import tilings
from kernels_harness.build.nvcc import CompilerNotFound, find_nvcc


def _nvcc_or_skip():
    try:
        return find_nvcc()
    except CompilerNotFound as e:
        pytest.skip(str(e))


def test_the_library_builds_for_sm90_caches_and_registers(tmp_path):
    _nvcc_or_skip()
    path = cuda_build.build(tmp_path)
    assert path.exists() and path.parent == tmp_path and "sm_90" in path.name
    assert hasattr(ctypes.cdll.LoadLibrary(str(path)), "CudaperfMatvec")
    mtime = path.stat().st_mtime_ns
    assert cuda_build.build(tmp_path) == path and path.stat().st_mtime_ns == mtime   # cached, not rebuilt
    syms = subprocess.run(["nm", "-D", str(path)], check=False, capture_output=True, text=True).stdout
    assert all(f" T {sym}" in syms for _, sym in cuda_build.TARGETS.values())
    cuobjdump = find_nvcc().with_name("cuobjdump")
    if cuobjdump.exists():   # beside nvcc in the toolkit, not in every pip install
        elves = subprocess.run([str(cuobjdump), "--list-elf", str(path)], check=False, capture_output=True, text=True).stdout
        assert "sm_90" in elves


def test_shapes_the_kernel_cannot_take_are_refused():
    x = jnp.ones((3, 128), jnp.float32)
    with pytest.raises(ValueError, match="N a multiple of cols"):
        cuda_ffi.matvec(x, jnp.ones((128, 96), jnp.bfloat16))
    with pytest.raises(ValueError, match="N a multiple of cols"):
        cuda_ffi.matvec(x, jnp.ones((128, 192), jnp.bfloat16), cols=128)
    with pytest.raises(ValueError, match="split_k dividing K"):
        cuda_ffi.matvec(x, jnp.ones((128, 128), jnp.bfloat16), split_k=3)
    with pytest.raises(ValueError, match="bf16"):
        cuda_ffi.matvec(x, jnp.ones((128, 128), jnp.float32))
    with pytest.raises(ValueError, match=r"must be \[P, >= K\]"):
        cuda_ffi.matvec(x, jnp.ones((256, 128), jnp.bfloat16))
    assert cuda_ffi.supported(8960, 1536, 14) and not cuda_ffi.supported(8960, 1536, 3)
    assert cuda_ffi.supported(8960, 1536, 14, 64) and not cuda_ffi.supported(8960, 1536, 14, 1024)


@pytest.mark.parametrize("k,n,want", [(1536, 17920, 4), (8960, 1536, 56), (1536, 1536, 24), (576, 960, 9)])
def test_default_split_fills_the_gpu_with_long_enough_slices(k, n, want):
    s = cuda_ffi.default_split(k, n)
    assert s == want and k % s == 0 and k // s >= 64


def test_the_prologues_check_their_inputs():
    w = jnp.ones((128, 128), jnp.bfloat16)
    x = jnp.ones((128,), jnp.bfloat16)
    with pytest.raises(ValueError, match="x and scale must be"):
        cuda_ffi.matvec_norm(x[:64], jnp.ones((4,)), x, w, n_chunks=1, eps=1e-6)
    with pytest.raises(ValueError, match="ss >= n_chunks"):
        cuda_ffi.matvec_norm(x, jnp.ones((4,)), x, w, n_chunks=8, eps=1e-6)
    with pytest.raises(ValueError, match=r"parts must be \[P, 2K\]"):
        cuda_ffi.matvec_swiglu(jnp.ones((2, 128)), None, w)
    with pytest.raises(ValueError, match="out_cols >= N"):
        cuda_ffi.matvec(jnp.ones((1, 128)), w, out_cols=64)
    wo = jnp.ones((2 * 6 * 128, 1536), jnp.bfloat16)
    acc, ml = jnp.ones((2, 4, 16, 128)), jnp.ones((2, 4, 2, 16))
    with pytest.raises(ValueError, match="Hkv \\* group \\* Dh == K"):
        cuda_ffi.matvec_attn(acc, ml, wo, group=5)
    with pytest.raises(ValueError, match=r"ml \[Hkv, S, 2, Gp\]"):
        cuda_ffi.matvec_attn(acc, ml[:, :2], wo, group=6)


def test_tilings_come_from_the_table(tmp_path):
    import json
    table = tilings()
    assert cuda_ffi.tiling_for(8960, 1536, table) == (40, 128, 8)            # the packaged H200 table
    assert cuda_ffi.tiling_for(1536, 17920, table) == (3, 128, 4)
    assert cuda_ffi.tiling_for(1536, 17920, table, step=True) == (3, 128, 8)  # the step launch's own gate_up
    assert cuda_ffi.tiling_for(576, 960, table) == (cuda_ffi.default_split(576, 960), 64, 4)
    bad = tmp_path / "t.json"
    bad.write_text(json.dumps([{"kernel": "cuda", "K": 8960, "N": 1536, "config": {"split_k": 27, "cols": 64}}]))
    with pytest.raises(ValueError, match="split_k must divide K"):
        cuda_ffi.tiling_for(8960, 1536, tilings(str(bad)))


def test_top_k_checks_its_inputs_and_stays_off_on_the_cpu():
    from cudaperf_jax.generation import sampling
    assert cuda_ffi.topk_supported(151936, 50) and cuda_ffi.topk_supported(151936, 64)
    assert not cuda_ffi.topk_supported(151936, 65) and not cuda_ffi.topk_supported(40, 50)
    assert cuda_ffi.topk_supported(262144, 64) and not cuda_ffi.topk_supported(262145, 64)   # 4096 chunks at most
    with pytest.raises(ValueError, match="1 <= k <= 64"):
        cuda_ffi.top_k(jnp.ones((1, 151936)), 65)
    with pytest.raises(ValueError, match=r"x \[B, V\]"):
        cuda_ffi.top_k(jnp.ones((151936,)), 50)
    if jax.default_backend() == "cpu":   # no GPU: auto keeps the sampler's own top-k
        assert DecodeKernels().resolve(1).top_k == "xla"
        x = jax.random.normal(jax.random.key(0), (1, 20000))
        np.testing.assert_array_equal(np.asarray(sampling.top_k(x, 50)[0]), np.asarray(jax.lax.top_k(x, 50)[0]))
    assert not sampling._cuda_top_k(151936, 50, False) and sampling._cuda_top_k(151936, 50, True)


def test_the_step_launch_takes_hopper_shapes_from_hidden_size_1024():
    table = tilings()
    # Qwen2.5-1.5B: D 1536, 12 / 2 heads of 128, F 8960; SmolLM2-135M (D 576) keeps the separate calls
    assert cuda_step.supported(1536, 12, 2, 128, 8960, 320, table)
    assert not cuda_step.supported(576, 9, 3, 64, 1536, 320, table)
    assert not cuda_step.supported(1536, 12, 2, 96, 8960, 320, table)   # head dim not a power of two
    assert cuda_step.attn_splits(192) == 8 and cuda_step.attn_splits(4096) == 32
    assert cuda_step.head_groups(6) == 6 and cuda_step.head_groups(3) == 1


def test_the_group_major_gate_up_layout_and_the_layouts_pytree():
    """mlp_gm_layout puts gate and up columns 8q..8q+7 of every row into group q's contiguous [D, 16] block; the
    Decoder builds it per layer only where the step launch's one-kernel MLP runs (not on the CPU)."""
    from cudaperf_jax.models.config import ModelConfig
    from cudaperf_jax.models.decoder import Decoder
    d, f = 16, 24
    w = np.arange(d * 2 * f, dtype=np.float32).reshape(d, 2, f)
    gm = cuda_step.mlp_gm_layout(w)
    assert gm.shape == (f // 8, d, 16)
    for q, r, j in ((0, 0, 0), (1, 5, 3), (2, 15, 7)):
        assert gm[q, r, j] == w[r, 0, 8 * q + j] and gm[q, r, 8 + j] == w[r, 1, 8 * q + j]
    np.testing.assert_array_equal(cuda_step.mlp_gm_layout(w.reshape(d, 2 * f)), gm)
    np.testing.assert_array_equal(cuda_step.mlp_row_major(gm), w.reshape(d, 2 * f))   # the inverse
    cfg = ModelConfig(vocab_size=64, hidden_size=d, intermediate_size=f, num_layers=2, num_heads=2, num_kv_heads=1,
                      head_dim=8)
    model = Decoder(cfg, rngs=nnx.Rngs(0))
    layouts = kstep.layouts([layer.mlp.gate_up[...] for layer in model.layers], jnp.float32)
    assert len(layouts) == 2 and layouts[1].shape == (f // 8, d, 16)
    np.testing.assert_array_equal(np.asarray(layouts[1]),
                                  cuda_step.mlp_gm_layout(np.asarray(model.layers[1].mlp.gate_up[...], np.float32)))
    assert model.kernel_layouts(DecodeKernels(), 1, (1, 1, 16, 8), jnp.bfloat16) == ()   # no step launch here
    kc = dataclasses.replace(DecodeKernels(path="cuda").resolve(1), path="cuda")
    assert not kstep.layouts_apply(cfg, kc, jnp.bfloat16, 1, (1, 1, 16, 8), jnp.bfloat16)   # D 16: no step launch
