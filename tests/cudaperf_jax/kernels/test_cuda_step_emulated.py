"""The CUDA decode path end to end on the CPU: cuda/matvec.cu itself - its XLA FFI handlers and bindings, the step
launch's host code (StepImpl, layer_params, layer_kernels, launch_mlp) and the kernels - built for the CPU emulation
(kernels_harness.emulation) and registered as JAX's CPU FFI targets, so that the decoder's `path="cuda"` runs as on a
GPU: Decoder.kernel_layouts, the arguments cuda_step.step and cuda_ffi pass, the handlers' decoding of them. Against
XLA's bf16 decode. (PDL and streams do nothing in the emulation; test_kernels_gpu.py runs the same on a GPU.)"""
import os
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax.experimental import pallas as pl

from cudaperf_jax.kernels import DecodeKernels, cuda_build, cuda_ffi, cuda_step
from cudaperf_jax.kernels.config import tilings
from cudaperf_jax.models.config import ModelConfig
from cudaperf_jax.models.decoder import Decoder
from kernels_harness.emulation import EmulatedLibrary, build_shared_library
from tests.cudaperf_jax.models import tiny

# What the emulation lacks, given around matvec.cu: a stream context that needs no GPU runtime, the launch
# configuration type, and cudaLaunchKernelEx as an ordinary launch (the PDL attribute ignored).
SHIM = r'''
#include "xla/ffi/api/ffi.h"
namespace xla { namespace ffi {
struct EmuStream {};
template <> struct CtxDecoding<EmuStream> {
  using Type = cudaStream_t;
  static std::optional<Type> Decode(const XLA_FFI_Api*, XLA_FFI_ExecutionContext*, DiagnosticEngine&) {
    return static_cast<cudaStream_t>(nullptr);
  }
};
}}
enum cudaLaunchAttributeID { cudaLaunchAttributeProgrammaticStreamSerialization = 5 };
struct cudaLaunchAttributeValue { int programmaticStreamSerializationAllowed; };
struct cudaLaunchAttribute { cudaLaunchAttributeID id; cudaLaunchAttributeValue val; };
struct cudaLaunchConfig_t { dim3 grid_dim; dim3 block_dim; size_t dynamicSmemBytes; cudaStream_t stream;
                            cudaLaunchAttribute* attrs; unsigned int numAttrs; };
template <typename... KArgs, typename... Args>
cudaError_t emu_launch_ex(const cudaLaunchConfig_t* cfg, void (*kernel)(KArgs...), Args... args) {
  kernel<<<cfg->grid_dim, cfg->block_dim, cfg->dynamicSmemBytes>>>(args...);
  return cudaGetLastError();
}
'''


def emulated_source() -> str:
    """matvec.cu with its headers inlined (each once) and the shim in place of the FFI include."""
    seen = set()

    def inline(text):
        def rep(m):
            if m.group(1) in seen:
                return ""
            seen.add(m.group(1))
            return inline((cuda_build.SOURCE.parent / m.group(1)).read_text().replace("#pragma once", ""))
        return re.sub(r'#include "([a-z_]+\.cuh)"', rep, text)
    src = inline(cuda_build.SOURCE.read_text())
    assert src.count('#include "xla/ffi/api/ffi.h"') == 1 and "cudaLaunchKernelEx(" in src
    src = src.replace('#include "xla/ffi/api/ffi.h"', SHIM).replace("cudaLaunchKernelEx(", "emu_launch_ex(")
    src = src.replace("cfg.gridDim", "cfg.grid_dim").replace("cfg.blockDim", "cfg.block_dim")
    return src.replace("ffi::PlatformStream<cudaStream_t>", "ffi::EmuStream")


_REGISTERED = {}


@pytest.fixture(scope="module")
def emulated_targets(tmp_path_factory):
    """The emulated library with every cuda_build.TARGETS handler registered for JAX's CPU platform (once a
    process: JAX keeps registrations)."""
    if "lib" not in _REGISTERED:
        old = os.environ.get("CPATH")
        os.environ["CPATH"] = jax.ffi.include_dir() + (":" + old if old else "")
        try:
            res = build_shared_library(emulated_source(), tmp_path_factory.mktemp("step") / "matvec.so", checks=False,
                                       timeout_s=600)
        finally:
            if old is None:
                os.environ.pop("CPATH")
            else:
                os.environ["CPATH"] = old
        assert res.ok, res.log[:3000]
        lib = EmulatedLibrary(res.path)
        for name, symbol in cuda_build.TARGETS.values():
            jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(getattr(lib._lib, symbol)), platform="cpu")
        _REGISTERED["lib"] = lib
    return _REGISTERED["lib"]


@pytest.fixture
def cuda_on_cpu(emulated_targets, monkeypatch):
    """path cuda on the CPU: the FFI calls go to the emulated handlers, the Pallas kernels around them (finish, the
    final norm, the LM head; the attention of the separate-calls path) run in Pallas' interpreter. Returns the list
    of cuda_step.step calls made."""
    monkeypatch.setattr(cuda_step, "require_gpu", lambda: None)
    monkeypatch.setattr(cuda_ffi, "require_gpu", lambda: None)
    pallas_call = pl.pallas_call

    def interpreted(*a, **k):
        k["interpret"] = True
        return pallas_call(*a, **k)
    monkeypatch.setattr(pl, "pallas_call", interpreted)
    calls = []
    step = cuda_step.step

    def counted(*a, **k):
        calls.append(len(a[2]))
        return step(*a, **k)
    monkeypatch.setattr(cuda_step, "step", counted)
    yield calls
    assert emulated_targets.last_error() == ""


CUDA = DecodeKernels(path="cuda")
TOKS = jnp.asarray([[5, 17, 3, 60, 11, 400]], jnp.int32)
CONFIGS = {   # hidden 1024: the step launch; 512: the separate CUDA matvec calls
    "qwen3": {"model_type": "qwen3", "hidden_size": 1024, "intermediate_size": 1024, "num_heads": 8,
              "num_kv_heads": 2, "head_dim": 128, "qk_norm": True},
    "qwen2": {"model_type": "qwen2", "hidden_size": 1024, "intermediate_size": 2048, "num_heads": 12,
              "num_kv_heads": 2, "head_dim": 64, "qkv_bias": True, "tie_word_embeddings": True},
    "llama": {"model_type": "llama", "hidden_size": 512, "intermediate_size": 1024, "num_heads": 8,
              "num_kv_heads": 2, "head_dim": 64, "tie_word_embeddings": True},
}


def _model(name):
    cfg = ModelConfig(vocab_size=512, num_layers=2, **CONFIGS[name])
    model = Decoder(cfg, rngs=nnx.Rngs(0), dtype=jnp.bfloat16, param_dtype=jnp.bfloat16)
    leaves, tdef = jax.tree.flatten(nnx.state(model))
    keys = jax.random.split(jax.random.key(1), len(leaves))
    nnx.update(model, jax.tree.unflatten(tdef, [x + 0.05 * jax.random.normal(k, x.shape, x.dtype)
                                                for x, k in zip(leaves, keys)]))
    return model


def _agree_up_to_near_ties(got, want, frac):
    """got's greedy pick at every position is want's, or within frac * max|want| of want's largest logit there."""
    picked = np.take_along_axis(want, got.argmax(-1)[..., None], -1)[..., 0]
    gap = want.max(-1) - picked
    assert (gap <= frac * np.abs(want).max()).all(), (got.argmax(-1), want.argmax(-1), gap)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_the_cuda_path_through_the_emulated_handlers_agrees_with_xla(cuda_on_cpu, name):
    model = _model(name)
    c = model.cfg
    whole = cuda_step.supported(c.hidden_size, c.num_heads, c.num_kv_heads, c.head_dim, c.intermediate_size, 16,
                                tilings())
    assert whole == (c.hidden_size >= cuda_step.STEP_MIN_D)
    layouts = model.kernel_layouts(CUDA, 1, (1, c.num_kv_heads, 16, c.head_dim), jnp.bfloat16)
    assert len(layouts) == (c.num_layers if whole else 0)   # the step launch's group-major gate_up
    want = tiny.stepwise_logits(model, TOKS, 16, jnp.bfloat16)
    got = tiny.stepwise_logits(model, TOKS, 16, jnp.bfloat16, kernels=CUDA)
    assert cuda_on_cpu == ([c.num_layers] if whole else [])   # one trace, every layer in one step launch
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, want, rtol=0, atol=0.05 * float(np.abs(want).max()))
    _agree_up_to_near_ties(got[0], want[0], 0.03)
    if whole:   # fixed-point sums: the same logits whatever order the emulation's threads add them in
        np.testing.assert_array_equal(tiny.stepwise_logits(model, TOKS, 16, jnp.bfloat16, kernels=CUDA), got)
