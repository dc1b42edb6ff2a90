"""c2cuda family `histogram`: counts (int32) or weighted sums (float32) of N values in B bins, for
integer keys (already bin ids, or mod B) and float values binned uniformly on [lo, hi) with clamping
or dropping of out-of-range values.

Implementations: naive (one thread per value, global atomicAdd; baseline), smem_tiled (a private
shared-memory histogram per block, merged with atomics), grid_stride (a capped grid of privatised
blocks). Negative: the clamp of the last bin is off by one.
"""
from __future__ import annotations

import random

from kernels_harness.datasets import base as B


def variants(rng: random.Random) -> list[dict]:
    out = []
    for key in ("int_id", "int_mod", "float_clamp", "float_drop"):
        for weighted in (False, True):
            for bins in (8, 16, 64, 100, 256, 500, 1000, 2048):
                out.append({"key": key, "weighted": weighted, "bins": bins, "odd": rng.randrange(1, 200),
                            "wrong": key == "float_clamp" and rng.random() < 0.45})
    for i, v in enumerate(out):
        v["name"] = B.slug("hist", i, v["key"], "weighted" if v["weighted"] else "count", f"b{v['bins']}")
    return out


def build(p: dict):
    key, weighted, nb = p["key"], p["weighted"], p["bins"]
    entry = "histogram" + ("_weighted" if weighted else "")
    hdt = "float32" if weighted else "int32"
    H = B.ctype(hdt)
    if key.startswith("int"):
        init = "randint(0, NB)" if key == "int_id" else "randint(0, 1000000)"
        xarg = B.inp("x", "int32", ["N"], init=init)
    else:
        xarg = B.inp("x", "float32", ["N"], init="uniform(-1.2, 1.2)" if key == "float_clamp" else "normal(0, 0.6)")
    sig = [B.scalar("n", "int32", "N"), xarg]  # the bin count is a compile-time constant, NBINS
    if weighted:
        sig.append(B.inp("w", "float32", ["N"], init="uniform(0, 1)"))
    sig.append(B.out("hist", hdt, ["NB"]))

    def bin_of(clamp_hi="nbins - 1"):
        if key == "int_id":
            return "int b = x[i];"
        if key == "int_mod":
            return "int b = x[i] % nbins;"
        core = "int b = (int)floorf((x[i] + 1.0f) * 0.5f * (float)nbins);"
        if key == "float_clamp":
            return core + f" if (b < 0) b = 0; if (b > {clamp_hi}) b = {clamp_hi};"
        return core + " if (b < 0 || b >= nbins) continue;"

    inc = "w[i]" if weighted else "1"
    c_body = f"""
for (int b = 0; b < nbins; ++b) hist[b] = 0;
for (int i = 0; i < n; ++i) {{
  {bin_of()}
  hist[b] += {inc};
}}"""
    source = B.c_function(entry, sig, c_body)
    kargs = B.params_list(sig)
    call = ", ".join(a.name for a in sig)
    # the per-element bin code uses `continue` for dropped values: wrap in a one-trip loop on the GPU
    def per_elem(target, clamp_hi="nbins - 1"):
        return f"do {{ {bin_of(clamp_hi)} atomicAdd(&{target}[b], ({H}){inc}); }} while (0);"

    zero = f"cudaMemsetAsync(hist, 0, sizeof({H}) * (size_t)nbins, stream);"

    def naive(clamp_hi="nbins - 1"):
        return lambda proto: B.cuda_unit(proto, f"""
__global__ void hist_naive({kargs}) {{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {per_elem("hist", clamp_hi)}
}}""", f"{zero}\nif (n > 0) hist_naive<<<{B.grid1d('n')}, 256, 0, stream>>>({call});")

    def private(name, grid, strategies):
        return (name, strategies, lambda proto: B.cuda_unit(proto, f"""
__global__ void hist_private({kargs}) {{
  extern __shared__ unsigned char smem_raw[];
  {H}* local = reinterpret_cast<{H}*>(smem_raw);
  for (int b = threadIdx.x; b < nbins; b += blockDim.x) local[b] = 0;
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {{
    {per_elem("local")}
  }}
  __syncthreads();
  for (int b = threadIdx.x; b < nbins; b += blockDim.x) {{
    {H} v = local[b];
    if (v != 0) atomicAdd(&hist[b], v);
  }}
}}""", f"{zero}\nif (n > 0) hist_private<<<{grid}, 256, sizeof({H}) * (size_t)nbins, stream>>>({call});"))

    impls = [("naive", ["naive"], naive(), {"baseline": True}),
             private("smem_private", B.grid1d("n"), ["smem_tiled"]),
             private("smem_grid_stride", B.grid1d("n", 256, "264"), ["smem_tiled", "grid_stride"])]
    if p["wrong"]:
        impls.append(("naive_clamp_off_by_one", ["naive"], naive("nbins - 2"), {"defect": "off_by_one"}))
    consts = {"nbins": ("NBINS", nb)}
    source = B.bake(source, consts)
    impls = [(spec[0], spec[1], B.baked(spec[2], consts), *spec[3:]) for spec in impls]
    o = p["odd"]
    configs = B.configs3({"N": 3000 + o, "NB": nb}, {"N": 1 << 20, "NB": nb}, {"N": (1 << 25) + o, "NB": nb})
    tol = {"atol": 1e-2, "rtol": 1e-3} if weighted else {"atol": 0, "rtol": 0}
    return B.make_task(tid=p["name"], track="c2cuda", entry=entry, source=source, signature=sig,
                       configs=configs, tol=tol, flops="N", min_bytes=f"{8 if weighted else 4}*N",
                       family="histogram", impls=impls)
