"""c2cuda family `polybench`: the PolyBench/C linear-algebra kernels 2mm, 3mm, atax, bicg, gemver,
gesummv, mvt, syrk, syr2k and trmm, written as PolyBench writes them (serial loops over row-major
arrays), for float32/float64, square or rectangular problem shapes, aligned or ragged sizes.

Implementations compose the shared GEMM/GEMV kernels of blas.py: naive (baseline), tiled (shared
memory GEMM, shared-memory GEMV) and fast (register-blocked GEMM, warp-shuffle GEMV).
"""
from __future__ import annotations

import random

from kernels_harness.datasets import base as B
from kernels_harness.datasets.c2cuda import blas

KERNELS = ("2mm", "3mm", "atax", "bicg", "gemver", "gesummv", "mvt", "syrk", "syr2k", "trmm")
STRATS = {"naive": ("naive", "naive", ["naive"]),
          "tiled": ("smem_tiled", "smem", ["smem_tiled", "coalesced"]),
          "fast": ("register_blocked", "warp", ["register_blocked", "warp_shuffle", "smem_tiled"])}


def variants(rng: random.Random) -> list[dict]:
    out = []
    for k in KERNELS:
        for dt in B.FLOAT_DTYPES:
            for shape in (("square", "rect") if len(_SIZES[k]) > 1 else ("square",)):
                for sizes in ("aligned", "ragged"):
                    out.append({"kernel": k, "dtype": dt, "shape": shape, "sizes": sizes,
                                "odd": rng.randrange(1, 30)})
    for i, v in enumerate(out):
        v["name"] = B.slug("polybench", i, v["kernel"], v["shape"], v["sizes"], v["dtype"])
    return out


def _vec_kernels(T: str) -> str:
    return f"""
__global__ void rank2_update(int n, {T}* A, const {T}* u1, const {T}* v1, const {T}* u2, const {T}* v2) {{
  long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= (long long)n * n) return;
  int i = (int)(e / n), j = (int)(e % n);
  A[e] = A[e] + u1[i] * v1[j] + u2[i] * v2[j];
}}
__global__ void axpy(int n, {T} a, const {T}* x, {T}* y) {{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = y[i] + a * x[i];
}}"""


def _spec(k: str, T: str, dt: str):
    """(signature, C body, [(gemm ta, tb) needed], [gemv trans needed], launcher(gm, gv) -> C body)."""
    one, zero = B.lit(1, dt), B.lit(0, dt)
    S = lambda n, v: B.scalar(n, "int32" if isinstance(v, str) else dt, v)
    if k == "2mm":
        sig = [S("ni", "NI"), S("nj", "NJ"), S("nk", "NK"), S("nl", "NL"), S("alpha", 1.5), S("beta", 1.2),
               B.out("tmp", dt, ["NI", "NJ"]), B.inp("A", dt, ["NI", "NK"]), B.inp("B", dt, ["NK", "NJ"]),
               B.inp("C", dt, ["NJ", "NL"]), B.inout("D", dt, ["NI", "NL"])]
        body = """
for (int i = 0; i < ni; i++)
  for (int j = 0; j < nj; j++) {
    tmp[i * nj + j] = 0;
    for (int k = 0; k < nk; ++k) tmp[i * nj + j] += alpha * A[i * nk + k] * B[k * nj + j];
  }
for (int i = 0; i < ni; i++)
  for (int j = 0; j < nl; j++) {
    D[i * nl + j] *= beta;
    for (int k = 0; k < nj; ++k) D[i * nl + j] += tmp[i * nj + k] * C[k * nl + j];
  }"""
        return sig, body, [(False, False)], [], lambda g, v: f"""
launch_gemm_{g}_nn(ni, nj, nk, alpha, {zero}, 0, 0, A, nk, B, nj, tmp, nj, stream);
launch_gemm_{g}_nn(ni, nl, nj, {one}, beta, 1, 0, tmp, nj, C, nl, D, nl, stream);"""
    if k == "3mm":
        sig = [S("ni", "NI"), S("nj", "NJ"), S("nk", "NK"), S("nl", "NL"), S("nm", "NM"),
               B.out("E", dt, ["NI", "NJ"]), B.inp("A", dt, ["NI", "NK"]), B.inp("B", dt, ["NK", "NJ"]),
               B.out("F", dt, ["NJ", "NL"]), B.inp("C", dt, ["NJ", "NM"]), B.inp("D", dt, ["NM", "NL"]),
               B.out("G", dt, ["NI", "NL"])]
        body = """
for (int i = 0; i < ni; i++)
  for (int j = 0; j < nj; j++) {
    E[i * nj + j] = 0;
    for (int k = 0; k < nk; ++k) E[i * nj + j] += A[i * nk + k] * B[k * nj + j];
  }
for (int i = 0; i < nj; i++)
  for (int j = 0; j < nl; j++) {
    F[i * nl + j] = 0;
    for (int k = 0; k < nm; ++k) F[i * nl + j] += C[i * nm + k] * D[k * nl + j];
  }
for (int i = 0; i < ni; i++)
  for (int j = 0; j < nl; j++) {
    G[i * nl + j] = 0;
    for (int k = 0; k < nj; ++k) G[i * nl + j] += E[i * nj + k] * F[k * nl + j];
  }"""
        return sig, body, [(False, False)], [], lambda g, v: f"""
launch_gemm_{g}_nn(ni, nj, nk, {one}, {zero}, 0, 0, A, nk, B, nj, E, nj, stream);
launch_gemm_{g}_nn(nj, nl, nm, {one}, {zero}, 0, 0, C, nm, D, nl, F, nl, stream);
launch_gemm_{g}_nn(ni, nl, nj, {one}, {zero}, 0, 0, E, nj, F, nl, G, nl, stream);"""
    if k == "atax":
        sig = [S("m", "M"), S("n", "N"), B.inp("A", dt, ["M", "N"]), B.inp("x", dt, ["N"]),
               B.out("y", dt, ["N"]), B.out("tmp", dt, ["M"])]
        body = """
for (int i = 0; i < n; i++) y[i] = 0;
for (int i = 0; i < m; i++) {
  tmp[i] = 0;
  for (int j = 0; j < n; j++) tmp[i] = tmp[i] + A[i * n + j] * x[j];
  for (int j = 0; j < n; j++) y[j] = y[j] + A[i * n + j] * tmp[i];
}"""
        return sig, body, [], [False, True], lambda g, v: f"""
launch_gemv_{v}_n(m, n, {one}, {zero}, 0, A, n, x, tmp, stream);
launch_gemv_{v}_t(n, m, {one}, {zero}, 0, A, n, tmp, y, stream);"""
    if k == "bicg":
        sig = [S("m", "M"), S("n", "N"), B.inp("A", dt, ["N", "M"]), B.out("s", dt, ["M"]),
               B.out("q", dt, ["N"]), B.inp("p", dt, ["M"]), B.inp("r", dt, ["N"])]
        body = """
for (int i = 0; i < m; i++) s[i] = 0;
for (int i = 0; i < n; i++) {
  q[i] = 0;
  for (int j = 0; j < m; j++) {
    s[j] = s[j] + r[i] * A[i * m + j];
    q[i] = q[i] + A[i * m + j] * p[j];
  }
}"""
        return sig, body, [], [False, True], lambda g, v: f"""
launch_gemv_{v}_t(m, n, {one}, {zero}, 0, A, m, r, s, stream);
launch_gemv_{v}_n(n, m, {one}, {zero}, 0, A, m, p, q, stream);"""
    if k == "gemver":
        sig = [S("n", "N"), S("alpha", 1.5), S("beta", 1.2), B.inout("A", dt, ["N", "N"]),
               B.inp("u1", dt, ["N"]), B.inp("v1", dt, ["N"]), B.inp("u2", dt, ["N"]), B.inp("v2", dt, ["N"]),
               B.inout("w", dt, ["N"]), B.inout("x", dt, ["N"]), B.inp("y", dt, ["N"]), B.inp("z", dt, ["N"])]
        body = """
for (int i = 0; i < n; i++)
  for (int j = 0; j < n; j++) A[i * n + j] = A[i * n + j] + u1[i] * v1[j] + u2[i] * v2[j];
for (int i = 0; i < n; i++)
  for (int j = 0; j < n; j++) x[i] = x[i] + beta * A[j * n + i] * y[j];
for (int i = 0; i < n; i++) x[i] = x[i] + z[i];
for (int i = 0; i < n; i++)
  for (int j = 0; j < n; j++) w[i] = w[i] + alpha * A[i * n + j] * x[j];"""
        return sig, body, [], [False, True], lambda g, v: f"""
if (n <= 0) return 0;
rank2_update<<<(int)(((long long)n * n + 255) / 256), 256, 0, stream>>>(n, A, u1, v1, u2, v2);
launch_gemv_{v}_t(n, n, beta, {one}, 1, A, n, y, x, stream);
axpy<<<(n + 255) / 256, 256, 0, stream>>>(n, {one}, z, x);
launch_gemv_{v}_n(n, n, alpha, {one}, 1, A, n, x, w, stream);"""
    if k == "gesummv":
        sig = [S("n", "N"), S("alpha", 1.5), S("beta", 1.2), B.inp("A", dt, ["N", "N"]), B.inp("B", dt, ["N", "N"]),
               B.out("tmp", dt, ["N"]), B.inp("x", dt, ["N"]), B.out("y", dt, ["N"])]
        body = """
for (int i = 0; i < n; i++) {
  tmp[i] = 0;
  y[i] = 0;
  for (int j = 0; j < n; j++) {
    tmp[i] = A[i * n + j] * x[j] + tmp[i];
    y[i] = B[i * n + j] * x[j] + y[i];
  }
  y[i] = alpha * tmp[i] + beta * y[i];
}"""
        return sig, body, [], [False], lambda g, v: f"""
if (n <= 0) return 0;
launch_gemv_{v}_n(n, n, {one}, {zero}, 0, A, n, x, tmp, stream);
launch_gemv_{v}_n(n, n, beta, {zero}, 0, B, n, x, y, stream);
axpy<<<(n + 255) / 256, 256, 0, stream>>>(n, alpha, tmp, y);"""
    if k == "mvt":
        sig = [S("n", "N"), B.inout("x1", dt, ["N"]), B.inout("x2", dt, ["N"]), B.inp("y_1", dt, ["N"]),
               B.inp("y_2", dt, ["N"]), B.inp("A", dt, ["N", "N"])]
        body = """
for (int i = 0; i < n; i++)
  for (int j = 0; j < n; j++) x1[i] = x1[i] + A[i * n + j] * y_1[j];
for (int i = 0; i < n; i++)
  for (int j = 0; j < n; j++) x2[i] = x2[i] + A[j * n + i] * y_2[j];"""
        return sig, body, [], [False, True], lambda g, v: f"""
launch_gemv_{v}_n(n, n, {one}, {one}, 1, A, n, y_1, x1, stream);
launch_gemv_{v}_t(n, n, {one}, {one}, 1, A, n, y_2, x2, stream);"""
    if k == "syrk":
        sig = [S("n", "N"), S("m", "M"), S("alpha", 1.5), S("beta", 1.2), B.inout("C", dt, ["N", "N"]),
               B.inp("A", dt, ["N", "M"])]
        body = """
for (int i = 0; i < n; i++) {
  for (int j = 0; j <= i; j++) C[i * n + j] *= beta;
  for (int k = 0; k < m; k++)
    for (int j = 0; j <= i; j++) C[i * n + j] += alpha * A[i * m + k] * A[j * m + k];
}"""
        return sig, body, [(False, True)], [], lambda g, v: f"""
launch_gemm_{g}_nt(n, n, m, alpha, beta, 1, 1, A, m, A, m, C, n, stream);"""
    if k == "syr2k":
        sig = [S("n", "N"), S("m", "M"), S("alpha", 1.5), S("beta", 1.2), B.inout("C", dt, ["N", "N"]),
               B.inp("A", dt, ["N", "M"]), B.inp("B", dt, ["N", "M"])]
        body = """
for (int i = 0; i < n; i++) {
  for (int j = 0; j <= i; j++) C[i * n + j] *= beta;
  for (int k = 0; k < m; k++)
    for (int j = 0; j <= i; j++)
      C[i * n + j] += A[j * m + k] * alpha * B[i * m + k] + B[j * m + k] * alpha * A[i * m + k];
}"""
        return sig, body, [(False, True)], [], lambda g, v: f"""
launch_gemm_{g}_nt(n, n, m, alpha, beta, 1, 1, B, m, A, m, C, n, stream);
launch_gemm_{g}_nt(n, n, m, alpha, {one}, 1, 1, A, m, B, m, C, n, stream);"""
    if k == "trmm":
        sig = [S("m", "M"), S("n", "N"), S("alpha", 1.5), B.inp("A", dt, ["M", "M"]), B.inout("B", dt, ["M", "N"])]
        body = """
for (int i = 0; i < m; i++)
  for (int j = 0; j < n; j++) {
    for (int k = i + 1; k < m; k++) B[i * n + j] += A[k * m + i] * B[k * n + j];
    B[i * n + j] = alpha * B[i * n + j];
  }"""
        return sig, body, [(True, False)], [], lambda g, v: f"""
if (m <= 0 || n <= 0) return 0;
{T}* Bc = 0;
size_t bytes = sizeof({T}) * (size_t)m * n;
cudaError_t err = cudaMallocAsync((void**)&Bc, bytes, stream);
if (err != cudaSuccess) return (int)err;
cudaMemcpyAsync(Bc, B, bytes, cudaMemcpyDeviceToDevice, stream);
launch_gemm_{g}_tn(m, n, m, alpha, alpha, 1, 2, A, m, Bc, n, B, n, stream);
cudaFreeAsync(Bc, stream);"""
    raise ValueError(k)


_SIZES = {  # kernel -> symbols -> (small, medium, large) for square shapes; rect scales some symbols
    "2mm": ("NI", "NJ", "NK", "NL"), "3mm": ("NI", "NJ", "NK", "NL", "NM"), "atax": ("M", "N"),
    "bicg": ("M", "N"), "gemver": ("N",), "gesummv": ("N",), "mvt": ("N",), "syrk": ("N", "M"),
    "syr2k": ("N", "M"), "trmm": ("M", "N")}


def build(p: dict):
    k, dt = p["kernel"], p["dtype"]
    T = B.ctype(dt)
    sig, body, gemms, gemvs, launcher = _spec(k, T, dt)
    entry = "kernel_" + k
    source = B.c_function(entry, sig, body)  # PolyBench indexes with int: arrays stay below 2^31
    impls = []
    for sname, (gs, vs, tags) in STRATS.items():
        kern = ""
        for ta, tb in gemms:
            kern += blas.gemm_kernel(gs, T, ta, tb, f"{sname}_{'t' if ta else 'n'}{'t' if tb else 'n'}")
        for tr in gemvs:
            kern += blas.gemv_kernel(vs, T, tr, f"{sname}_{'t' if tr else 'n'}")
        if k in ("gemver", "gesummv"):
            kern += _vec_kernels(T)
        impls.append((sname, tags, B.unit_fn(
            kern, launcher(sname, sname)), {"baseline": sname == "naive"}))
    if B.wrong_for(p["name"], 35):
        old = "k < K; ++k) s +=" if gemms else "j < cols; ++j) s +="
        impls.append(B.mutant(impls[0], old, old.replace("< K;", "< K - 1;").replace("< cols;", "< cols - 1;"),
                              "off_by_one"))
    syms = _SIZES[k]
    matrix_like = k in ("2mm", "3mm", "syrk", "syr2k", "trmm")
    base = (24, 256, 1536) if matrix_like else (40, 1024, 8192)
    o = p["odd"] if p["sizes"] == "ragged" else 0
    configs = []
    for lvl, (cname, b) in enumerate(zip(("small", "medium", "large"), base)):
        cfg = {"name": cname}
        for si, s in enumerate(syms):
            v = b
            if p["shape"] == "rect" and si % 2 == 1:
                v = max(8, b // 2) if matrix_like else b * 2
            if p["sizes"] == "aligned" and lvl == 0:
                v = 32
            cfg[s] = v + o + si
        configs.append(cfg)
    flops = {"2mm": "2*NI*NJ*NK+2*NI*NL*NJ", "3mm": "2*NI*NJ*NK+2*NJ*NL*NM+2*NI*NL*NJ", "atax": "4*M*N",
             "bicg": "4*M*N", "gemver": "10*N*N", "gesummv": "4*N*N", "mvt": "4*N*N", "syrk": "N*N*M",
             "syr2k": "2*N*N*M", "trmm": "M*M*N"}[k]
    nb = B.DTYPES_BYTES[dt]
    min_bytes = f"{nb}*(" + "+".join("*".join(a.shape) for a in sig if a.is_array) + ")"
    return B.make_task(tid=p["name"], track="c2cuda", entry=entry, source=source, signature=sig,
                       configs=configs, tol=B.tolerance(dt, 100), flops=flops, min_bytes=min_bytes,
                       family="polybench", impls=impls)
