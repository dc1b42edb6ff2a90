"""c2cuda family `scan`: inclusive or exclusive prefix sums / maxima / minima along the rows of a
[R, C] matrix, for float32, float64 and int32 (ints exact).

Implementations: naive (one thread per row, sequential, baseline), warp_shuffle (one warp per row,
32-wide __shfl_up_sync scans with a running carry), smem_tiled (one block per row, Hillis-Steele
double-buffered scan of 256-element chunks with a carry). Negatives: missing barrier in the smem scan,
exclusive scan shifted by one (off_by_one).
"""
from __future__ import annotations

import random

from kernels_harness.datasets import base as B

OPS = ("sum", "max", "min")


def _ident(op, dt):
    if op == "sum":
        return B.lit(0, dt)
    big = {"float32": "FLT_MAX", "float64": "DBL_MAX", "int32": "INT_MAX"}[dt]
    return f"-{big}" if op == "max" else big


def _comb(op, a, b):
    if op == "sum":
        return f"({a} + {b})"
    cmp = ">" if op == "max" else "<"
    return f"({a} {cmp} {b} ? {a} : {b})"


def variants(rng: random.Random) -> list[dict]:
    out = []
    for op in OPS:
        for dt in ("float32", "float64", "int32"):
            for kind in ("inclusive", "exclusive"):
                for regime in ("many_short", "square", "few_long"):
                    for stride in (1, 2):
                        out.append({"op": op, "dtype": dt, "kind": kind, "regime": regime,
                                    "stride": stride, "odd": rng.randrange(1, 31),
                                    "wrong": rng.random() < 0.25})
    for i, v in enumerate(out):
        v["name"] = B.slug("scan", i, v["kind"], v["op"], v["dtype"], v["regime"], f"s{v['stride']}")
    return out


def build(p: dict):
    op, dt, kind = p["op"], p["dtype"], p["kind"]
    T = B.ctype(dt)
    entry = f"{kind}_scan_{op}"
    # x rows have length C*S (every S-th element is scanned: a strided view); y is [R, C]
    sig = [B.scalar("rows", "int32", "R"), B.scalar("cols", "int32", "C"),  # the stride is a constant, STRIDE
           B.inp("x", dt, ["R", "C*S"], init="randint(-8, 9)" if dt == "int32" else ("normal(0, 1)" if op != "sum" else None)),
           B.out("y", dt, ["R", "C"])]
    I = _ident(op, dt)
    excl = kind == "exclusive"
    c_body = f"""
for (int r = 0; r < rows; ++r) {{
  const {T}* xr = x + (long long)r * cols * stride;
  {T}* yr = y + (long long)r * cols;
  {T} acc = {I};
  for (int j = 0; j < cols; ++j) {{
    {T} v = xr[(long long)j * stride];
    {"yr[j] = acc; acc = " + _comb(op, "acc", "v") + ";" if excl else "acc = " + _comb(op, "acc", "v") + "; yr[j] = acc;"}
  }}
}}"""
    source = B.c_function(entry, sig, c_body)
    kargs = B.params_list(sig)
    call = ", ".join(a.name for a in sig)

    def naive(shift_bug=False):
        store = ("yr[j] = acc; acc = " + _comb(op, "acc", "v") + ";") if excl else \
            ("acc = " + _comb(op, "acc", "v") + "; yr[j] = acc;")
        if shift_bug:  # writes the inclusive value into the exclusive output: off by one position
            store = "acc = " + _comb(op, "acc", "v") + "; yr[j] = acc;"
        return lambda proto: B.cuda_unit(proto, f"""
__global__ void scan_naive({kargs}) {{
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const {T}* xr = x + (long long)r * cols * stride;
  {T}* yr = y + (long long)r * cols;
  {T} acc = {I};
  for (int j = 0; j < cols; ++j) {{
    {T} v = xr[(long long)j * stride];
    {store}
  }}
}}""", f"scan_naive<<<{B.grid1d('rows', 64)}, 64, 0, stream>>>({call});")

    def warp(proto):
        return B.cuda_unit(proto, f"""
__global__ void scan_warp({kargs}) {{
  int r = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  int lane = threadIdx.x % 32;
  if (r >= rows) return;
  const {T}* xr = x + (long long)r * cols * stride;
  {T}* yr = y + (long long)r * cols;
  {T} carry = {I};
  for (int base = 0; base < cols; base += 32) {{
    int j = base + lane;
    {T} v = j < cols ? xr[(long long)j * stride] : {I};
    {T} inc = v;
    for (int off = 1; off < 32; off *= 2) {{
      {T} other = __shfl_up_sync(0xffffffffu, inc, off);
      if (lane >= off) inc = {_comb(op, "other", "inc")};
    }}
    {T} total = __shfl_sync(0xffffffffu, inc, 31);
    {T} ex = __shfl_up_sync(0xffffffffu, inc, 1);
    if (lane == 0) ex = {I};
    if (j < cols) yr[j] = {_comb(op, "carry", "ex" if excl else "inc")};
    carry = {_comb(op, "carry", "total")};
  }}
}}""", f"scan_warp<<<{B.grid1d('rows * 32', 128)}, 128, 0, stream>>>({call});")

    def block(barrier=True):
        sync = "__syncthreads();" if barrier else ""
        return lambda proto: B.cuda_unit(proto, f"""
__global__ void scan_block({kargs}) {{
  __shared__ {T} buf[2][256];
  __shared__ {T} s_carry;
  int r = blockIdx.x;
  int t = threadIdx.x;
  const {T}* xr = x + (long long)r * cols * stride;
  {T}* yr = y + (long long)r * cols;
  if (t == 0) s_carry = {I};
  __syncthreads();
  for (int base = 0; base < cols; base += 256) {{
    int j = base + t;
    int cur = 0;
    buf[0][t] = j < cols ? xr[(long long)j * stride] : {I};
    __syncthreads();
    for (int off = 1; off < 256; off *= 2) {{
      {T} v = buf[cur][t];
      if (t >= off) v = {_comb(op, "buf[cur][t - off]", "v")};
      buf[1 - cur][t] = v;
      cur = 1 - cur;
      {sync}
    }}
    {T} carry = s_carry;
    {T} mine = {"t > 0 ? buf[cur][t - 1] : " + I if excl else "buf[cur][t]"};
    if (j < cols) yr[j] = {_comb(op, "carry", "mine")};
    __syncthreads();
    if (t == 255) s_carry = {_comb(op, "carry", "buf[cur][255]")};
    __syncthreads();
  }}
}}""", f"if (rows > 0) scan_block<<<rows, 256, 0, stream>>>({call});")

    impls = [("naive", ["naive"], naive(), {"baseline": True}),
             ("warp_shuffle", ["warp_shuffle", "coalesced"], warp),
             ("block_smem", ["smem_tiled", "coalesced"], block())]
    if p["wrong"]:
        if excl:
            impls.append(("naive_shifted", ["naive"], naive(shift_bug=True), {"defect": "off_by_one"}))
        elif op == "sum":
            impls.append(("block_smem_nosync", ["smem_tiled"], block(False), {"defect": "missing_barrier"}))
        else:  # min/max are idempotent: a missing barrier can go unnoticed, so the negative is a boundary bug
            impls.append(B.mutant(impls[0], "j < cols; ++j) {", "j < cols - 1; ++j) {", "off_by_one"))
    consts = {"stride": ("STRIDE", p["stride"])}
    source = B.bake(source, consts)
    impls = [(spec[0], spec[1], B.baked(spec[2], consts), *spec[3:]) for spec in impls]
    o, S = p["odd"], p["stride"]
    if p["regime"] == "many_short":
        cfg = ({"R": 32 + o, "C": 48 + o}, {"R": 8192 + o, "C": 96 + o}, {"R": 131072 + o, "C": 128 + o})
    elif p["regime"] == "square":
        cfg = ({"R": 20 + o, "C": 40 + o}, {"R": 1024 + o, "C": 1024 + o}, {"R": 4096 + o, "C": 4096 + o})
    else:
        cfg = ({"R": 2, "C": 700 + o}, {"R": 64, "C": 65536 + o}, {"R": 512, "C": 131072 + o})
    configs = B.configs3(*[dict(c, S=S) for c in cfg])
    if dt == "int32":
        tol = {"atol": 0, "rtol": 0}
    else:  # y[C-1] of a sum scan sums C terms of x ~ uniform(-1, 1)
        tol = B.sum_tolerance(dt, 100, "C", 3 ** -0.5) if op == "sum" else B.tolerance(dt, 1)
    nb = B.DTYPES_BYTES[dt]
    return B.make_task(tid=p["name"], track="c2cuda", entry=entry, source=source, signature=sig,
                       configs=configs, tol=tol, flops="R*C", min_bytes=f"{2 * nb}*R*C",
                       family="scan", impls=impls)
