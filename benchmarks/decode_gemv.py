"""Batch-1 matrix-vector products on the GPU: XLA's dot against the Pallas kernel (cudaperf_jax.models.gemv)
and the CUDA FFI kernel (cudaperf_jax.models.cuda_matvec, --cuda, on by default on a GPU).

    OUT=out python benchmarks/decode_gemv.py [--shapes=qwen2.5-1.5b] [--sweep]

For every weight shape of the model (bf16): TB/s of XLA's dot in the stored [K, N] layout, of XLA's dot
in [N, K], and of the Pallas kernel with its default tiling (and, with --sweep, a grid of tilings; the
best is reported). Each measurement runs the product over enough distinct copies of the weight to
exceed the L2 cache, inside one jitted function, timed over repetitions (median). Prints a table and
writes $OUT/decode_gemv.json.
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jax
import jax.numpy as jnp
import numpy as np

from cudaperf_jax.models import gemv

SHAPES = {  # (name, K, N, stored transposed)
    "qwen2.5-1.5b": [("qkv", 1536, 2048, False), ("o", 1536, 1536, False), ("gate_up", 1536, 17920, False),
                     ("down", 8960, 1536, False), ("lm_head(tied)", 1536, 151936, True)],
    "smollm2-135m": [("qkv", 576, 960, False), ("o", 576, 576, False), ("gate_up", 576, 3072, False),
                     ("down", 1536, 576, False), ("lm_head(tied)", 576, 49152, True)],
}


def timed(fn, *args, reps=10, rounds=5):
    """Seconds per call: `reps` calls queued back to back (host dispatch overlaps the GPU), best of rounds."""
    jax.block_until_ready(fn(*args))
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(reps):
            out = fn(*args)
        jax.block_until_ready(out)
        best = min(best, (time.perf_counter() - t0) / reps)
    return best


def copies_for(nbytes, min_total=256 << 20):
    return max(2, -(-min_total // nbytes))


def bench_shape(k, n, transposed, sweep, cuda=False):
    nbytes = k * n * 2
    c = copies_for(nbytes)
    key = jax.random.key(0)
    # separate buffers: slicing copies out of one stacked array would add a copy of each weight per call
    ws = tuple(jax.random.normal(kk, (n, k) if transposed else (k, n), jnp.bfloat16) for kk in jax.random.split(key, c))
    x = jax.random.normal(jax.random.key(1), (k,), jnp.bfloat16)
    total = c * nbytes
    res = {"K": k, "N": n, "transposed": transposed, "copies": c, "MB": nbytes / 1e6}

    def run_all(f):  # one output buffer, so the host returns one array per call
        return jax.jit(lambda x, ws: jnp.stack([f(x, ws[i]) for i in range(c)]))

    # XLA, stored layout
    if transposed:
        xla_stored = run_all(lambda x, w: jnp.einsum("k,nk->n", x, w, preferred_element_type=jnp.float32))
    else:
        xla_stored = run_all(lambda x, w: jnp.einsum("k,kn->n", x, w, preferred_element_type=jnp.float32))
    res["xla_stored_tb_s"] = total / timed(xla_stored, x, ws) / 1e12
    # XLA, the other layout
    wt = tuple(w.T for w in ws)
    if transposed:
        xla_other = run_all(lambda x, w: jnp.einsum("k,kn->n", x, w, preferred_element_type=jnp.float32))
    else:
        xla_other = run_all(lambda x, w: jnp.einsum("k,nk->n", x, w, preferred_element_type=jnp.float32))
    res["xla_other_layout_tb_s"] = total / timed(xla_other, x, wt) / 1e12
    del wt
    want = np.asarray(xla_stored(x, ws)[0], np.float32)
    cfgs = [gemv.default_config(k, n, transposed)]
    if sweep:
        for bn, s, bk, nw, st in itertools.product((16, 32, 64, 128), (1, 2, 3, 4, 5, 6, 7, 8, 12, 14, 16),
                                                    (32, 64, 128, 256, 512), (4, 8), (2, 3, 4, 6)):
            if n % bn or k % s or (k // s) % bk or (n // bn) * s < 100 or (n // bn) * s > 20000:
                continue
            cfgs.append(gemv.GemvConfig(bn, s, bk, nw, st))
        rng = np.random.default_rng(k * n)
        if len(cfgs) > sweep:
            cfgs = [cfgs[0]] + [cfgs[i] for i in sorted(rng.choice(np.arange(1, len(cfgs)), sweep - 1, replace=False))]
    tried = []
    for cfg in cfgs:
        try:
            f = run_all(lambda x, w, cfg=cfg: gemv.gemv_raw(x, w, transposed=transposed, config=cfg, interpret=False))
            got = np.asarray(f(x, ws)[0], np.float32)
            err = float(np.max(np.abs(got - want)) / (np.max(np.abs(want)) + 1e-6))
            tb = total / timed(f, x, ws) / 1e12
            tried.append({"config": cfg._asdict(), "tb_s": tb, "rel_err": err})
        except Exception as e:  # noqa: BLE001
            tried.append({"config": cfg._asdict() if cfg else None, "error": f"{type(e).__name__}: {str(e)[:300]}"})
    ok = [t for t in tried if "tb_s" in t and t["rel_err"] < 2e-2]
    res["pallas_default"] = tried[0]
    res["pallas_best"] = max(ok, key=lambda t: t["tb_s"]) if ok else None
    res["pallas_tried"] = tried
    if cuda and not transposed:
        res["cuda_tried"] = cuda_shape(x, ws, want, total)
        good = [t for t in res["cuda_tried"] if "tb_s" in t and t["rel_err"] < 2e-2]
        res["cuda_best"] = max(good, key=lambda t: t["tb_s"]) if good else None
    return res


def cuda_tilings(k: int, n: int, sms: int = 132, per_cols: int = 4) -> list[tuple[int, int, int]]:
    """(split, cols, unroll) to try for one shape: the default, and per column width the splits whose grids
    spread most evenly over the SMs (between 1 and 10 blocks per SM, >= 32 rows per slice), each at unroll 4
    and 8."""
    from cudaperf_jax.models import cuda_matvec as cm
    out = {(cm.default_split(k, n), cm.default_cols(n), 4)} if cm.supported(k, n, 1) else set()
    for cols in cm.COLS:
        if n % cols:
            continue
        cand = []
        for s in range(1, k // 32 + 1):
            b = (n // cols) * s
            if k % s == 0 and sms <= b <= 10 * sms and cm.supported(k, n, s, cols):
                cand.append((-(b / (sms * -(-b // sms))), s))   # fullness of the last wave
        for _, s in sorted(cand)[:per_cols]:
            out.update({(s, cols, 4), (s, cols, 8)})
    return sorted(out)


def cuda_shape(x, ws, want, total):
    """The CUDA FFI matvec (cudaperf_jax.models.cuda_matvec) on one shape: cuda_tilings, each launched with
    programmatic dependent launch back to back over the copies of the weight (as the decode step chains them)."""
    from cudaperf_jax.models import cuda_matvec as cm
    k, n = ws[0].shape
    xf = x.astype(jnp.float32)[None, :]
    tried = []
    for s, cols, u in cuda_tilings(k, n):
        try:
            f = jax.jit(lambda x, ws, s=s, c=cols, u=u: jnp.stack(
                [cm.matvec(x, w, split_k=s, cols=c, unroll=u, pdl=True).sum(axis=0) for w in ws]))
            got = np.asarray(f(xf, ws)[0], np.float32)
            err = float(np.max(np.abs(got - want)) / (np.max(np.abs(want)) + 1e-6))
            tried.append({"split_k": s, "cols": cols, "unroll": u, "pdl": True, "tb_s": total / timed(f, xf, ws) / 1e12,
                          "rel_err": err})
        except Exception as e:  # noqa: BLE001
            tried.append({"split_k": s, "cols": cols, "unroll": u, "pdl": True, "error": f"{type(e).__name__}: {str(e)[:300]}"})
    return tried


def cuda_chain(model: str, n_layers: int, pdl: bool):
    """Seconds per pass of the decode-shaped weight stream through the CUDA matvec alone: each launch reads the
    previous one's float32 partials (qkv -> o -> gate_up -> down per layer, no elementwise kernels between,
    so with PDL every launch overlaps the previous one's tail), then the LM head with the Pallas kernel."""
    from cudaperf_jax.models import cuda_matvec as cm
    shapes = {name: (k, n, tr) for name, k, n, tr in SHAPES[model]}
    keys = iter(jax.random.split(jax.random.key(2), 4 * n_layers + 1))
    names = ("qkv", "o", "gate_up", "down")
    layers = [tuple(jax.random.normal(next(keys), shapes[nm][:2], jnp.bfloat16) * 0.02 for nm in names)
              for _ in range(n_layers)]
    k, n, _ = shapes["lm_head(tied)"]
    head = jax.random.normal(next(keys), (n, k), jnp.bfloat16) * 0.02
    nbytes = sum(w.size * 2 for lw in layers for w in lw) + head.size * 2

    @jax.jit
    def step(x, layers, head):
        for lw in layers:
            for w in lw:
                x = cm.matvec(x, w, split_k=cm.default_split(*w.shape), pdl=pdl)
        return jnp.argmax(gemv.gemv_raw(x.sum(axis=0)[:k].astype(jnp.bfloat16), head, transposed=True, interpret=False))

    x = jax.random.normal(jax.random.key(3), (1, shapes["qkv"][0]), jnp.float32)
    secs = timed(step, x, layers, head)
    return {"step_ms": secs * 1e3, "tb_s": nbytes / secs / 1e12, "bytes": nbytes}


def layer_chain(model: str, n_layers: int, use_kernel: bool):
    """Seconds per pass of a decode-shaped chain over one copy of every matrix (layers of qkv -> o ->
    gate_up -> silu*mul -> down with residuals, then the LM head and argmax): weights only, no attention."""
    shapes = {name: (k, n, tr) for name, k, n, tr in SHAPES[model]}
    d = shapes["qkv"][0]
    keys = iter(jax.random.split(jax.random.key(2), 4 * n_layers + 1))
    layers = [{nm: jax.random.normal(next(keys), (shapes[nm][0], shapes[nm][1]), jnp.bfloat16) * 0.02
               for nm in ("qkv", "o", "gate_up", "down")} for _ in range(n_layers)]
    k, n, _ = shapes["lm_head(tied)"]
    head = jax.random.normal(next(keys), (n, k), jnp.bfloat16) * 0.02
    nbytes = sum(w.size * 2 for lw in layers for w in lw.values()) + head.size * 2

    def mm(x, w, transposed=False):
        if use_kernel:
            return gemv.gemv_raw(x, w, transposed=transposed, interpret=False)
        eq = "k,nk->n" if transposed else "k,kn->n"
        return jnp.einsum(eq, x, w, preferred_element_type=jnp.float32)

    @jax.jit
    def step(x, layers, head):
        for lw in layers:
            y = mm(x, lw["qkv"]).astype(jnp.bfloat16)
            x = x + mm(y[:d], lw["o"]).astype(jnp.bfloat16)
            gu = mm(x, lw["gate_up"]).reshape(2, -1)
            a = (jax.nn.silu(gu[0]) * gu[1]).astype(jnp.bfloat16)
            x = x + mm(a, lw["down"]).astype(jnp.bfloat16)
        return jnp.argmax(mm(x, head, transposed=True))

    x = jax.random.normal(jax.random.key(3), (d,), jnp.bfloat16)
    secs = timed(step, x, layers, head)
    return {"step_ms": secs * 1e3, "tb_s": nbytes / secs / 1e12, "bytes": nbytes}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="qwen2.5-1.5b")
    ap.add_argument("--sweep", type=int, default=0, help="tilings to try per shape besides the default (0 = none)")
    ap.add_argument("--layers", type=int, default=28, help="layers of the decode-shaped chain (0 = skip it)")
    ap.add_argument("--table_out", default="", help="write the best tiling per shape here (CUDAPERF_GEMV_TABLE format)")
    ap.add_argument("--cuda", action=argparse.BooleanOptionalAction, default=jax.default_backend() == "gpu",
                    help="also time the CUDA FFI matvec (per shape, and its weight-stream chain with and without PDL)")
    ap.add_argument("--cuda_spec_out", default="", help="write the fastest CUDA tiling per shape here "
                    "(CUDAPERF_CUDA_SPLIT format)")
    args = ap.parse_args(argv)
    out = Path(os.environ.get("OUT", "out"))
    out.mkdir(parents=True, exist_ok=True)
    results = {"device": str(jax.devices()[0]), "jax": jax.__version__, "xla_flags": os.environ.get("XLA_FLAGS", ""),
               "shapes": {}, "chain": {}}
    table, spec = [], []
    for model in args.shapes.split(","):
        for name, k, n, tr in SHAPES[model]:
            t0 = time.time()
            try:
                r = bench_shape(k, n, tr, args.sweep, args.cuda)
            except Exception as e:  # noqa: BLE001
                r = {"error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()[-800:]}
            r["seconds"] = round(time.time() - t0, 1)
            results["shapes"][f"{model}/{name}"] = r
            (out / "decode_gemv.json").write_text(json.dumps(results, indent=1))
            best = r.get("pallas_best") or {}
            dflt = r.get("pallas_default") or {}
            if best and best.get("tb_s", 0) > dflt.get("tb_s", 0) * 1.03:
                table.append({"K": k, "N": n, "transposed": tr, "config": best["config"], "tb_s": round(best["tb_s"], 3)})
            print(f"{model}/{name:14s} K={k:5d} N={n:6d} MB={k * n * 2 / 1e6:6.1f}  xla {r.get('xla_stored_tb_s', float('nan')):.2f}  "
                  f"xla-other-layout {r.get('xla_other_layout_tb_s', float('nan')):.2f}  "
                  f"pallas-default {dflt.get('tb_s', float('nan')):.2f} {dflt.get('error', '')[:300]}  "
                  f"pallas-best {best.get('tb_s', float('nan')):.2f} {best.get('config', '')}  ({r['seconds']} s) "
                  f"{r.get('error', '')}", flush=True)
            tried = r.get("cuda_tried", [])
            for t in sorted(tried, key=lambda t: -t.get("tb_s", 0))[:6] + [t for t in tried if "error" in t][:2]:
                print(f"    cuda split {t['split_k']:3d} cols {t['cols']:3d} unroll {t['unroll']}: "
                      + (f"{t['tb_s']:.2f} TB/s (rel err {t['rel_err']:.1e})" if "tb_s" in t else t["error"]), flush=True)
            if r.get("cuda_best"):
                b = r["cuda_best"]
                spec.append(f"{k}x{n}={b['split_k']}:{b['cols']}:{b['unroll']}")
        if spec:   # the fastest CUDA tiling per shape, as decode_fused reads it
            results["cuda_split_spec"] = ",".join(spec)
            print(f"CUDAPERF_CUDA_SPLIT={results['cuda_split_spec']}", flush=True)
            if args.cuda_spec_out:
                Path(args.cuda_spec_out).write_text(results["cuda_split_spec"])
        if args.table_out:  # the chain below (and later processes given the variable) use these tilings
            Path(args.table_out).write_text(json.dumps(table, indent=1))
            os.environ["CUDAPERF_GEMV_TABLE"] = str(Path(args.table_out).resolve())
        if args.layers:
            for use_kernel in (False, True):
                tag = f"{model}/{'pallas' if use_kernel else 'xla'}"
                try:
                    results["chain"][tag] = layer_chain(model, args.layers, use_kernel)
                    c = results["chain"][tag]
                    print(f"chain {tag}: {c['step_ms']:.3f} ms per pass, {c['tb_s']:.2f} TB/s", flush=True)
                except Exception as e:  # noqa: BLE001
                    results["chain"][tag] = {"error": f"{type(e).__name__}: {e}"}
                    print(f"chain {tag}: {type(e).__name__}: {str(e)[:300]}", flush=True)
                (out / "decode_gemv.json").write_text(json.dumps(results, indent=1))
            for pdl in (False, True) if args.cuda else ():
                tag = f"{model}/cuda{'_pdl' if pdl else ''}_stream"
                try:
                    results["chain"][tag] = c = cuda_chain(model, args.layers, pdl)
                    print(f"chain {tag}: {c['step_ms']:.3f} ms per pass, {c['tb_s']:.2f} TB/s", flush=True)
                except Exception as e:  # noqa: BLE001
                    results["chain"][tag] = {"error": f"{type(e).__name__}: {e}"}
                    print(f"chain {tag}: {type(e).__name__}: {str(e)[:300]}", flush=True)
                (out / "decode_gemv.json").write_text(json.dumps(results, indent=1))
    return results


if __name__ == "__main__":
    main()
