"""The CUDA FFI matvec (cuda_matvec.py) on a machine without a GPU: nvcc builds the library for sm_90, it
exports the handler, JAX registers it, and bad shapes are refused before any launch."""
import ctypes
import subprocess

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cudaperf_jax.models import cuda_matvec as cm
from kernels_harness.build.nvcc import CompilerNotFound, find_nvcc


def _nvcc_or_skip():
    try:
        return find_nvcc()
    except CompilerNotFound as e:
        pytest.skip(str(e))


def test_the_library_builds_for_sm90_caches_and_registers(tmp_path):
    _nvcc_or_skip()
    path = cm.build(tmp_path)
    assert path.exists() and path.parent == tmp_path and "sm_90" in path.name
    assert hasattr(ctypes.cdll.LoadLibrary(str(path)), "CudaperfMatvec")
    mtime = path.stat().st_mtime_ns
    assert cm.build(tmp_path) == path and path.stat().st_mtime_ns == mtime   # cached, not rebuilt
    syms = subprocess.run(["nm", "-D", str(path)], check=False, capture_output=True, text=True).stdout
    assert all(f" T {sym}" in syms for _, sym in cm.TARGETS.values())
    cuobjdump = find_nvcc().with_name("cuobjdump")
    if cuobjdump.exists():   # beside nvcc in the toolkit, not in every pip install
        elves = subprocess.run([str(cuobjdump), "--list-elf", str(path)], check=False, capture_output=True, text=True).stdout
        assert "sm_90" in elves


def test_register_loads_the_handler_for_cuda(monkeypatch, tmp_path):
    _nvcc_or_skip()
    monkeypatch.setenv("CUDAPERF_CACHE", str(tmp_path))
    cm.register.cache_clear()
    assert cm.register().parent == tmp_path / "cuda_ffi"


def test_shapes_the_kernel_cannot_take_are_refused():
    x = jnp.ones((3, 128), jnp.float32)
    with pytest.raises(ValueError, match="N a multiple of cols"):
        cm.matvec(x, jnp.ones((128, 96), jnp.bfloat16))
    with pytest.raises(ValueError, match="N a multiple of cols"):
        cm.matvec(x, jnp.ones((128, 192), jnp.bfloat16), cols=128)
    with pytest.raises(ValueError, match="epilogue must be one of"):
        cm.matvec(x, jnp.ones((128, 128), jnp.bfloat16), epilogue="residual")
    with pytest.raises(ValueError, match="epilogue must be one of"):
        cm.matvec(x, jnp.ones((128, 128), jnp.bfloat16), epilogue="sum", residual=(x[0], None))
    with pytest.raises(ValueError, match=r"residual stream and its bias must be \[N=128\]"):
        cm.matvec(x, jnp.ones((128, 128), jnp.bfloat16), epilogue="residual",
                  residual=(jnp.ones((128,), jnp.bfloat16), jnp.ones((64,), jnp.bfloat16)))
    with pytest.raises(ValueError, match="split_k dividing K"):
        cm.matvec(x, jnp.ones((128, 128), jnp.bfloat16), split_k=3)
    with pytest.raises(ValueError, match="bf16"):
        cm.matvec(x, jnp.ones((128, 128), jnp.float32))
    with pytest.raises(ValueError, match=r"must be \[P, >= K\]"):
        cm.matvec(x, jnp.ones((256, 128), jnp.bfloat16))
    assert cm.supported(8960, 1536, 14) and not cm.supported(8960, 1536, 3)
    assert cm.supported(8960, 1536, 14, 64) and not cm.supported(8960, 1536, 14, 1024)


@pytest.mark.parametrize("k,n,want", [(1536, 17920, 4), (8960, 1536, 56), (1536, 1536, 24), (576, 960, 9)])
def test_default_split_fills_the_gpu_with_long_enough_slices(k, n, want):
    s = cm.default_split(k, n)
    assert s == want and k % s == 0 and k // s >= 64


def test_the_norm_and_swiglu_prologues_check_their_inputs():
    w = jnp.ones((128, 128), jnp.bfloat16)
    x = jnp.ones((128,), jnp.bfloat16)
    with pytest.raises(ValueError, match="x and scale must be"):
        cm.matvec_norm(x[:64], jnp.ones((4,)), x, w, n_chunks=1, eps=1e-6)
    with pytest.raises(ValueError, match="ss >= n_chunks"):
        cm.matvec_norm(x, jnp.ones((4,)), x, w, n_chunks=8, eps=1e-6)
    with pytest.raises(ValueError, match=r"parts must be \[P, 2K\]"):
        cm.matvec_swiglu(jnp.ones((2, 128)), None, w)
    with pytest.raises(ValueError, match="out_cols >= N"):
        cm.matvec(jnp.ones((1, 128)), w, out_cols=64)


def test_splits_can_be_set_per_shape(monkeypatch):
    monkeypatch.setenv("CUDAPERF_CUDA_SPLIT", "8960x1536=28, 1536x2048=12")
    assert cm.split_for(8960, 1536) == 28 and cm.split_for(1536, 2048) == 12
    assert cm.split_for(576, 960) == cm.default_split(576, 960)
    assert cm.tiling_for(8960, 1536) == (28, 256, 4) and cm.tiling_for(1536, 17920) == cm.TUNED[1536, 17920]
    assert cm.tiling_for(1536, 17920, cm.STEP_TUNED) == (3, 128, 8)   # the step launch's own gate_up
    assert cm.tiling_for(576, 960) == (cm.default_split(576, 960), 64, 4)
    monkeypatch.setenv("CUDAPERF_CUDA_SPLIT", "8960x1536=14:64,1536x1536=12:128:8")
    assert cm.tiling_for(8960, 1536) == (14, 64, 4) and cm.tiling_for(1536, 1536) == (12, 128, 8)
    monkeypatch.setenv("CUDAPERF_CUDA_UNROLL", "8")
    assert cm.tiling_for(8960, 1536) == (14, 64, 8) and cm.tiling_for(576, 960)[2] == 8
    monkeypatch.setenv("CUDAPERF_CUDA_SPLIT", "8960x1536=14:64:6")
    with pytest.raises(ValueError, match="unroll is 4 or 8"):
        cm.tiling_for(8960, 1536)
    monkeypatch.setenv("CUDAPERF_CUDA_SPLIT", "8960x1536=27")
    with pytest.raises(ValueError, match="must divide K=8960"):
        cm.split_for(8960, 1536)
    monkeypatch.setenv("CUDAPERF_CUDA_SPLIT", "8960x1536=28:96")
    with pytest.raises(ValueError, match="cols"):
        cm.tiling_for(8960, 1536)
    monkeypatch.setenv("CUDAPERF_CUDA_SPLIT", "8960:1536")
    with pytest.raises(ValueError, match="write KxN=S"):
        cm.split_for(8960, 1536)


def test_the_attention_merge_prologue_checks_its_inputs():
    w = jnp.ones((2 * 6 * 128, 1536), jnp.bfloat16)
    acc, ml = jnp.ones((2, 4, 16, 128)), jnp.ones((2, 4, 2, 16))
    with pytest.raises(ValueError, match="Hkv \\* group \\* Dh == K"):
        cm.matvec_attn(acc, ml, w, group=5)
    with pytest.raises(ValueError, match=r"ml \[Hkv, S, 2, Gp\]"):
        cm.matvec_attn(acc, ml[:, :2], w, group=6)


def test_auto_mode_is_off_without_a_hopper_gpu_and_settings_are_checked(monkeypatch):
    monkeypatch.delenv("CUDAPERF_DECODE_CUDA", raising=False)
    assert cm.mode() == "auto" and cm.enabled() is (jax.devices()[0].platform == "gpu" and cm._auto())
    if jax.default_backend() == "cpu":
        assert not cm.enabled()
    monkeypatch.setenv("CUDAPERF_DECODE_CUDA", "off")
    assert not cm.enabled()
    monkeypatch.setenv("CUDAPERF_CUDA_EPILOGUE", "qkv")
    assert cm.epilogues() == "qkv"
    monkeypatch.setenv("CUDAPERF_CUDA_EPILOGUE", "all")
    with pytest.raises(ValueError, match="CUDAPERF_CUDA_EPILOGUE"):
        cm.epilogues()


def test_finish_checks_its_inputs_and_can_be_switched_off(monkeypatch):
    x = jnp.ones((256,), jnp.bfloat16)
    with pytest.raises(ValueError, match="N % 128 == 0"):
        cm.finish(jnp.ones((192,), jnp.bfloat16), None, None)
    with pytest.raises(ValueError, match=r"parts \[P, >= N\]"):
        cm.finish(x, jnp.ones((2, 128)), None)
    with pytest.raises(ValueError, match=r"bias \[N\]"):
        cm.finish(x, jnp.ones((2, 256)), jnp.ones((128,), jnp.bfloat16))
    monkeypatch.setenv("CUDAPERF_CUDA_FINISH", "on")
    assert cm.finish_enabled()
    monkeypatch.setenv("CUDAPERF_CUDA_FINISH", "off")
    assert not cm.finish_enabled()
    monkeypatch.setenv("CUDAPERF_CUDA_FINISH", "yes")
    with pytest.raises(ValueError, match="CUDAPERF_CUDA_FINISH"):
        cm.finish_enabled()


def test_top_k_checks_its_inputs_and_stays_off_on_the_cpu(monkeypatch):
    from cudaperf_jax.generation import sampling
    assert cm.topk_supported(151936, 50) and cm.topk_supported(151936, 64)
    assert not cm.topk_supported(151936, 65) and not cm.topk_supported(40, 50) and not cm.topk_supported(600000, 64)
    assert cm.topk_supported(262144, 64) and not cm.topk_supported(262145, 64)   # 4096 chunks of 64 at most
    with pytest.raises(ValueError, match="1 <= k <= 64"):
        cm.top_k(jnp.ones((1, 151936)), 65)
    with pytest.raises(ValueError, match=r"x \[B, V\]"):
        cm.top_k(jnp.ones((151936,)), 50)
    monkeypatch.delenv("CUDAPERF_CUDA_TOPK", raising=False)
    assert cm.topk_enabled()   # auto: wherever the CUDA kernels are enabled
    monkeypatch.setenv("CUDAPERF_CUDA_TOPK", "on")
    assert cm.topk_enabled()
    if jax.default_backend() == "cpu":   # asked for, but no GPU: the sampler keeps its own top-k
        assert not sampling._cuda_top_k(151936, 50)
        x = jax.random.normal(jax.random.key(0), (1, 20000))
        np.testing.assert_array_equal(np.asarray(sampling.top_k(x, 50)[0]), np.asarray(jax.lax.top_k(x, 50)[0]))
    monkeypatch.setenv("CUDAPERF_CUDA_TOPK", "off")
    assert not cm.topk_enabled() and not sampling._cuda_top_k(151936, 50)


def test_the_layer_kernel_options_and_its_shape_checks(monkeypatch):
    """CUDAPERF_CUDA_LAYER and its tiling: one wave of work items per matvec, env overrides checked, shapes it
    cannot take refused; on a machine without a GPU the decoder keeps its seven-kernel step."""
    assert cm.layer_mode() == "auto"
    monkeypatch.setenv("CUDAPERF_CUDA_LAYER", "sometimes")
    with pytest.raises(ValueError, match="CUDAPERF_CUDA_LAYER"):
        cm.layer_mode()
    monkeypatch.setenv("CUDAPERF_CUDA_LAYER", "on")
    tiling = cm.layer_tiling(1536, 2048, 1536, 8960, grid=396)   # Qwen2.5-1.5B on an H200 (132 SMs x 3)
    for (split, cols), (k, n) in zip(tiling, [(1536, 2048), (1536, 1536), (1536, 17920), (8960, 1536)]):
        assert k % split == 0 and n % cols == 0 and (n // cols) * split <= 396 and split <= cm.LAYER_MAX_SPLIT
    assert tiling[2] == (2, 128)          # gate_up: 140 tiles x 2 slices fill one wave; x 3 would not
    assert cm._grid_tiling(64, 1 << 20, 396) == (1, 128)   # more tiles than blocks: one slice, several waves
    monkeypatch.setenv("CUDAPERF_CUDA_LAYER_TILING", "12:64,16:64,3:128,40:128")
    assert cm.layer_tiling(1536, 2048, 1536, 8960) == ((12, 64), (16, 64), (3, 128), (40, 128))
    monkeypatch.setenv("CUDAPERF_CUDA_LAYER_TILING", "12:64,16")
    with pytest.raises(ValueError, match="four split:cols pairs"):
        cm.layer_tiling(1536, 2048, 1536, 8960)
    monkeypatch.delenv("CUDAPERF_CUDA_LAYER_TILING")
    monkeypatch.setenv("CUDAPERF_CUDA_LAYER_BLOCKS", "0")
    with pytest.raises(ValueError, match="CUDAPERF_CUDA_LAYER_BLOCKS"):
        cm.layer_blocks_per_sm()
    monkeypatch.delenv("CUDAPERF_CUDA_LAYER_BLOCKS")
    t = cm.layer_tiling(1536, 2048, 1536, 8960, grid=396)
    assert cm.layer_supported(1536, 12, 2, 128, 8960, 4096, 128, t, 4)
    assert not cm.layer_supported(1536, 12, 5, 128, 8960, 4096, 128, t, 4)       # heads not a multiple of KV heads
    assert not cm.layer_supported(1536, 34, 2, 128, 8960, 4096, 128, t, 4)       # 17 query heads per KV head
    assert not cm.layer_supported(1536, 12, 2, 96, 8960, 4096, 128, t, 4)        # head dim not a power of two
    assert not cm.layer_supported(1536, 12, 2, 128, 8960, 1 << 20, 128, t, 4)    # attention split too long
    assert not cm.layer_supported(1536, 12, 2, 128, 8960, 4096, 128, ((7, 64),) + t[1:], 4)   # 7 does not divide K
    if jax.default_backend() == "cpu":
        from cudaperf_jax.models import decode_fused as df
        with pytest.raises(RuntimeError, match="NVIDIA GPU only"):
            z = jnp.zeros
            cm.layer(z(256, jnp.bfloat16), z(2), attn_scale=z(256), mlp_scale=z(256), w_qkv=z((256, 320), jnp.bfloat16),
                     b_qkv=None, q_norm=None, k_norm=None, cos=z(32), sin=z(32), kv_mask=z(40, jnp.int32),
                     cache_index=0, k_cache=z((1, 2, 40, 32), jnp.bfloat16), v_cache=z((1, 2, 40, 32), jnp.bfloat16),
                     w_o=z((192, 256), jnp.bfloat16), b_o=None, w_gu=z((256, 640), jnp.bfloat16), b_gu=None,
                     w_down=z((320, 256), jnp.bfloat16), b_down=None, heads=6, chunk=128, eps_attn=1e-6,
                     eps_mlp=1e-6, eps_qk=1e-6, tiling=((2, 64), (3, 64), (2, 128), (5, 128)), attn_splits=3)
        assert df._cuda_layer(None, jnp.bfloat16, z((1, 2, 40, 32), jnp.bfloat16)) is None


def test_the_pdl_layer_launch_options_and_its_shape_checks(monkeypatch):
    """CUDAPERF_CUDA_LAYER=kernels|step: attention splits raised until a split's slots fit shared memory, the shapes
    the seven-kernel launch takes, CUDAPERF_CUDA_PDL, and cuda_matvec.step's argument checks (before any GPU work)."""
    for mode in ("kernels", "step"):
        monkeypatch.setenv("CUDAPERF_CUDA_LAYER", mode)
        assert cm.layer_mode() == mode
    assert cm.kernels_attn_splits(384) == cm.KERNELS_ATTN_SPLITS  # the default splits already fit 128 slots
    assert cm.kernels_attn_splits(4096) == 4096 // cm.ATTEND_MAX_SLOTS
    monkeypatch.setenv("CUDAPERF_CUDA_LAYER_ATTN_SPLITS", "16")
    assert cm.kernels_attn_splits(384) == 16
    monkeypatch.delenv("CUDAPERF_CUDA_LAYER_ATTN_SPLITS")
    assert cm.layer_kernels_supported(1536, 12, 2, 128, 8960, 384, 128)           # Qwen2.5-1.5B
    assert cm.layer_kernels_supported(1536, 12, 2, 128, 8960, 32768, 128)         # long caches: more splits
    assert not cm.layer_kernels_supported(1536, 12, 2, 128, 8960, 384, 64)       # the finish kernel's chunk is 128
    assert not cm.layer_kernels_supported(1536, 12, 2, 96, 8960, 384, 128)       # head dim not a power of two
    assert not cm.layer_kernels_supported(1536, 12, 5, 128, 8960, 384, 128)      # heads not a multiple of KV heads
    assert cm.pdl_flags() == 3                                                    # late
    monkeypatch.setenv("CUDAPERF_CUDA_ATTEND_EARLY", "on")
    assert cm.pdl_flags() == 3 | cm.PDL_EARLY_KV
    monkeypatch.setenv("CUDAPERF_CUDA_PDL", "off")
    assert cm.pdl_flags() == 0                                                    # early loads only in PDL chains
    monkeypatch.setenv("CUDAPERF_CUDA_ATTEND_EARLY", "sometimes")
    with pytest.raises(ValueError, match="ATTEND_EARLY"):
        cm.attend_early()
    monkeypatch.delenv("CUDAPERF_CUDA_ATTEND_EARLY")
    monkeypatch.delenv("CUDAPERF_CUDA_PDL")
    assert [cm.attend_head_groups(g) for g in (1, 2, 3, 4, 6, 8, 12)] == [1, 1, 1, 4, 6, 8, 12]   # auto
    monkeypatch.setenv("CUDAPERF_CUDA_ATTEND_HEAD_GROUPS", "3")
    assert cm.attend_head_groups(6) == 3
    assert cm.attend_head_groups(4) == 1                                          # not dividing g: one group
    monkeypatch.setenv("CUDAPERF_CUDA_ATTEND_HEAD_GROUPS", "0")
    with pytest.raises(ValueError, match="ATTEND_HEAD_GROUPS"):
        cm.attend_head_groups(6)
    monkeypatch.delenv("CUDAPERF_CUDA_ATTEND_HEAD_GROUPS")
    monkeypatch.setenv("CUDAPERF_CUDA_PDL", "on")
    assert cm.pdl_flags() == 1
    monkeypatch.setenv("CUDAPERF_CUDA_PDL", "off")
    assert cm.pdl_flags() == 0
    assert cm.fold_finish(16, 40) and not cm.fold_finish(1, 40)                    # on by default; needs split o, down
    monkeypatch.setenv("CUDAPERF_CUDA_FOLD_FINISH", "off")
    assert not cm.fold_finish(16, 40)
    assert cm.one_kernel_mlp() and cm.mlp_kernel_code() == 6                       # on by default, as `gm768`
    monkeypatch.setenv("CUDAPERF_CUDA_MLP", "off")
    assert not cm.one_kernel_mlp() and cm.mlp_kernel_code() == 0
    for value, code in (("on", 1), ("rotate", 2), ("lean", 3), ("gm", 4), ("gm_lean", 5), ("gm768", 6)):
        monkeypatch.setenv("CUDAPERF_CUDA_MLP", value)
        assert cm.one_kernel_mlp() and cm.mlp_kernel_code() == code
    assert cm.qkv_fixed()                                                          # on by default
    monkeypatch.setenv("CUDAPERF_CUDA_QKV_FIXED", "off")
    assert not cm.qkv_fixed()
    monkeypatch.setenv("CUDAPERF_CUDA_QKV_FIXED", "yes")
    with pytest.raises(ValueError, match="CUDAPERF_CUDA_QKV_FIXED"):
        cm.qkv_fixed()
    monkeypatch.delenv("CUDAPERF_CUDA_QKV_FIXED")
    monkeypatch.setenv("CUDAPERF_CUDA_MLP", "512")
    with pytest.raises(ValueError, match="CUDAPERF_CUDA_MLP"):
        cm.one_kernel_mlp()
    monkeypatch.delenv("CUDAPERF_CUDA_MLP")
    monkeypatch.setenv("CUDAPERF_CUDA_FOLD_FINISH", "yes")
    with pytest.raises(ValueError, match="FOLD_FINISH"):
        cm.fold_finish(16, 40)
    monkeypatch.delenv("CUDAPERF_CUDA_FOLD_FINISH")
    kw = {"cos": None, "sin": None, "kv_mask": None, "cache_index": 0, "heads": 12, "chunk": 128, "eps_attn": 1e-6,
          "eps_mlp": 1e-6, "eps_qk": 1e-6}
    with pytest.raises(ValueError, match="at least one layer"):
        cm.step(None, None, [], **kw)
    layer = {k: None for k in cm.LAYER_KEYS}
    with pytest.raises(ValueError, match="same optional parameters"):
        cm.step(None, None, [dict(layer, b_qkv=1), layer], **kw)


def test_the_group_major_gate_up_layout_and_its_preparation_outside_the_decode_loop(monkeypatch):
    """CUDAPERF_CUDA_MLP=gm: mlp_gm_layout puts gate and up columns 8q..8q+7 of every row into group q's contiguous
    [D, 16] block; decode_fused.prepared builds it for each layer while active (the sampler's decode loop) and drops it
    after; the step launch's gate_up is then that value (else [D, 2F]: not prepared, the step runs `lean`)."""
    from flax import nnx

    from cudaperf_jax.models import decode_fused as df
    from cudaperf_jax.models.config import ModelConfig
    from cudaperf_jax.models.decoder import Decoder
    d, f = 16, 24
    w = np.arange(d * 2 * f, dtype=np.float32).reshape(d, 2, f)
    gm = cm.mlp_gm_layout(w)
    assert gm.shape == (f // 8, d, 16)
    for q, r, j in ((0, 0, 0), (1, 5, 3), (2, 15, 7)):
        assert gm[q, r, j] == w[r, 0, 8 * q + j] and gm[q, r, 8 + j] == w[r, 1, 8 * q + j]
    np.testing.assert_array_equal(cm.mlp_gm_layout(w.reshape(d, 2 * f)), gm)
    np.testing.assert_array_equal(cm.mlp_row_major(gm), w.reshape(d, 2 * f))   # the inverse
    np.testing.assert_array_equal(np.asarray(cm.mlp_gm_layout(jnp.asarray(w))), gm)
    cfg = ModelConfig(vocab_size=64, hidden_size=d, intermediate_size=f, num_layers=2, num_heads=2, num_kv_heads=1,
                      head_dim=8)
    model = Decoder(cfg, rngs=nnx.Rngs(0))
    mlp = model.layers[1].mlp
    monkeypatch.setenv("CUDAPERF_CUDA_MLP", "lean")
    with df.prepared(model):
        assert not df._PREPARED
        assert df._gate_up(model, mlp, jnp.float32).shape == (d, 2 * f)
    monkeypatch.setenv("CUDAPERF_CUDA_MLP", "gm")
    with df.prepared(model):
        assert len(df._PREPARED) == 2
        assert df._gate_up(model, mlp, jnp.float32) is df._PREPARED[id(mlp)]
        np.testing.assert_array_equal(np.asarray(df._PREPARED[id(mlp)]),
                                      cm.mlp_gm_layout(np.asarray(mlp.gate_up[...], np.float32)))
    assert not df._PREPARED
    assert df._gate_up(model, mlp, jnp.float32).shape == (d, 2 * f)        # not prepared: row-major
    layouts = df.step_layouts(model)   # computed once by the caller (the sampler), then given to every decode program
    assert len(layouts) == 2 and layouts[1].shape == (f // 8, d, 16)
    with df.prepared(model, layouts):
        assert df._gate_up(model, mlp, jnp.float32) is layouts[1]
    assert not df._PREPARED
    assert not df.step_layouts_apply(cfg, jnp.float32, 1, (1, 1, 16, 8), jnp.float32)   # no step launch (CPU, f32)
    monkeypatch.setenv("CUDAPERF_CUDA_FOLD_FINISH", "off")                 # no one-kernel MLP: nothing to prepare
    with df.prepared(model):
        assert not df._PREPARED
    assert df.step_layouts(model) == ()


def test_the_l2_prefetch_setting_is_parsed_and_checked(monkeypatch):
    monkeypatch.setenv("CUDAPERF_CUDA_L2_PREFETCH", "off")
    assert cm.l2_prefetch() == (0, 0, 0, 0)
    monkeypatch.setenv("CUDAPERF_CUDA_L2_PREFETCH", "gu=40, o=100,down=10,from=qkv")
    assert cm.l2_prefetch() == (40, 1, 100, 10)
    monkeypatch.setenv("CUDAPERF_CUDA_L2_PREFETCH", "gu=35+down=5")
    assert cm.l2_prefetch() == (35, 0, 0, 5)
    monkeypatch.setenv("CUDAPERF_CUDA_L2_PREFETCH", "kv")
    assert cm.l2_prefetch() == (0, 2, 0, 0)
    monkeypatch.setenv("CUDAPERF_CUDA_L2_PREFETCH", "from=qkv,kv=early,gu=5")
    assert cm.l2_prefetch() == (5, 5, 0, 0)
    for bad in ("gu=140", "gu=-1", "up=10", "from=down", "gu", "kv=late"):
        monkeypatch.setenv("CUDAPERF_CUDA_L2_PREFETCH", bad)
        with pytest.raises(ValueError, match="CUDAPERF_CUDA_L2_PREFETCH"):
            cm.l2_prefetch()
