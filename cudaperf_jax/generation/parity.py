"""Parity of our policy with transformers on one GGUF file: the logits of whole prompts and greedy continuations.

Both sides read the same file: ours through cudaperf_jax.models.loading.load_policy (the gguf package's
dequantisation, our Decoder in JAX), the reference through transformers' own GGUF loading
(`AutoModelForCausalLM.from_pretrained(dir, gguf_file=name)`, torch, float32). Each prompt is tokenised once (the
GGUF's tokenizer and chat template, as the Sampler does) and both models get the same ids, so only the decoders are
compared. Used by tests/cudaperf_jax/models/test_qwen_parity.py and benchmarks/parity.py.

    ref = load_reference(path, device="cpu")
    report = compare(model, tokenizer, ref)        # {"prompts": [...], "timings": {...}}
    failures = check(report, TOLERANCES["float32"])
"""
from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from cudaperf_jax.generation.sampler import Sampler, SamplingParams

TASK_FILE = Path(__file__).resolve().parents[2] / "data" / "kernelbench" / "tasks" / "level1_19_relu.json"


@dataclasses.dataclass(frozen=True)
class Tolerance:
    """What a parity run must meet, per prompt. With d_p = max over the vocabulary of |ours - ref| at position p and
    scale = max|ref| over the prompt: max_rel bounds max_p d_p / scale, median_rel bounds median_p d_p / scale;
    min_argmax_agree bounds the fraction of positions whose top token agrees; greedy: whether the greedy tokens must
    be equal (else they are reported)."""
    max_rel: float
    median_rel: float
    min_argmax_agree: float
    greedy: bool
    why: str


# Measured with benchmarks/parity.py's prompts on Qwen2.5-Coder-0.5B-Instruct Q4_K_M (prompts of 36, 53, 140 and
# 1,113 tokens; logit scale max|ref| 31.6 to 35.9), ours on XLA CPU against transformers on torch CPU (float32):
#   ours float32:  max_rel 2.7e-6 .. 3.9e-6 (max abs 9.0e-5 .. 1.4e-4), median_rel 5.3e-7 .. 7.4e-7; argmax
#                  agreement 1.0; the 64 greedy tokens equal on all four prompts (the short one stops at <|im_end|>)
#   ours bfloat16: max_rel 1.3e-2 .. 1.6e-2 on the three short prompts and 0.20 on the CUDA prompt, at position 10
#                  of its system message, where transformers' own bfloat16 run of the same file errs most too (0.12;
#                  elsewhere both stay under 0.7 abs, median 0.18-0.20 for both); median_rel 4.7e-3 .. 6.0e-3;
#                  argmax agreement 0.981 .. 1.0, every disagreement a near-tie (the reference's top-2 gap 0.034 or
#                  less); the 64 greedy tokens equal on all four prompts.
# float32: both sides compute in float32 from bit-identical dequantised weights (the gguf package's dequantisation on
# both), so only the order of float32 sums differs (XLA's and torch's matmuls, attention, norms); 5e-5 is about 13x
# the measured worst, room for the GPUs' other summation orders and the 1.5B's larger widths, while structural
# mistakes (a missing q/k/v bias, a wrong rope base, the tied embedding instead of the file's separate output matrix,
# whose weights differ by up to 8e-3) move logits by orders of magnitude more.
# bfloat16: rounding to 8 significant bits in every layer; the bounds are 1.5x (max) and 1.7x (median) the measured
# worst; a near-tie may flip (argmax agreement 0.95: measured 0.981, and one flip in a 36-token prompt is 0.972), and
# greedy continuations may part once one does, so they are reported, not required.
# float32_default (JAX's default matmul precision: TF32 on H100, inputs rounded to 11 significant bits; on a CPU it
# is plain float32): not measured here; bounded like bfloat16, whose rounding is 4x coarser.
TOLERANCES = {
    "float32": Tolerance(5e-5, 5e-5, 1.0, True, "float32 sums in another order only"),
    "float32_default": Tolerance(0.3, 0.01, 0.95, False, "TF32 matmul inputs on GPUs (not measured)"),
    "bfloat16": Tolerance(0.3, 0.01, 0.95, False, "bfloat16 weights and activations against a float32 reference"),
}


def parity_prompts() -> list[tuple[str, list[dict]]]:
    """(name, chat messages) of the four parity prompts, short to long; the last is a real task's CUDA prompt."""
    from cudaperf_jax import prompts
    from kernels_harness.tasks.schema import load_task
    return [
        ("short", [{"role": "user", "content": "What is 2+2?"}]),
        ("python", [{"role": "user", "content": "Write a Python function is_prime(n) that returns True when n is a "
                                                "prime number. Answer with the code only."}]),
        ("explain", [{"role": "system", "content": "You are a senior CUDA engineer who answers precisely."},
                     {"role": "user", "content": (
                         "A kernel reads a float matrix of 4096 x 4096 elements stored in row-major order. Thread "
                         "(x, y) of a 32 x 8 block reads the element at row blockIdx.y * 8 + y and column "
                         "blockIdx.x * 32 + x, and a second version of the kernel swaps the roles of x and y. "
                         "Explain which version coalesces its global memory loads, how many 128-byte transactions "
                         "one warp issues in each case, and how shared memory tiling changes the picture for a "
                         "transpose.")}]),
        ("cuda_task", prompts.messages(load_task(TASK_FILE))),   # system + prompts.task_prompt(task)
    ]


def load_reference(path: str | Path, device: str = "cpu"):
    """transformers' own model of the GGUF file at PATH (float32, eval mode) on the torch DEVICE."""
    import torch
    import transformers as tf
    path = Path(path)
    torch.backends.cuda.matmul.allow_tf32 = False   # a float32 reference (torch's default, made explicit)
    torch.backends.cudnn.allow_tf32 = False
    model = tf.AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
    return model.to(device).eval()


def _ours_hidden_and_logits(model):
    graphdef, state = nnx.split(model)

    @jax.jit
    def hidden(state, tokens):
        return nnx.merge(graphdef, state).hidden(tokens)[0]

    @jax.jit
    def logits(state, h):
        return nnx.merge(graphdef, state).logits(h)
    return (lambda tokens: hidden(state, tokens)), (lambda h: logits(state, h))


def logit_stats(model, ref, ids: list[int], chunk: int = 128) -> dict:
    """Logits of ours and the reference on the same ids, all positions, compared a chunk of positions at a time (the
    [L, V] arrays of a 1,000-token prompt are 600 MB each).

    Returns max_abs = max|ours - ref|, ref_scale = max|ref|, max_rel = max_abs / ref_scale, worst_position,
    median_rel (the median over positions of the position's max|ours - ref|, over ref_scale), argmax_agree (fraction of
    positions with the same top token), min_margin_at_disagreement (the reference's top-1 minus top-2 logit where the
    top tokens differ: small margins are near-ties, large ones a real mismatch) and the two forward times."""
    import torch
    hidden, logits = _ours_hidden_and_logits(model)
    # Right-padded to a multiple of 256 so that prompts share compiled programs; attention is causal, so the padding
    # never reaches the real positions.
    padded = np.zeros((1, -(-len(ids) // 256) * 256), np.int32)
    padded[0, :len(ids)] = ids
    hidden(jnp.asarray(padded)).block_until_ready()   # compile, untimed
    t0 = time.perf_counter()
    h_ours = hidden(jnp.asarray(padded)).block_until_ready()[:, :len(ids)]
    t_ours = time.perf_counter() - t0
    dev = next(ref.parameters()).device
    t0 = time.perf_counter()
    with torch.no_grad():
        h_ref = ref.model(input_ids=torch.as_tensor([ids], device=dev)).last_hidden_state
    t_ref = time.perf_counter() - t0
    per_pos, scale, agree, margins = [], 0.0, 0, []
    for i in range(0, len(ids), chunk):
        a = np.asarray(logits(h_ours[:, i:i + chunk]), np.float64)[0]
        with torch.no_grad():
            b = ref.lm_head(h_ref[:, i:i + chunk]).float().cpu().numpy().astype(np.float64)[0]
        per_pos.append(np.abs(a - b).max(-1))
        scale = max(scale, float(np.abs(b).max()))
        same = a.argmax(-1) == b.argmax(-1)
        agree += int(same.sum())
        if not same.all():
            top2 = np.sort(b[~same], axis=-1)[:, -2:]
            margins += list(top2[:, 1] - top2[:, 0])
    per_pos = np.concatenate(per_pos)
    return {"max_abs": float(per_pos.max()), "ref_scale": scale, "max_rel": float(per_pos.max()) / scale,
            "worst_position": int(per_pos.argmax()), "median_rel": float(np.median(per_pos)) / scale,
            "argmax_agree": agree / len(ids),
            "min_margin_at_disagreement": float(min(margins)) if margins else None,
            "ours_forward_s": t_ours, "ref_forward_s": t_ref}


def first_difference(a: list[int], b: list[int]) -> int | None:
    """The first index where the token lists differ (the shorter one's length when one is a prefix), or None."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def compare(model, tokenizer, ref, *, max_new_tokens: int = 64, chunk: int = 128, progress: bool = True) -> dict:
    """Logit statistics and greedy continuations of ours (the Sampler, all prompts in one batch) and the reference
    (transformers' generate, do_sample=False, one prompt at a time) on parity_prompts().

    Both stop at the same ids: the model's eos ids (for Qwen <|im_end|>). Returns {"prompts": [per-prompt dicts],
    "timings": {...}, "stop_ids": [...]}."""
    import torch
    from tqdm.auto import tqdm
    named = parity_prompts()
    sampler = Sampler(model, tokenizer)
    ids = sampler.encode([m for _, m in named], chat=True)
    stop_ids = list(model.cfg.eos_ids)
    rows = []
    for (name, _), p_ids in tqdm(list(zip(named, ids)), desc="logits", disable=not progress):
        rows.append({"name": name, "prompt_tokens": len(p_ids), **logit_stats(model, ref, p_ids, chunk)})
    params = SamplingParams(max_new_tokens=max_new_tokens, temperature=0.0, stop_token_ids=tuple(stop_ids))
    toks, mask = sampler.pad(ids)
    keys = jax.random.split(jax.random.PRNGKey(0), len(ids))
    sampler.generate_tokens(toks, mask, params, keys)[2].block_until_ready()   # compile once, untimed
    t0 = time.perf_counter()
    out = sampler.generate(ids, params)
    t_ours = time.perf_counter() - t0
    dev = next(ref.parameters()).device
    t_ref = 0.0
    for row, p_ids, toks_i, n in tqdm(list(zip(rows, ids, out.tokens, out.lengths)), desc="greedy",
                                      disable=not progress):
        x = torch.as_tensor([p_ids], device=dev)
        t0 = time.perf_counter()
        with torch.no_grad():
            y = ref.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=max_new_tokens, do_sample=False,
                             eos_token_id=stop_ids, pad_token_id=sampler.pad_id)
        t_ref += time.perf_counter() - t0
        ours, theirs = [int(t) for t in toks_i[:n]], [int(t) for t in y[0, len(p_ids):].tolist()]
        diff = first_difference(ours, theirs)
        row.update(greedy_equal=diff is None, first_diff=diff, ours_tokens=ours, ref_tokens=theirs,
                   ours_text=tokenizer.decode(ours), ref_text=tokenizer.decode(theirs))
    return {"prompts": rows, "stop_ids": stop_ids, "max_new_tokens": max_new_tokens,
            "timings": {"ours_greedy_s": t_ours, "ref_greedy_s": t_ref,
                        "ours_tokens_per_s": float(sum(out.lengths)) / t_ours,
                        "ref_tokens_per_s": sum(len(r["ref_tokens"]) for r in rows) / max(t_ref, 1e-9)}}


def check(report: dict, tol: Tolerance) -> list[str]:
    """One line per prompt that misses TOL (empty: the run passes)."""
    bad = []
    for r in report["prompts"]:
        if r["max_rel"] > tol.max_rel:
            bad.append(f"{r['name']}: max_rel {r['max_rel']:.2e} > {tol.max_rel:.0e} (position {r['worst_position']})")
        if r["median_rel"] > tol.median_rel:
            bad.append(f"{r['name']}: median_rel {r['median_rel']:.2e} > {tol.median_rel:.0e}")
        if r["argmax_agree"] < tol.min_argmax_agree:
            bad.append(f"{r['name']}: argmax agreement {r['argmax_agree']:.3f} < {tol.min_argmax_agree}")
        if tol.greedy and not r["greedy_equal"]:
            bad.append(f"{r['name']}: greedy tokens differ from position {r['first_diff']}")
    return bad
