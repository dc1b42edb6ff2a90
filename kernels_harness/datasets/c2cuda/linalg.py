"""c2cuda families `matvec` and `matmul`: dense products with transposes, scaling and accumulation.

matvec: y = alpha * op(A) x (+ beta * y), op in {A, A^T}, with a leading dimension padding.
matmul: C = alpha * op(A) op(B) (+ beta * C), op in {N, T} for both operands, shapes square,
tall-skinny or with a long K. float32/float64.

Implementations (shared kernels in blas.py): matvec naive (baseline) / warp_shuffle / smem;
matmul naive (baseline) / smem_tiled / register_blocked. Negatives: a tiled GEMM without the second
barrier (the next tile overwrites shared memory while it is still read).
"""
from __future__ import annotations

import random

from kernels_harness.datasets import base as B
from kernels_harness.datasets.c2cuda import blas


def matvec_variants(rng: random.Random) -> list[dict]:
    out = []
    for dt in B.FLOAT_DTYPES:
        for trans in (False, True):
            for acc in (False, True):
                for shape in ("square", "wide", "tall"):
                    for pad in (0, 5, 17):
                        out.append({"dtype": dt, "trans": trans, "accumulate": acc, "shape": shape,
                                    "pad": pad, "odd": rng.randrange(1, 40)})
    for i, v in enumerate(out):
        v["name"] = B.slug("gemv", i, "t" if v["trans"] else "n", "acc" if v["accumulate"] else "set",
                           v["shape"], f"ld{v['pad']}", v["dtype"])
    return out


def matvec_build(p: dict):
    dt, trans, acc = p["dtype"], p["trans"], p["accumulate"]
    T = B.ctype(dt)
    entry = "gemv_t" if trans else "gemv_n"
    # A is [M, N+P] (row-major with leading dimension lda = N+P); op(A) is M x N or N x M
    rows_sym, cols_sym = ("N", "M") if trans else ("M", "N")
    sig = [B.scalar("m", "int32", "M"), B.scalar("n", "int32", "N"), B.scalar("lda", "int32", "N+P"),
           B.scalar("alpha", dt, 1.5)]
    if acc:
        sig.append(B.scalar("beta", dt, -0.5))
    sig += [B.inp("A", dt, ["M", "N+P"]), B.inp("x", dt, [cols_sym])]
    sig.append(B.inout("y", dt, [rows_sym]) if acc else B.out("y", dt, [rows_sym]))
    rows_c, cols_c = ("n", "m") if trans else ("m", "n")
    a_ij = "A[(long long)j * lda + i]" if trans else "A[(long long)i * lda + j]"
    tail = " + beta * y[i]" if acc else ""
    c_body = f"""
for (int i = 0; i < {rows_c}; ++i) {{
  {T} s = 0;
  for (int j = 0; j < {cols_c}; ++j) s += {a_ij} * x[j];
  y[i] = alpha * s{tail};
}}"""
    source = B.c_function(entry, sig, c_body)
    beta = "beta" if acc else B.lit(0, dt)
    impls = []
    for strat, tags in blas.GEMV_STRATEGIES.items():
        kern = blas.gemv_kernel(strat, T, trans, strat)
        call = f"launch_gemv_{strat}({rows_c}, {cols_c}, alpha, {beta}, {int(acc)}, A, lda, x, y, stream);"
        impls.append((strat, tags, B.unit_fn(kern, call),
                      {"baseline": strat == "naive"}))
    if B.wrong_for(p["name"]):
        impls.append(B.mutant(impls[0], "j < cols; ++j) s +=", "j < cols - 1; ++j) s +=", "off_by_one"))
    o, P = p["odd"], p["pad"]
    shp = {"square": ((30, 40), (2048, 2048), (8192, 8192)), "wide": ((8, 100), (256, 16384), (512, 65536)),
           "tall": ((100, 8), (16384, 256), (131072, 256))}[p["shape"]]
    configs = B.configs3(*[{"M": m + o, "N": n + o, "P": P} for m, n in shp])
    tol = B.sum_tolerance(dt, 30, "M" if trans else "N", 1.5 / 3)  # terms alpha * a * x, a and x ~ uniform(-1, 1)
    return B.make_task(tid=p["name"], track="c2cuda", entry=entry, source=source, signature=sig,
                       configs=configs, tol=tol, flops="2*M*N",
                       min_bytes=f"{B.DTYPES_BYTES[dt]}*(M*N+M+N)", family="matvec", impls=impls)


def matmul_variants(rng: random.Random) -> list[dict]:
    out = []
    for dt in B.FLOAT_DTYPES:
        for ta in (False, True):
            for tb in (False, True):
                for acc in (False, True):
                    for shape in ("square", "tall_skinny", "long_k", "wide", "short_k"):
                        out.append({"dtype": dt, "ta": ta, "tb": tb, "accumulate": acc, "shape": shape,
                                    "odd": rng.randrange(1, 17), "wrong": rng.random() < 0.25})
    for i, v in enumerate(out):
        v["name"] = B.slug("gemm", i, ("t" if v["ta"] else "n") + ("t" if v["tb"] else "n"),
                           "acc" if v["accumulate"] else "set", v["shape"], v["dtype"])
    return out


def matmul_build(p: dict):
    dt, ta, tb, acc = p["dtype"], p["ta"], p["tb"], p["accumulate"]
    T = B.ctype(dt)
    tag = ("t" if ta else "n") + ("t" if tb else "n")
    entry = f"gemm_{tag}"
    a_shape = ["K", "M"] if ta else ["M", "K"]
    b_shape = ["N", "K"] if tb else ["K", "N"]
    sig = [B.scalar("m", "int32", "M"), B.scalar("n", "int32", "N"), B.scalar("k", "int32", "K"),
           B.scalar("alpha", dt, 1.0 if not acc else 0.5)]
    if acc:
        sig.append(B.scalar("beta", dt, 2.0))
    sig += [B.inp("A", dt, a_shape), B.inp("B", dt, b_shape)]
    sig.append(B.inout("C", dt, ["M", "N"]) if acc else B.out("C", dt, ["M", "N"]))
    lda = "m" if ta else "k"
    ldb = "k" if tb else "n"
    a_ik = f"A[(long long)p * {lda} + i]" if ta else f"A[(long long)i * {lda} + p]"
    b_kj = f"B[(long long)j * {ldb} + p]" if tb else f"B[(long long)p * {ldb} + j]"
    tail = " + beta * C[(long long)i * n + j]" if acc else ""
    c_body = f"""
for (int i = 0; i < m; ++i)
  for (int j = 0; j < n; ++j) {{
    {T} s = 0;
    for (int p = 0; p < k; ++p) s += {a_ik} * {b_kj};
    C[(long long)i * n + j] = alpha * s{tail};
  }}"""
    source = B.c_function(entry, sig, c_body)
    beta = "beta" if acc else B.lit(0, dt)
    call = f"launch_gemm_{{s}}(m, n, k, alpha, {beta}, {int(acc)}, 0, A, {lda}, B, {ldb}, C, n, stream);"
    impls = []
    for strat, tags in blas.GEMM_STRATEGIES.items():
        kern = blas.gemm_kernel(strat, T, ta, tb, strat)
        impls.append((strat, tags, B.unit_fn(
            kern, call.format(s=strat)), {"baseline": strat == "naive"}))
    if p["wrong"]:
        kern = blas.gemm_kernel("smem_tiled", T, ta, tb, "nosync")
        kern = _drop_last_barrier(kern)
        impls.append(("smem_tiled_nosync", ["smem_tiled"], B.unit_fn(
            kern, call.format(s="nosync")), {"defect": "missing_barrier"}))
    o = p["odd"]
    shp = {"square": ((24, 20, 28), (512, 512, 512), (2048, 2048, 2048)),
           "tall_skinny": ((70, 6, 40), (16384, 64, 64), (131072, 64, 128)),
           "long_k": ((9, 11, 90), (64, 64, 16384), (256, 256, 65536)),
           "wide": ((6, 70, 40), (64, 16384, 64), (64, 131072, 128)),
           "short_k": ((40, 50, 20), (2048, 2048, 16), (8192, 8192, 32))}[p["shape"]]
    configs = B.configs3(*[{"M": m + o, "N": n + o, "K": k + o} for m, n, k in shp])
    tol = B.sum_tolerance(dt, 30, "K", (0.5 if acc else 1.0) / 3)  # terms alpha * a * b, a and b ~ uniform(-1, 1)
    return B.make_task(tid=p["name"], track="c2cuda", entry=entry, source=source, signature=sig,
                       configs=configs, tol=tol, flops="2*M*N*K",
                       min_bytes=f"{B.DTYPES_BYTES[dt]}*(M*K+K*N+M*N)", family="matmul", impls=impls)


def _drop_last_barrier(kernel: str) -> str:
    """Removes the barrier that protects shared memory before the next tile is loaded."""
    marker = "    __syncthreads();\n  }\n"
    idx = kernel.rfind(marker)
    assert idx >= 0, "tiled gemm kernel changed shape"
    return kernel[:idx] + "  }\n" + kernel[idx + len(marker):]
