"""c2cuda family `spmv`: sparse matrix-vector products y = alpha*A x (+ beta*y) with A in CSR,
transposed CSR (y = A^T x, a scatter), or ELL (padded with negative column ids, row-major [R, K] or
column-major [K, R]); float32/float64; 4, 32 or 256 stored entries per row; square or rectangular.

Implementations: naive (one thread per row, baseline), grid_stride, warp_shuffle (a warp per row;
for A^T: a warp per row with atomics), unrolled (ELL: 4 slots per step).
"""
from __future__ import annotations

import random

from kernels_harness.datasets import base as B

FORMATS = ("csr", "csr_t", "ell_row", "ell_col")


def variants(rng: random.Random) -> list[dict]:
    out = []
    for fmt in FORMATS:
        for dt in B.FLOAT_DTYPES:
            for per_row in (4, 8, 32, 64, 256):
                for acc in (False, True):
                    for shape in ("square", "rect"):
                        out.append({"format": fmt, "dtype": dt, "per_row": per_row, "accumulate": acc,
                                    "shape": shape, "odd": rng.randrange(1, 50)})
    for i, v in enumerate(out):
        v["name"] = B.slug("spmv", i, v["format"], f"nnz{v['per_row']}", "axpby" if v["accumulate"] else "ax",
                           v["shape"], v["dtype"])
    return out


def build(p: dict):
    fmt, dt, acc = p["format"], p["dtype"], p["accumulate"]
    T = B.ctype(dt)
    entry = "spmv_" + fmt
    out_len = "NC" if fmt == "csr_t" else "R"
    x_len = "R" if fmt == "csr_t" else "NC"
    sig = [B.scalar("rows", "int32", "R"), B.scalar("ncols", "int32", "NC")]
    if fmt.startswith("csr"):
        sig += [B.scalar("nnz", "int32", "NNZ"), B.inp("row_ptr", "int32", ["R+1"], init="csr_rowptr(NNZ)"),
                B.inp("col_idx", "int32", ["NNZ"], init="randint(0, NC)"), B.inp("vals", dt, ["NNZ"])]
    else:
        shape = ["R", "K"] if fmt == "ell_row" else ["K", "R"]
        sig += [B.inp("col_idx", "int32", shape, init="randint(-(NC//4), NC)"),  # slots per row: a constant, SLOTS
                B.inp("vals", dt, shape)]
    sig += [B.scalar("alpha", dt, 1.25)]
    if acc:
        sig.append(B.scalar("beta", dt, 0.5))
    sig += [B.inp("x", dt, [x_len])]
    sig.append(B.inout("y", dt, [out_len]) if acc else B.out("y", dt, [out_len]))
    fin = "alpha * s + beta * y[r]" if acc else "alpha * s"
    slot = "(long long)r * k + q" if fmt == "ell_row" else "(long long)q * rows + r"
    if fmt == "csr":
        row_sum = "for (int e = row_ptr[r]; e < row_ptr[r + 1]; ++e) s += vals[e] * x[col_idx[e]];"
    elif fmt.startswith("ell"):
        row_sum = f"for (int q = 0; q < k; ++q) {{ int c = col_idx[{slot}]; if (c >= 0) s += vals[{slot}] * x[c]; }}"
    if fmt == "csr_t":
        scale = "for (int c = 0; c < ncols; ++c) y[c] = " + ("beta * y[c];" if acc else "0;")
        c_body = f"""
{scale}
for (int r = 0; r < rows; ++r)
  for (int e = row_ptr[r]; e < row_ptr[r + 1]; ++e) y[col_idx[e]] += alpha * vals[e] * x[r];"""
    else:
        c_body = f"""
for (int r = 0; r < rows; ++r) {{
  {T} s = 0;
  {row_sum}
  y[r] = {fin};
}}"""
    source = B.c_function(entry, sig, c_body)
    kargs = B.params_list(sig)
    call = ", ".join(a.name for a in sig)
    impls = []
    if fmt == "csr_t":
        pre_k = f"""
__global__ void scale_y(int ncols, {T} beta, {T}* y) {{
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c < ncols) y[c] = {"beta * y[c]" if acc else "0"};
}}"""
        pre = f"scale_y<<<{B.grid1d('ncols')}, 256, 0, stream>>>(ncols, {'beta' if acc else B.lit(0, dt)}, y);\n"
        scatter = "atomicAdd(&y[col_idx[e]], alpha * vals[e] * x[r]);"
        impls.append(("naive", ["naive"], lambda proto: B.cuda_unit(proto, pre_k + f"""
__global__ void spmv_t_naive({kargs}) {{
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  for (int e = row_ptr[r]; e < row_ptr[r + 1]; ++e) {scatter}
}}""", pre + f"spmv_t_naive<<<{B.grid1d('rows', 128)}, 128, 0, stream>>>({call});"), {"baseline": True}))
        impls.append(("grid_stride", ["grid_stride"], lambda proto: B.cuda_unit(proto, pre_k + f"""
__global__ void spmv_t_grid({kargs}) {{
  for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += gridDim.x * blockDim.x)
    for (int e = row_ptr[r]; e < row_ptr[r + 1]; ++e) {scatter}
}}""", pre + f"spmv_t_grid<<<{B.grid1d('rows', 128, '1024')}, 128, 0, stream>>>({call});")))
        impls.append(("warp_per_row", ["coalesced"], lambda proto: B.cuda_unit(proto, pre_k + f"""
__global__ void spmv_t_warp({kargs}) {{
  int r = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
  if (r >= rows) return;
  for (int e = row_ptr[r] + lane; e < row_ptr[r + 1]; e += 32) {scatter}
}}""", pre + f"spmv_t_warp<<<{B.grid1d('(long long)rows * 32', 256)}, 256, 0, stream>>>({call});")))
    else:
        store = f"y[r] = {fin};"
        impls.append(("naive", ["naive"] + (["coalesced"] if fmt == "ell_col" else []),
                      lambda proto: B.cuda_unit(proto, f"""
__global__ void spmv_naive({kargs}) {{
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  {T} s = 0;
  {row_sum}
  {store}
}}""", f"spmv_naive<<<{B.grid1d('rows', 128)}, 128, 0, stream>>>({call});"), {"baseline": True}))
        impls.append(("grid_stride", ["grid_stride"], lambda proto: B.cuda_unit(proto, f"""
__global__ void spmv_grid({kargs}) {{
  for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += gridDim.x * blockDim.x) {{
    {T} s = 0;
    {row_sum}
    {store}
  }}
}}""", f"spmv_grid<<<{B.grid1d('rows', 128, '1024')}, 128, 0, stream>>>({call});")))
        if fmt == "csr":
            lane_sum = "for (int e = row_ptr[r] + lane; e < row_ptr[r + 1]; e += 32) s += vals[e] * x[col_idx[e]];"
        else:
            lane_sum = (f"for (int q = lane; q < k; q += 32) {{ int c = col_idx[{slot}]; "
                        f"if (c >= 0) s += vals[{slot}] * x[c]; }}")
        impls.append(("warp_per_row", ["warp_shuffle"] + (["coalesced"] if fmt != "ell_col" else []),
                      lambda proto: B.cuda_unit(proto, f"""
__global__ void spmv_warp({kargs}) {{
  int r = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
  if (r >= rows) return;
  {T} s = 0;
  {lane_sum}
  for (int off = 16; off > 0; off /= 2) s += __shfl_down_sync(0xffffffffu, s, off);
  if (lane == 0) {store}
}}""", f"spmv_warp<<<{B.grid1d('(long long)rows * 32', 256)}, 256, 0, stream>>>({call});")))
        if fmt.startswith("ell"):
            impls.append(("unrolled", ["unrolled"] + (["coalesced"] if fmt == "ell_col" else []),
                          lambda proto: B.cuda_unit(proto, f"""
__global__ void spmv_unrolled({kargs}) {{
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  {T} s = 0;
  int q = 0;
  for (; q + 3 < k; q += 4) {{
#pragma unroll
    for (int u = 0; u < 4; ++u) {{
      long long at = {slot.replace("q", "(q + u)")};
      int c = col_idx[at];
      if (c >= 0) s += vals[at] * x[c];
    }}
  }}
  for (; q < k; ++q) {{ int c = col_idx[{slot}]; if (c >= 0) s += vals[{slot}] * x[c]; }}
  {store}
}}""", f"spmv_unrolled<<<{B.grid1d('rows', 128)}, 128, 0, stream>>>({call});")))
    if B.wrong_for(p["name"]):
        if fmt.startswith("csr"):
            impls.append(B.mutant(impls[0], "e < row_ptr[r + 1];", "e < row_ptr[r + 1] - 1;", "off_by_one"))
        else:
            impls.append(B.mutant(impls[0], "q < k;", "q < k - 1;", "off_by_one"))
    if fmt.startswith("ell"):
        consts = {"k": ("SLOTS", p["per_row"] + (p["odd"] % 3))}
        source = B.bake(source, consts)
        impls = [(spec[0], spec[1], B.baked(spec[2], consts), *spec[3:]) for spec in impls]
    o, pr = p["odd"], p["per_row"]
    rect = p["shape"] == "rect"
    cfg = []
    for rows in (60 + o, 16384 + o, (1 << 21) // max(1, pr // 4) + o):
        nc = rows * 2 + 3 if rect else rows
        c = {"R": rows, "NC": nc}
        if fmt.startswith("csr"):
            c["NNZ"] = rows * pr
        else:
            c["K"] = pr + (o % 3)
        cfg.append(c)
    configs = B.configs3(*cfg)
    nz = "NNZ" if fmt.startswith("csr") else "R*K"
    nb = B.DTYPES_BYTES[dt]
    return B.make_task(tid=p["name"], track="c2cuda", entry=entry, source=source, signature=sig,
                       configs=configs, tol=B.tolerance(dt, 30), flops=f"2*{nz}",
                       min_bytes=f"{nb + 4}*{nz}+{nb}*(R+NC)", family="spmv", impls=impls)
