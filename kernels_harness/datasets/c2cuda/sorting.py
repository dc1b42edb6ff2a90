"""c2cuda family `sort_topk`: sort every row of an [R, C] matrix (ascending or descending; float32,
float64, int32 with ties) or take its top-k (values, or indices with ties broken by lower index),
for row lengths 32 to 2048 and k in {1, 4, 16}.

The order is a strict total order on (value, index) pairs, so every algorithm gives one answer.
Implementations: naive (one thread per row: insertion sort / k selection passes; baseline),
bitonic (one block per row, shared-memory bitonic network over the row padded to a power of two),
odd_even (sort: shared-memory odd-even transposition), rank (one thread per element counts the
elements ordered before it and scatters itself to that rank).
"""
from __future__ import annotations

import random

from kernels_harness.datasets import base as B

_MAX = {"float32": "FLT_MAX", "float64": "DBL_MAX", "int32": "INT_MAX"}


def variants(rng: random.Random) -> list[dict]:
    out = []
    for kind in ("sort_asc", "sort_desc"):
        for dt in ("float32", "float64", "int32"):
            for cols in (32, 64, 100, 256, 512, 1000, 2048):
                for rows in ("few_rows", "many_rows"):
                    out.append({"kind": kind, "dtype": dt, "cols": cols, "k": 0, "rows": rows})
    for kind in ("topk_values", "topk_indices"):
        for dt in B.FLOAT_DTYPES:
            for k in (1, 4, 16):
                for cols in (100, 1000, 2000):
                    for rows in ("few_rows", "many_rows"):
                        out.append({"kind": kind, "dtype": dt, "cols": cols + rng.randrange(0, 7), "k": k,
                                    "rows": rows})
    for i, v in enumerate(out):
        v["name"] = B.slug("sort", i, v["kind"], f"k{v['k']}" if v["k"] else "", f"c{v['cols']}", v["rows"],
                           v["dtype"])
    return out


def build(p: dict):
    kind, dt, C, K = p["kind"], p["dtype"], p["cols"], p["k"]
    T = B.ctype(dt)
    desc = kind != "sort_asc"
    topk = kind.startswith("topk")
    entry = kind if not topk else f"top{K}_" + kind.split("_")[1]
    sig = [B.scalar("rows", "int32", "R")]  # row length and k are compile-time constants, COLS and TOPK
    sig.append(B.inp("x", dt, ["R", "C"], init="randint(-50, 50)" if dt == "int32" else "normal(0, 1)"))
    out_dt = "int32" if kind == "topk_indices" else dt
    sig.append(B.out("y", out_dt, ["R", "K" if topk else "C"]))
    cmp = ">" if desc else "<"
    # before(av, ai, bv, bi): a comes strictly before b in the target order
    before = f"(av {cmp} bv || (av == bv && ai < bi))"
    helper = f"static int before({T} av, int ai, {T} bv, int bi) {{ return {before}; }}"
    dev_helper = f"__device__ __forceinline__ bool before({T} av, int ai, {T} bv, int bi) {{ return {before}; }}"
    pick = "y[(long long)r * k + q] = " + ("bi;" if kind == "topk_indices" else "bv;")
    if topk:
        c_body = f"""
for (int r = 0; r < rows; ++r) {{
  const {T}* xr = x + (long long)r * cols;
  int pi = -1;
  {T} pv = 0;
  for (int q = 0; q < k; ++q) {{
    int bi = -1;
    {T} bv = 0;
    for (int m = 0; m < cols; ++m) {{
      if (pi >= 0 && !before(pv, pi, xr[m], m)) continue;
      if (bi < 0 || before(xr[m], m, bv, bi)) {{ bi = m; bv = xr[m]; }}
    }}
    {pick}
    pi = bi; pv = bv;
  }}
}}"""
    else:
        c_body = f"""
for (int r = 0; r < rows; ++r) {{
  {T}* yr = y + (long long)r * cols;
  for (int j = 0; j < cols; ++j) yr[j] = x[(long long)r * cols + j];
  for (int j = 1; j < cols; ++j) {{
    {T} v = yr[j];
    int m = j - 1;
    while (m >= 0 && yr[m] {">" if not desc else "<"} v) {{ yr[m + 1] = yr[m]; --m; }}
    yr[m + 1] = v;
  }}
}}"""
    source = B.c_function(entry, sig, c_body, helpers=helper if topk else "")
    kargs = B.params_list(sig)
    call = ", ".join(a.name for a in sig)
    n_out = "k" if topk else "cols"

    def write(rank: str, val: str, idx: str) -> str:
        if kind == "topk_indices":
            return f"y[(long long)r * k + {rank}] = {idx};"
        return f"y[(long long)r * {n_out} + {rank}] = {val};"

    impls = []
    if topk:
        impls.append(("naive", ["naive"], lambda proto: B.cuda_unit(proto, dev_helper + f"""
__global__ void topk_naive({kargs}) {{
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const {T}* xr = x + (long long)r * cols;
  int pi = -1;
  {T} pv = 0;
  for (int q = 0; q < k; ++q) {{
    int bi = -1;
    {T} bv = 0;
    for (int m = 0; m < cols; ++m) {{
      if (pi >= 0 && !before(pv, pi, xr[m], m)) continue;
      if (bi < 0 || before(xr[m], m, bv, bi)) {{ bi = m; bv = xr[m]; }}
    }}
    {write("q", "bv", "bi")}
    pi = bi; pv = bv;
  }}
}}""", f"topk_naive<<<{B.grid1d('rows', 64)}, 64, 0, stream>>>({call});"), {"baseline": True}))
    else:
        impls.append(("naive", ["naive"], lambda proto: B.cuda_unit(proto, f"""
__global__ void sort_naive({kargs}) {{
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  {T}* yr = y + (long long)r * cols;
  for (int j = 0; j < cols; ++j) yr[j] = x[(long long)r * cols + j];
  for (int j = 1; j < cols; ++j) {{
    {T} v = yr[j];
    int m = j - 1;
    while (m >= 0 && yr[m] {">" if not desc else "<"} v) {{ yr[m + 1] = yr[m]; --m; }}
    yr[m + 1] = v;
  }}
}}""", f"sort_naive<<<{B.grid1d('rows', 64)}, 64, 0, stream>>>({call});"), {"baseline": True}))
    pad_v = f"-{_MAX[dt]}" if desc else _MAX[dt]
    limit = "k" if topk else "cols"
    impls.append(("bitonic", ["smem_tiled"], lambda proto: B.cuda_unit(proto, dev_helper + f"""
__global__ void sort_bitonic({kargs}) {{
  __shared__ {T} sv[2048];
  __shared__ int si[2048];
  int r = blockIdx.x, t0 = threadIdx.x;
  int P = 1;
  while (P < cols) P <<= 1;
  for (int t = t0; t < P; t += blockDim.x) {{
    sv[t] = t < cols ? x[(long long)r * cols + t] : {pad_v};
    si[t] = t < cols ? t : INT_MAX;
  }}
  __syncthreads();
  for (int kk = 2; kk <= P; kk <<= 1) {{
    for (int j = kk >> 1; j > 0; j >>= 1) {{
      for (int t = t0; t < P; t += blockDim.x) {{
        int o = t ^ j;
        if (o > t) {{
          bool up = (t & kk) == 0;
          bool swap = up ? before(sv[o], si[o], sv[t], si[t]) : before(sv[t], si[t], sv[o], si[o]);
          if (swap) {{
            {T} tv = sv[t]; sv[t] = sv[o]; sv[o] = tv;
            int ti = si[t]; si[t] = si[o]; si[o] = ti;
          }}
        }}
      }}
      __syncthreads();
    }}
  }}
  for (int t = t0; t < {limit}; t += blockDim.x) {{ {write("t", "sv[t]", "si[t]")} }}
}}""", f"if (rows > 0) sort_bitonic<<<rows, 256, 0, stream>>>({call});")))
    if not topk:
        impls.append(("odd_even", ["smem_tiled"], lambda proto: B.cuda_unit(proto, dev_helper + f"""
__global__ void sort_odd_even({kargs}) {{
  __shared__ {T} sv[2048];
  __shared__ int si[2048];
  int r = blockIdx.x;
  for (int t = threadIdx.x; t < cols; t += blockDim.x) {{ sv[t] = x[(long long)r * cols + t]; si[t] = t; }}
  __syncthreads();
  for (int phase = 0; phase < cols; ++phase) {{
    for (int a = 2 * threadIdx.x + (phase & 1); a + 1 < cols; a += 2 * blockDim.x) {{
      if (before(sv[a + 1], si[a + 1], sv[a], si[a])) {{
        {T} tv = sv[a]; sv[a] = sv[a + 1]; sv[a + 1] = tv;
        int ti = si[a]; si[a] = si[a + 1]; si[a + 1] = ti;
      }}
    }}
    __syncthreads();
  }}
  for (int t = threadIdx.x; t < cols; t += blockDim.x) y[(long long)r * cols + t] = sv[t];
}}""", f"if (rows > 0) sort_odd_even<<<rows, 64, 0, stream>>>({call});")))
    impls.append(("rank", ["coalesced"], lambda proto: B.cuda_unit(proto, dev_helper + f"""
__global__ void sort_rank({kargs}) {{
  long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= (long long)rows * cols) return;
  int r = (int)(e / cols), j = (int)(e % cols);
  const {T}* xr = x + (long long)r * cols;
  {T} v = xr[j];
  int rank = 0;
  for (int m = 0; m < cols; ++m) rank += before(xr[m], m, v, j);
  if (rank < {limit}) {write("rank", "v", "j")}
}}""", f"if (rows > 0) sort_rank<<<{B.grid1d('(long long)rows * cols')}, 256, 0, stream>>>({call});")))
    if B.wrong_for(p["name"]):
        impls.append(B.mutant(impls[1], "      __syncthreads();\n    }\n  }", "    }\n  }", "missing_barrier"))
    consts = {"cols": ("COLS", C)}
    if topk:
        consts["k"] = ("TOPK", K)
    source = B.bake(source, consts)
    impls = [(spec[0], spec[1], B.baked(spec[2], consts), *spec[3:]) for spec in impls]
    few = p["rows"] == "few_rows"
    rows = (1 if not topk else 2, 64, max(1024, (1 << 22) // C)) if few else (2, 2048, max(16384, (1 << 24) // C))
    cfgs = [{"R": r, "C": C} for r in rows]
    if topk:
        cfgs = [dict(c, K=K) for c in cfgs]
    configs = B.configs3(*cfgs)
    tol = {"atol": 0, "rtol": 0}
    nb = B.DTYPES_BYTES[dt]
    return B.make_task(tid=p["name"], track="c2cuda", entry=entry, source=source, signature=sig,
                       configs=configs, tol=tol, flops="R*C*log2(C)", min_bytes=f"{2 * nb}*R*C",
                       family="sort_topk", impls=impls)
