"""c2cuda family `conv`: 1-D convolutions (valid, same with zero padding, same with clamped edges),
2-D single-channel convolutions (K x K, stride 1 or 2), depthwise 2-D convolutions and
multi-channel convolution layers (NCHW input, [CO, CI, K, K] weights, bias), float32/float64.

Implementations: naive (one thread per output, baseline), smem_tiled (the filter, or the filters of
one output channel, staged in shared memory), unrolled (the filter size is a compile-time constant
and the tap loops are unrolled), grid_stride (flattened outputs).
"""
from __future__ import annotations

import random

from kernels_harness.datasets import base as B


def variants(rng: random.Random) -> list[dict]:
    out = []
    for mode in ("valid", "same_zero", "same_clamp"):
        for k in (3, 7, 15, 31):
            for dt in B.FLOAT_DTYPES:
                out.append({"kind": "conv1d", "mode": mode, "K": k, "stride": 1, "dtype": dt, "C": (1, 1)})
        for k in (3, 5, 7):
            for s in (1, 2):
                for dt in B.FLOAT_DTYPES:
                    out.append({"kind": "conv2d", "mode": mode, "K": k, "stride": s, "dtype": dt, "C": (1, 1)})
    for mode in ("valid", "same_zero"):
        for k in (3, 5, 7):
            for dt in B.FLOAT_DTYPES:
                for ch in (8, 64):
                    out.append({"kind": "depthwise", "mode": mode, "K": k, "stride": 1, "dtype": dt, "C": (ch, ch)})
        for k in (1, 3, 5):
            for s in (1, 2):
                for dt in B.FLOAT_DTYPES:
                    for ch in ((3, 16), (16, 32), (64, 64)):
                        out.append({"kind": "layer", "mode": mode, "K": k, "stride": s, "dtype": dt, "C": ch})
    for i, v in enumerate(out):
        v["odd"] = rng.randrange(1, 17)
        v["name"] = B.slug("conv", i, v["kind"], v["mode"], f"k{v['K']}", f"s{v['stride']}",
                           f"c{v['C'][0]}x{v['C'][1]}", v["dtype"])
    return out


def build(p: dict):
    kind, mode, K, S, dt = p["kind"], p["mode"], p["K"], p["stride"], p["dtype"]
    T = B.ctype(dt)
    P = 0 if mode == "valid" else K // 2
    one_d = kind == "conv1d"
    entry = {"conv1d": "conv1d", "conv2d": "conv2d", "depthwise": "depthwise_conv2d", "layer": "conv2d_layer"}[kind]
    entry += "_" + mode
    if one_d:
        sig = [B.scalar("n", "int32", "N"), B.scalar("on", "int32", f"(N+{2 * P}-{K})//{S}+1"),
               B.inp("x", dt, ["N"]), B.inp("w", dt, [K]), B.out("y", dt, [f"(N+{2 * P}-{K})//{S}+1"])]
    else:
        oh, ow = f"(H+{2 * P}-{K})//{S}+1", f"(W+{2 * P}-{K})//{S}+1"
        sig = [B.scalar("h", "int32", "H"), B.scalar("w_", "int32", "W"), B.scalar("oh", "int32", oh),
               B.scalar("ow", "int32", ow)]
        if kind == "conv2d":
            sig += [B.inp("x", dt, ["H", "W"]), B.inp("wt", dt, [K, K]), B.out("y", dt, [oh, ow])]
        elif kind == "depthwise":
            sig = [B.scalar("nb", "int32", "NB"), B.scalar("ch", "int32", "CH")] + sig
            sig += [B.inp("x", dt, ["NB", "CH", "H", "W"]), B.inp("wt", dt, ["CH", K, K]),
                    B.out("y", dt, ["NB", "CH", oh, ow])]
        else:
            sig = [B.scalar("nb", "int32", "NB"), B.scalar("ci", "int32", "CI"), B.scalar("co", "int32", "CO")] + sig
            sig += [B.inp("x", dt, ["NB", "CI", "H", "W"]), B.inp("wt", dt, ["CO", "CI", K, K]),
                    B.inp("bias", dt, ["CO"]), B.out("y", dt, ["NB", "CO", oh, ow])]

    # input fetch with the mode's boundary rule: value of x at (plane base, yy, xx)
    if one_d:
        if mode == "same_clamp":
            fetch = "x[ix < 0 ? 0 : (ix >= n ? n - 1 : ix)]"
        else:
            fetch = "((ix >= 0 && ix < n) ? x[ix] : 0)"
        tap = f"{{ int ix = o * {S} + k - {P}; s += {fetch} * w[k]; }}"
        loops = f"for (int k = 0; k < {K}; ++k) {tap}"
        per_out = f"{T} s = 0;\n  {loops}\n  y[o] = s;"
        c_body = f"for (int o = 0; o < on; ++o) {{\n  {per_out}\n}}"
        out_count = "on"
        decode = "int o = (int)e;"
    else:
        if mode == "same_clamp":
            fetch = "plane[(long long)(iy < 0 ? 0 : (iy >= h ? h - 1 : iy)) * w_ + (ix < 0 ? 0 : (ix >= w_ ? w_ - 1 : ix))]"
        else:
            fetch = "((iy >= 0 && iy < h && ix >= 0 && ix < w_) ? plane[(long long)iy * w_ + ix] : 0)"
        tap = (f"{{ int iy = oy * {S} + ky - {P}, ix = ox * {S} + kx - {P}; "
               f"s += {fetch} * filt[ky * {K} + kx]; }}")
        taps = f"for (int ky = 0; ky < {K}; ++ky)\n    for (int kx = 0; kx < {K}; ++kx) {tap}"
        if kind == "conv2d":
            per_out = (f"const {T}* plane = x; const {T}* filt = wt;\n  {T} s = 0;\n  {taps}\n"
                       f"  y[(long long)oy * ow + ox] = s;")
            out_count = "(long long)oh * ow"
            decode = "int ox = (int)(e % ow), oy = (int)(e / ow);"
        elif kind == "depthwise":
            per_out = (f"const {T}* plane = x + ((long long)b * ch + c) * h * w_; const {T}* filt = wt + (long long)c * {K * K};\n"
                       f"  {T} s = 0;\n  {taps}\n  y[(((long long)b * ch + c) * oh + oy) * ow + ox] = s;")
            out_count = "(long long)nb * ch * oh * ow"
            decode = ("int ox = (int)(e % ow), oy = (int)((e / ow) % oh), c = (int)((e / ((long long)ow * oh)) % ch), "
                      "b = (int)(e / ((long long)ow * oh * ch));")
        else:
            per_out = (f"{T} s = bias[c];\n  for (int q = 0; q < ci; ++q) {{\n"
                       f"    const {T}* plane = x + ((long long)b * ci + q) * h * w_; "
                       f"const {T}* filt = wt + ((long long)c * ci + q) * {K * K};\n    {taps}\n  }}\n"
                       f"  y[(((long long)b * co + c) * oh + oy) * ow + ox] = s;")
            out_count = "(long long)nb * co * oh * ow"
            decode = ("int ox = (int)(e % ow), oy = (int)((e / ow) % oh), c = (int)((e / ((long long)ow * oh)) % co), "
                      "b = (int)(e / ((long long)ow * oh * co));")
        c_body = f"for (long long e = 0; e < {out_count}; ++e) {{\n  {decode}\n  {per_out}\n}}"
    source = B.c_function(entry, sig, c_body)
    kargs = B.params_list(sig)
    call = ", ".join(a.name for a in sig)

    def flat(name, body_per_out, grid_cap=None, pre=""):
        loop = ("for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total; "
                "e += (long long)gridDim.x * blockDim.x) {") if grid_cap else \
            "long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n  if (e < total) {"
        return lambda proto: B.cuda_unit(proto, f"""
__global__ void {name}({kargs}) {{
  long long total = {out_count};
  {loop}
    {decode}
    {body_per_out}
  }}
}}""", f"if ({out_count} > 0) {name}<<<{B.grid1d(out_count, 256, grid_cap)}, 256, 0, stream>>>({call});")

    unrolled_body = per_out.replace(f"for (int k = 0; k < {K}; ++k)", f"#pragma unroll\n  for (int k = 0; k < {K}; ++k)")
    unrolled_body = unrolled_body.replace(f"for (int ky = 0; ky < {K}; ++ky)", f"\n#pragma unroll\n  for (int ky = 0; ky < {K}; ++ky)")
    unrolled_body = unrolled_body.replace(f"for (int kx = 0; kx < {K}; ++kx)", f"\n#pragma unroll\n    for (int kx = 0; kx < {K}; ++kx)")
    impls = [("naive", ["naive", "coalesced"], flat("conv_naive", per_out), {"baseline": True}),
             ("grid_stride", ["grid_stride"], flat("conv_grid", per_out, "4096")),
             ("unrolled", ["unrolled"], flat("conv_unrolled", unrolled_body))]
    # smem: stage the filter(s) used by the block in shared memory (layer: one output channel per block row)
    if one_d:
        smem_body = per_out.replace("* w[k]", "* ws[k]")
        stage = f"__shared__ {T} ws[{K}];\n  for (int t = threadIdx.x; t < {K}; t += blockDim.x) ws[t] = w[t];\n  __syncthreads();"
    elif kind == "conv2d":
        smem_body = per_out.replace("const T* filt = wt;".replace("T", T), f"const {T}* filt = ws;")
        stage = f"__shared__ {T} ws[{K * K}];\n  for (int t = threadIdx.x; t < {K * K}; t += blockDim.x) ws[t] = wt[t];\n  __syncthreads();"
    else:
        smem_body = None
    if smem_body is not None:
        impls.append(("smem_filter", ["smem_tiled"], lambda proto: B.cuda_unit(proto, f"""
__global__ void conv_smem({kargs}) {{
  {stage}
  long long total = {out_count};
  long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (e < total) {{
    {decode}
    {smem_body}
  }}
}}""", f"if ({out_count} > 0) conv_smem<<<{B.grid1d(out_count, 256)}, 256, 0, stream>>>({call});")))
    else:
        # one block per (tile of 256 output pixels, channel, batch): the channel's filters in shared memory
        nfilt = f"ci * {K * K}" if kind == "layer" else f"{K * K}"
        fbase = f"(long long)c * ci * {K * K}" if kind == "layer" else f"(long long)c * {K * K}"
        body = per_out.replace(f"filt = wt + ((long long)c * ci + q) * {K * K}", f"filt = ws + q * {K * K}") \
            .replace(f"filt = wt + (long long)c * {K * K}", "filt = ws")
        nch = "co" if kind == "layer" else "ch"
        impls.append(("smem_filter", ["smem_tiled"], lambda proto: B.cuda_unit(proto, f"""
__global__ void conv_smem({kargs}) {{
  extern __shared__ unsigned char smem_raw[];
  {T}* ws = reinterpret_cast<{T}*>(smem_raw);
  int c = blockIdx.y, b = blockIdx.z;
  for (int t = threadIdx.x; t < {nfilt}; t += blockDim.x) ws[t] = wt[{fbase} + t];
  __syncthreads();
  long long pix = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (pix >= (long long)oh * ow) return;
  int ox = (int)(pix % ow), oy = (int)(pix / ow);
  {body}
}}""", f"if ((long long)oh * ow > 0 && nb > 0) conv_smem<<<dim3((unsigned)(((long long)oh * ow + 255) / 256), {nch}, nb), 256, "
            f"sizeof({T}) * {nfilt}, stream>>>({call});")))
    if B.wrong_for(p["name"]):
        old = f"k < {K}; ++k)" if one_d else f"kx < {K}; ++kx)"
        impls.append(B.mutant(impls[0], old, old.replace(f"< {K};", f"< {K} - 1;"), "off_by_one"))
    o = p["odd"]
    if one_d:
        cfg = ({"N": 500 + o}, {"N": (1 << 20) + o}, {"N": (1 << 24) + o})
    elif kind == "conv2d":
        cfg = ({"H": 30 + o, "W": 40 + o}, {"H": 1024 + o, "W": 1024 + o}, {"H": 4096 + o, "W": 4096 + o})
    else:
        c0, c1 = p["C"]
        ch = {"CH": c0} if kind == "depthwise" else {"CI": c0, "CO": c1}
        big = 256 if c0 <= 16 else 128
        small_ch = {k: min(v, 8) for k, v in ch.items()}  # the emulated config stays well under a second
        cfg = (dict(NB=1, H=9 + o, W=11 + o, **small_ch), dict(NB=4, H=64 + o, W=64 + o, **ch),
               dict(NB=16, H=big + o, W=big + o, **ch))
    configs = B.configs3(*cfg)
    nb_ = B.DTYPES_BYTES[dt]
    if one_d:
        flops, mb = f"2*{K}*N", f"{2 * nb_}*N"
    elif kind == "conv2d":
        flops, mb = f"2*{K * K}*H*W//{S * S}", f"{2 * nb_}*H*W"
    elif kind == "depthwise":
        flops, mb = f"2*{K * K}*NB*CH*H*W", f"{2 * nb_}*NB*CH*H*W"
    else:
        flops, mb = f"2*{K * K}*NB*CI*CO*H*W//{S * S}", f"{nb_}*NB*(CI+CO)*H*W"
    return B.make_task(tid=p["name"], track="c2cuda", entry=entry, source=source, signature=sig,
                       configs=configs, tol=B.tolerance(dt, 30), flops=flops, min_bytes=mb, family="conv",
                       impls=impls)
