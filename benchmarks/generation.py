"""Generation throughput: the JAX sampler against transformers' `generate` on the same GPU.

    OUT=out python benchmarks/generation.py --gguf=PATH/SmolLM2-135M-Instruct.Q4_1.gguf
    python benchmarks/generation.py --models=tiny --batches=1,2 --new_tokens=4 --hf_new_tokens=4   # CPU smoke

Models: SmolLM2-135M-Instruct (weights from the GGUF, dequantised, run in bf16; transformers loads the same
weights from an HF directory this script exports) and a randomly initialised Qwen2.5-1.5B-shaped model.
For each batch size: random prompts of --prompt_len tokens, --new_tokens sampled tokens (temperature 1,
top-k 50, top-p 0.9, no stop tokens) for JAX; transformers generates --hf_new_tokens tokens (fewer, to fit
the time budget; its per-token cost barely depends on the length at these sizes) with the same sampling
(do_sample, top_k=50, top_p=0.9, min_new_tokens = max_new_tokens). Reported: prefill tokens/s, decode
tokens/s, end-to-end new tokens/s (prefill included; the number comparable to `generate`), speedup, and
for batch-1 decode of the 1.5B model the fraction of HBM bandwidth (bytes of weights + KV cache read per
step over step time) against the datasheet (4.8 TB/s on an H200, 3.35 TB/s on an H100 SXM) and the measured copy bandwidth.
Each measurement is independent: a failure is recorded and the rest still runs. Prints a table last and
writes $OUT/generation.json and $OUT/generation.png.
"""
from __future__ import annotations

import time

_T0 = time.perf_counter()  # the time budget counts from process start (imports included)

import argparse
import gc
import json
import os
import sys
import tempfile
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# JAX and PyTorch share the GPU in this process: JAX takes 60% of its memory instead of 75%.
os.environ.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.6")

import jax
import jax.numpy as jnp
import numpy as np

HBM_DATASHEETS = {"H200": 4.8e12, "H100": 3.35e12}  # HBM3e / HBM3 of the SXM parts, bytes/s


def hbm_datasheet() -> float:
    """The datasheet HBM bandwidth of JAX's first device (H200 or H100 SXM; the H200's when unknown)."""
    kind = jax.devices()[0].device_kind.upper()
    return next((v for k, v in HBM_DATASHEETS.items() if k in kind), HBM_DATASHEETS["H200"])


ISSUE_HF_REFERENCE = {1: 11.0, 32: 340.0, 128: 1300.0}  # transformers, SmolLM2-135M, bf16, 256 tokens (issue 7)

QWEN15B = {"model_type": "qwen2", "vocab_size": 151936, "hidden_size": 1536, "intermediate_size": 8960, "num_hidden_layers": 28,
               "num_attention_heads": 12, "num_key_value_heads": 2, "head_dim": 128, "max_position_embeddings": 32768,
               "rope_theta": 1000000.0, "rms_norm_eps": 1e-6, "tie_word_embeddings": True, "bos_token_id": 151643,
               "eos_token_id": 151645, "pad_token_id": 151643, "use_sliding_window": False}
SMOL = {"model_type": "llama", "vocab_size": 49152, "hidden_size": 576, "intermediate_size": 1536, "num_hidden_layers": 30,
            "num_attention_heads": 9, "num_key_value_heads": 3, "head_dim": 64, "max_position_embeddings": 8192,
            "rope_theta": 100000.0, "rms_norm_eps": 1e-5, "tie_word_embeddings": True, "bos_token_id": 1, "eos_token_id": 2,
            "pad_token_id": 2}
TINY = {"model_type": "llama", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
            "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "max_position_embeddings": 1024,
            "rope_theta": 10000.0, "rms_norm_eps": 1e-5, "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2,
            "pad_token_id": 0}


def kernels_from_spec(spec: str):
    """A DecodeKernels from 'field=value,field=value' (unroll an integer, interpret true/false; '' the default)."""
    import dataclasses

    from cudaperf_jax.kernels import DecodeKernels
    types = {f.name: f.type for f in dataclasses.fields(DecodeKernels)}
    fields = {}
    for kv in filter(None, spec.split(",")):
        key, eq, val = kv.partition("=")
        if not eq or key not in types:
            raise ValueError(f"decode kernels {kv!r}: write field=value with a field of DecodeKernels: {sorted(types)}")
        fields[key] = int(val) if key == "unroll" else val.lower() in ("1", "true", "yes") if key == "interpret" else val
    return DecodeKernels(**fields)


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


MODEL_SPECS = {"smollm2-135m": SMOL, "qwen2.5-1.5b-random": QWEN15B, "tiny": TINY}


def random_model(name, dtype=None):
    """A randomly initialised Decoder of a benchmark shape (MODEL_SPECS); dtype defaults to bf16 on a GPU
    and float32 elsewhere."""
    from flax import nnx

    from cudaperf_jax.models.config import ModelConfig
    from cudaperf_jax.models.decoder import Decoder
    dtype = dtype or (jnp.bfloat16 if jax.default_backend() == "gpu" else jnp.float32)
    return Decoder(ModelConfig.from_hf(MODEL_SPECS[name]), rngs=nnx.Rngs(0), dtype=dtype, param_dtype=dtype)


def build_jax_model(name, args, dtype):
    """(Decoder, source note) for a model name."""
    from cudaperf_jax.models.loading import load_policy
    if name == "smollm2-135m" and args.gguf:
        try:
            model, _ = load_policy(args.gguf, dtype=dtype, tokenizer=False)
            return model, f"GGUF {Path(args.gguf).name} (dequantised)"
        except Exception as e:  # noqa: BLE001  (gguf missing or file unreadable: same shape, random weights)
            log(f"could not load {args.gguf} ({type(e).__name__}: {e}); using random SmolLM2-shaped weights")
    return random_model(name, {"bfloat16": jnp.bfloat16, "float32": jnp.float32}[dtype]), "random init"


def param_bytes(model):
    from flax import nnx
    return sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(nnx.state(model, nnx.Param)))


def bench_jax(model, batch, args):
    from cudaperf_jax.generation.sampler import Sampler, SamplingParams
    cfg = model.cfg
    sampler = Sampler(model, prompt_bucket=args.prompt_len, pad_id=0, kernels=kernels_from_spec(args.kernels))
    rng = np.random.RandomState(batch)
    toks = rng.randint(3, cfg.vocab_size, (batch, args.prompt_len)).astype(np.int32)
    mask = np.ones_like(toks, bool)
    params = (SamplingParams(max_new_tokens=args.new_tokens, temperature=0.0, stop_token_ids=()) if args.greedy else
              SamplingParams(max_new_tokens=args.new_tokens, temperature=1.0, top_p=0.9, top_k=50, stop_token_ids=()))
    keys = jax.random.split(jax.random.PRNGKey(0), batch)
    t0 = time.perf_counter()
    jax.block_until_ready(sampler.generate_tokens(toks, mask, params, keys))
    compile_s = time.perf_counter() - t0
    runs = []
    for r in range(args.repeats):
        tm = {}
        out = sampler.generate_tokens(toks, mask, params, jax.random.split(jax.random.PRNGKey(r + 1), batch), tm)
        lengths = np.asarray(out[2])
        runs.append(tm)
    best = min(runs, key=lambda t: t["prefill_s"] + t["decode_s"])
    n_prompt, n_new = batch * args.prompt_len, batch * args.new_tokens
    step_s = best["decode_s"] / max(args.new_tokens - 1, 1)
    res = {"batch": batch, "prompt_len": args.prompt_len, "new_tokens": args.new_tokens, "compile_s": compile_s,
               "prefill_s": best["prefill_s"], "decode_s": best["decode_s"], "decode_step_ms": 1e3 * step_s,
               "prefill_tok_s": n_prompt / best["prefill_s"],
               "decode_tok_s": batch * (args.new_tokens - 1) / best["decode_s"],
               "new_tok_s": n_new / (best["prefill_s"] + best["decode_s"]), "all_full_length": bool((lengths == args.new_tokens).all()),
               "kernels": sampler.kernels.resolve(batch).to_dict()}   # what ran (after a fallback: xla)
    if batch == 1:
        slots = args.prompt_len + args.new_tokens
        kv = 2 * cfg.num_layers * slots * cfg.num_kv_heads * cfg.head_dim * jnp.dtype(model.dtype).itemsize
        res["bytes_per_step"] = param_bytes(model) + kv
        res["hbm_tb_s"] = res["bytes_per_step"] / step_s / 1e12
    del sampler
    gc.collect()
    return res


def hf_model_for(name, model, export_dir, device, torch_dtype):
    """The transformers model: the same weights (exported), except random init of the same shape for the 1.5B."""
    import torch
    import transformers as tf

    from cudaperf_jax.models.hf_io import save_hf_dir
    if name != "qwen2.5-1.5b-random":  # the same weights, exported (cheap below ~0.5B parameters)
        save_hf_dir(model, export_dir, dtype="bfloat16" if torch_dtype == torch.bfloat16 else "float32")
        m = tf.AutoModelForCausalLM.from_pretrained(str(export_dir), dtype=torch_dtype)
        return m.to(device).eval()
    hf_cfg = tf.AutoConfig.for_model(**model.cfg.to_hf())
    with torch.device(device):
        m = tf.AutoModelForCausalLM.from_config(hf_cfg, dtype=torch_dtype)
    return m.to(device).eval()


def bench_hf(hf, batch, args, device, vocab):
    import torch
    rng = np.random.RandomState(batch)
    ids = torch.tensor(rng.randint(3, vocab, (batch, args.prompt_len)), device=device)
    att = torch.ones_like(ids)
    kw = {"do_sample": True, "top_k": 50, "top_p": 0.9, "temperature": 1.0, "pad_token_id": 0}
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    with torch.no_grad():
        hf.generate(ids, attention_mask=att, max_new_tokens=4, min_new_tokens=4, **kw)
        sync()
        t0 = time.perf_counter()
        try:  # last-position logits only, as generate's own prefill does
            hf(ids, attention_mask=att, use_cache=True, logits_to_keep=1)
        except TypeError:
            hf(ids, attention_mask=att, use_cache=True)
        sync()
        prefill_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        out = hf.generate(ids, attention_mask=att, max_new_tokens=args.hf_new_tokens,
                          min_new_tokens=args.hf_new_tokens, **kw)
        sync()
        total = time.perf_counter() - t0
    n_new = out.shape[1] - args.prompt_len
    return {"batch": batch, "prompt_len": args.prompt_len, "new_tokens": int(n_new), "prefill_s": prefill_s, "total_s": total,
                "prefill_tok_s": batch * args.prompt_len / prefill_s, "new_tok_s": batch * n_new / total}


def greedy_check(model, hf, args, device):
    """Leading greedy tokens on which the JAX sampler and transformers agree (batch 1, same weights)."""
    import torch

    from cudaperf_jax.generation.sampler import Sampler, SamplingParams
    n = args.greedy_check_tokens
    prompt = np.random.RandomState(123).randint(3, model.cfg.vocab_size, (1, 16)).astype(np.int32)
    out = Sampler(model, prompt_bucket=16, pad_id=0).generate(
        [prompt[0].tolist()], SamplingParams(max_new_tokens=n, temperature=0))  # stops at eos, as transformers does
    with torch.no_grad():
        ref = hf.generate(torch.tensor(prompt, device=device), attention_mask=torch.ones_like(torch.tensor(prompt, device=device)),
                          do_sample=False, max_new_tokens=n, pad_token_id=0)[0, 16:].tolist()
    got = out.tokens[0, : out.lengths[0]].tolist()
    m = min(len(got), len(ref))
    agree = next((i for i in range(m) if got[i] != ref[i]), m)
    return {"tokens": n, "jax_len": len(got), "leading_agreement": agree, "dtype": str(model.dtype.__name__ if hasattr(model.dtype, "__name__") else model.dtype)}


def weight_stream_tb_s(model, reps=5):
    """TB/s of a jitted chain of batch-1 matvecs over every matrix of the model (no attention, no sampling):
    the bandwidth XLA reaches on these very weights, an upper bound for batch-1 decode."""
    from flax import nnx
    mats = [x for x in jax.tree.leaves(nnx.state(model, nnx.Param)) if x.ndim >= 2]
    nbytes = sum(m.size * m.dtype.itemsize for m in mats)

    @jax.jit
    def chain(ms):
        acc = jnp.float32(0)
        for w in ms:
            w2 = w.reshape(w.shape[0], -1)
            v = jnp.ones((1, w2.shape[0]), w.dtype) * (1 + acc * 1e-30).astype(w.dtype)
            acc = acc + jnp.sum((v @ w2).astype(jnp.float32))
        return acc

    chain(mats).block_until_ready()
    t0 = time.perf_counter()
    for _ in range(reps):
        out = chain(mats)
    out.block_until_ready()
    return nbytes * reps / (time.perf_counter() - t0) / 1e12


def measured_copy_bandwidth():
    """Bytes/s of a device-to-device copy (read + written), measured with CUDA events through CuPy.

    The same measurement as the roofline peaks (kernels_harness.features.peaks); an earlier version timed
    a jitted JAX `a * 2` with host clocks and reported 0.49 TB/s on an H200 whose copy runs at 4.2 TB/s.
    """
    from kernels_harness.features.peaks import measure_copy_bandwidth
    return measure_copy_bandwidth() * 1e9


def plot(results, out_dir):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    names = list(results["models"])
    fig, axes = plt.subplots(1, len(names), figsize=(5 * len(names), 4), squeeze=False)
    for ax, name in zip(axes[0], names):
        r = results["models"][name]
        bs = [x["batch"] for x in r.get("jax", []) if "error" not in x]
        ax.plot(bs, [x["new_tok_s"] for x in r["jax"] if "error" not in x], "o-", label="JAX sampler")
        hb = [x for x in r.get("hf", []) if "error" not in x]
        if not bs and not hb:
            ax.set_title(f"{name}: no data")
            continue
        ax.plot([x["batch"] for x in hb], [x["new_tok_s"] for x in hb], "s-", label="transformers generate")
        ax.set(xscale="log", yscale="log", xlabel="batch", ylabel="new tokens / s", title=name)
        ax.legend()
    fig.tight_layout()
    path = Path(out_dir) / "generation.png"
    fig.savefig(path, dpi=120)
    return str(path)


def table(results):
    rows = [(f"{'model':<22}{'B':>5}{'JAX prefill':>13}{'JAX decode':>12}{'JAX e2e':>10}{'HF e2e':>10}"
            f"{'speedup':>9}{'step ms':>9}")]
    for name, r in results["models"].items():
        hf = {x["batch"]: x for x in r.get("hf", []) if "error" not in x}
        for x in r.get("jax", []):
            if "error" in x:
                rows.append(f"{name:<22}{x['batch']:>5}  JAX not measured: {x['error'][:60]}")
                continue
            h = hf.get(x["batch"])
            sp = f"{x['new_tok_s'] / h['new_tok_s']:.1f}x" if h else "-"
            rows.append(f"{name:<22}{x['batch']:>5}{x['prefill_tok_s']:>13.0f}{x['decode_tok_s']:>12.0f}"
                        f"{x['new_tok_s']:>10.0f}{(h['new_tok_s'] if h else float('nan')):>10.1f}{sp:>9}"
                        f"{x['decode_step_ms']:>9.3f}")
        for x in r.get("hf", []):
            if "error" in x:
                rows.append(f"{name:<22}{x['batch']:>5}  HF not measured: {x['error'][:60]}")
    for name, r in results["models"].items():
        if "hbm_fraction_datasheet" in r:
            rows.append(f"{name} batch-1 decode: {r['hbm_tb_s']:.2f} TB/s = {r['hbm_fraction_datasheet']:.2f} of "
                        f"{hbm_datasheet() / 1e12:.2f} TB/s datasheet, {r.get('hbm_fraction_measured', float('nan')):.2f}"
                        f" of measured copy bandwidth; weights-only matvec chain "
                        f"{r.get('weight_stream_tb_s', float('nan')):.2f} TB/s")
    return "\n".join(rows)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gguf", default=os.environ.get("SMOLLM2_GGUF"), help="SmolLM2-135M-Instruct GGUF file")
    ap.add_argument("--models", default="smollm2-135m,qwen2.5-1.5b-random")
    ap.add_argument("--batches", default="1,32,128")
    ap.add_argument("--prompt_len", type=int, default=128)
    ap.add_argument("--new_tokens", type=int, default=256)
    ap.add_argument("--hf_new_tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--dtype", default=None, help="bfloat16 (default on GPU) or float32 (default on CPU)")
    ap.add_argument("--no_hf", action="store_true", help="skip transformers")
    ap.add_argument("--kernels", default="", help="decode kernels, field=value,... of DecodeKernels (default: auto)")
    ap.add_argument("--greedy", action="store_true", help="JAX decodes greedily (no top-k/top-p) to isolate sampling cost")
    ap.add_argument("--time_budget_s", type=float, default=300.0,
                    help="skip measurements that would start after this many seconds (recorded as skipped)")
    ap.add_argument("--greedy_check_tokens", type=int, default=32,
                    help="after the timings: greedy tokens of JAX vs transformers on SmolLM2, batch 1 (0 = off)")
    args = ap.parse_args(argv)
    if args.gguf is None and "smollm2-135m" in args.models:
        try:
            from cudaperf_jax.assets import default_model_path
            args.gguf = str(default_model_path())
        except Exception as e:  # noqa: BLE001
            log(f"no --gguf and no cached default model ({e}); SmolLM2 runs with random weights")
    out_dir = Path(os.environ.get("OUT", "out"))
    out_dir.mkdir(parents=True, exist_ok=True)
    backend = jax.default_backend()
    dtype = args.dtype or ("bfloat16" if backend == "gpu" else "float32")
    batches = [int(b) for b in args.batches.split(",")]
    results = {"backend": backend, "device": str(jax.devices()[0]), "dtype": dtype, "args": vars(args),
               "jax_version": jax.__version__, "issue_hf_reference_tok_s": ISSUE_HF_REFERENCE, "models": {}}
    try:
        import torch
        import transformers
        device = "cuda" if torch.cuda.is_available() else "cpu"
        results.update(torch_version=torch.__version__, transformers_version=transformers.__version__,
                       torch_device=torch.cuda.get_device_name(0) if device == "cuda" else "cpu")
        torch_dtype = torch.bfloat16 if dtype == "bfloat16" else torch.float32
    except ImportError as e:
        args.no_hf, device, torch_dtype = True, "cpu", None
        results["hf_skipped"] = f"torch/transformers missing: {e}"
    if backend == "gpu":
        try:
            results["measured_copy_tb_s"] = measured_copy_bandwidth() / 1e12
        except Exception as e:  # noqa: BLE001
            results["measured_copy_error"] = repr(e)
    t_start = _T0

    def over_budget(next_s=25.0):  # would a measurement of about next_s seconds end past the budget?
        return time.perf_counter() - t_start + next_s > args.time_budget_s

    def save():
        (out_dir / "generation.json").write_text(json.dumps(results, indent=2))

    for name in args.models.split(","):
        r = results["models"].setdefault(name, {"jax": [], "hf": []})
        log(f"{name}: building")
        try:
            model, source = build_jax_model(name, args, dtype)
            r.update(source=source, params_m=model.cfg.num_params / 1e6)
        except Exception as e:  # noqa: BLE001
            r["error"] = f"{type(e).__name__}: {e}"
            log(traceback.format_exc())
            continue
        for b in batches:
            if over_budget():
                r["jax"].append({"batch": b, "error": "skipped (time budget)"})
                continue
            log(f"{name}: JAX batch {b}")
            try:
                x = bench_jax(model, b, args)
                log(f"  prefill {x['prefill_tok_s']:.0f} tok/s, decode {x['decode_tok_s']:.0f} tok/s, "
                    f"step {x['decode_step_ms']:.3f} ms, compile {x['compile_s']:.1f} s")
                r["jax"].append(x)
                save()
                if b == 1 and "hbm_tb_s" in x:
                    if backend == "gpu":
                        try:
                            r["weight_stream_tb_s"] = weight_stream_tb_s(model)
                            log(f"  weights-only matvec chain: {r['weight_stream_tb_s']:.2f} TB/s")
                        except Exception as e:  # noqa: BLE001
                            r["weight_stream_error"] = f"{type(e).__name__}: {e}"
                    r["hbm_tb_s"] = x["hbm_tb_s"]
                    r["hbm_fraction_datasheet"] = x["hbm_tb_s"] * 1e12 / hbm_datasheet()
                    r["hbm_datasheet_tb_s"] = hbm_datasheet() / 1e12
                    if "measured_copy_tb_s" in results:
                        r["hbm_fraction_measured"] = x["hbm_tb_s"] / results["measured_copy_tb_s"]
            except Exception as e:  # noqa: BLE001
                r["jax"].append({"batch": b, "error": f"{type(e).__name__}: {e}"})
                log(traceback.format_exc())
        if not args.no_hf:
            hf = None
            try:
                with tempfile.TemporaryDirectory() as tmp:
                    hf = hf_model_for(name, model, Path(tmp) / "hf", device, torch_dtype)
                for b in batches:
                    if over_budget(15.0):
                        r["hf"].append({"batch": b, "error": "skipped (time budget)"})
                        continue
                    log(f"{name}: transformers batch {b}")
                    try:
                        x = bench_hf(hf, b, args, device, model.cfg.vocab_size)
                        log(f"  prefill {x['prefill_tok_s']:.0f} tok/s, generate {x['new_tok_s']:.1f} new tok/s")
                        r["hf"].append(x)
                        save()
                    except Exception as e:  # noqa: BLE001
                        r["hf"].append({"batch": b, "error": f"{type(e).__name__}: {e}"})
                        log(traceback.format_exc())
                if args.greedy_check_tokens and name != "qwen2.5-1.5b-random" and (
                        time.perf_counter() - t_start < 0.5 * args.time_budget_s):
                    try:
                        r["greedy_check"] = greedy_check(model, hf, args, device)
                        log(f"  greedy check: {r['greedy_check']}")
                    except Exception as e:  # noqa: BLE001
                        r["greedy_check"] = {"error": f"{type(e).__name__}: {e}"}
            except Exception as e:  # noqa: BLE001
                r["hf_error"] = f"{type(e).__name__}: {e}"
                log(traceback.format_exc())
            del hf
            if device == "cuda":
                import torch
                torch.cuda.empty_cache()
        hf_by_b = {x["batch"]: x for x in r["hf"] if "error" not in x}
        r["speedup"] = {str(x["batch"]): x["new_tok_s"] / hf_by_b[x["batch"]]["new_tok_s"]
                        for x in r["jax"] if "error" not in x and x["batch"] in hf_by_b}
        del model
        gc.collect()
        save()
    results["wall_s"] = time.perf_counter() - t_start
    try:
        results["plot"] = plot(results, out_dir)
    except Exception as e:  # noqa: BLE001
        results["plot"] = f"failed: {e}"
    (out_dir / "generation.json").write_text(json.dumps(results, indent=2))
    print(table(results), flush=True)
    return results


if __name__ == "__main__":
    main()
