"""c2cuda family `image`: image processing on float32 or uint8 images with 1 or 3 interleaved
channels: box and Gaussian blurs, Sobel gradient magnitude (L2 or L1, optionally thresholded), resize
(nearest or bilinear, up, down or by an arbitrary factor) and grayscale conversion (interleaved or
planar input, BT.601 / BT.709 / average weights); clamped or mirrored borders.

Implementations: naive (one thread per output pixel on a 2-D grid, baseline), grid_stride
(flattened), unrolled (4 consecutive pixels per thread).
"""
from __future__ import annotations

import random

from kernels_harness.datasets import base as B

FILTERS = {"box3": [[1] * 3] * 3, "box5": [[1] * 5] * 5,
           "gauss3": [[1, 2, 1], [2, 4, 2], [1, 2, 1]],
           "gauss5": [[1, 4, 6, 4, 1], [4, 16, 24, 16, 4], [6, 24, 36, 24, 6], [4, 16, 24, 16, 4], [1, 4, 6, 4, 1]]}
GRAY = {"bt601": (0.299, 0.587, 0.114), "bt709": (0.2126, 0.7152, 0.0722), "average": (1 / 3, 1 / 3, 1 / 3)}


def variants(rng: random.Random) -> list[dict]:
    out = []
    for f in FILTERS:
        for dt in ("float32", "uint8"):
            for ch in (1, 3):
                for border in ("clamp", "mirror"):
                    out.append({"op": "blur", "filter": f, "dtype": dt, "ch": ch, "border": border})
    for norm in ("l2", "l1"):
        for dt in ("float32", "uint8"):
            for border in ("clamp", "mirror"):
                for thr in (False, True):
                    out.append({"op": "sobel", "filter": norm, "dtype": dt, "ch": 1, "border": border, "thr": thr})
    for interp in ("nearest", "bilinear"):
        for scale in ("up2", "down2", "x0.7", "x1.37"):
            for dt in ("float32", "uint8"):
                for ch in (1, 3):
                    out.append({"op": "resize", "filter": interp, "scale": scale, "dtype": dt, "ch": ch,
                                "border": "clamp"})
    for w in GRAY:
        for dt in ("float32", "uint8"):
            for layout in ("hwc", "chw"):
                out.append({"op": "gray", "filter": w, "dtype": dt, "ch": 3, "layout": layout, "border": "none"})
    for i, v in enumerate(out):
        v["odd"] = rng.randrange(1, 23)
        v["name"] = B.slug("image", i, v["op"], v["filter"], v.get("scale", ""), v.get("layout", ""),
                           f"c{v['ch']}", v["border"], "thr" if v.get("thr") else "", v["dtype"])
    return out


def _scale(s: str):
    return {"up2": (2, 1), "down2": (1, 2), "x0.7": (7, 10), "x1.37": (137, 100)}[s]


def build(p: dict):
    op, dt, ch, border = p["op"], p["dtype"], p["ch"], p["border"]
    u8 = dt == "uint8"
    init = "randint(0, 256)" if u8 else "uniform(0, 1)"
    entry = {"blur": p["filter"] + "_blur", "sobel": "sobel_" + p["filter"], "resize": "resize_" + p["filter"],
             "gray": "rgb_to_gray_" + p.get("layout", "")}[op]
    if op == "resize":
        num, den = _scale(p["scale"])
        oh, ow = f"H*{num}//{den}", f"W*{num}//{den}"
    else:
        oh, ow = "H", "W"
    out_ch = 1 if op in ("gray", "sobel") else ch
    in_shape = ["H", "W", ch] if op != "gray" or p.get("layout") == "hwc" else [3, "H", "W"]
    sig = [B.scalar("h", "int32", "H"), B.scalar("w", "int32", "W")]
    if op == "resize":
        sig += [B.scalar("oh", "int32", oh), B.scalar("ow", "int32", ow)]
    if op == "sobel" and p.get("thr"):
        sig.append(B.scalar("thresh", "float32", 100.0 if u8 else 0.5))
    sig += [B.inp("src", dt, in_shape, init=init), B.out("dst", dt, [oh, ow, out_ch] if out_ch > 1 else [oh, ow])]
    out_w = "ow" if op == "resize" else "w"
    out_h = "oh" if op == "resize" else "h"
    if border == "mirror":
        fix = ("static inline int fix(int i, int n) { if (n == 1) return 0; if (i < 0) i = -i; "
               "if (i >= n) i = 2 * n - 2 - i; return i; }")
    else:
        fix = "static inline int fix(int i, int n) { return i < 0 ? 0 : (i >= n ? n - 1 : i); }"
    at = f"(float)src[((long long)fix(Y, h) * w + fix(X, w)) * {ch} + C]"
    store_val = ("(uint8_t)fminf(fmaxf(v + 0.5f, 0.0f), 255.0f)" if u8 else "v")
    if op == "blur":
        f = FILTERS[p["filter"]]
        r = len(f) // 2
        tot = sum(map(sum, f))
        terms = [f"{f[dy][dx]}.0f * " + at.replace("Y", f"y + {dy - r}").replace("X", f"x + {dx - r}")
                 for dy in range(len(f)) for dx in range(len(f))]
        pix = (f"for (int c = 0; c < {ch}; ++c) {{\n    float v = ({' + '.join(terms).replace('+ C]', '+ c]')})"
               f" * (1.0f / {tot}.0f);\n    dst[((long long)y * w + x) * {ch} + c] = {store_val};\n  }}")
    elif op == "sobel":
        def g(dy, dx):
            return at.replace("Y", f"y + {dy}").replace("X", f"x + {dx}").replace("+ C]", "+ 0]")
        gx = f"({g(-1, 1)} + 2.0f * {g(0, 1)} + {g(1, 1)} - {g(-1, -1)} - 2.0f * {g(0, -1)} - {g(1, -1)})"
        gy = f"({g(1, -1)} + 2.0f * {g(1, 0)} + {g(1, 1)} - {g(-1, -1)} - 2.0f * {g(-1, 0)} - {g(-1, 1)})"
        mag = "sqrtf(gx * gx + gy * gy)" if p["filter"] == "l2" else "fabsf(gx) + fabsf(gy)"
        thr = ("v = v > thresh ? " + ("255.0f" if u8 else "1.0f") + " : 0.0f;") if p.get("thr") else ""
        pix = (f"float gx = {gx};\n  float gy = {gy};\n  float v = {mag};\n  {thr}\n"
               f"  dst[(long long)y * w + x] = {store_val};")
    elif op == "resize":
        if p["filter"] == "nearest":
            pix = (f"int sy = (int)(((long long)y * h) / oh), sx = (int)(((long long)x * w) / ow);\n"
                   f"  for (int c = 0; c < {ch}; ++c) dst[((long long)y * ow + x) * {ch} + c] = "
                   f"src[((long long)sy * w + sx) * {ch} + c];")
        else:
            a = lambda Y, X: at.replace("Y", Y).replace("X", X).replace("+ C]", "+ c]")
            pix = (f"float fy = ((float)y + 0.5f) * ((float)h / (float)oh) - 0.5f;\n"
                   f"  float fx = ((float)x + 0.5f) * ((float)w / (float)ow) - 0.5f;\n"
                   f"  int y0 = (int)floorf(fy), x0 = (int)floorf(fx);\n"
                   f"  float ty = fy - (float)y0, tx = fx - (float)x0;\n"
                   f"  for (int c = 0; c < {ch}; ++c) {{\n"
                   f"    float top = {a('y0', 'x0')} * (1.0f - tx) + {a('y0', 'x0 + 1')} * tx;\n"
                   f"    float bot = {a('y0 + 1', 'x0')} * (1.0f - tx) + {a('y0 + 1', 'x0 + 1')} * tx;\n"
                   f"    float v = top * (1.0f - ty) + bot * ty;\n"
                   f"    dst[((long long)y * ow + x) * {ch} + c] = {store_val};\n  }}")
    else:
        wr, wg, wb = GRAY[p["filter"]]
        if p["layout"] == "hwc":
            ch_at = lambda c: f"(float)src[((long long)y * w + x) * 3 + {c}]"
        else:
            ch_at = lambda c: f"(float)src[(long long){c} * h * w + (long long)y * w + x]"
        pix = (f"float v = {wr!r}f * {ch_at(0)} + {wg!r}f * {ch_at(1)} + {wb!r}f * {ch_at(2)};\n"
               f"  dst[(long long)y * w + x] = {store_val};")
    helpers = fix if op != "gray" else ""
    c_body = f"for (int y = 0; y < {out_h}; ++y)\n  for (int x = 0; x < {out_w}; ++x) {{\n  {pix}\n  }}"
    source = B.c_function(entry, sig, c_body, helpers=helpers)
    kargs = B.params_list(sig)
    call = ", ".join(a.name for a in sig)
    dev = fix.replace("static inline", "__device__ __forceinline__") if helpers else ""
    total = f"(long long){out_h} * {out_w}"
    naive = lambda proto: B.cuda_unit(proto, f"""
{dev}
__global__ void image_naive({kargs}) {{
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= {out_w} || y >= {out_h}) return;
  {pix}
}}""", f"if ({total} > 0) image_naive<<<dim3(({out_w} + 31) / 32, ({out_h} + 7) / 8), dim3(32, 8), 0, stream>>>({call});")
    grid = lambda proto: B.cuda_unit(proto, f"""
{dev}
__global__ void image_grid({kargs}) {{
  for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < {total}; e += (long long)gridDim.x * blockDim.x) {{
    int x = (int)(e % {out_w}), y = (int)(e / {out_w});
    {pix}
  }}
}}""", f"if ({total} > 0) image_grid<<<{B.grid1d(total, 256, '4096')}, 256, 0, stream>>>({call});")
    unrolled = lambda proto: B.cuda_unit(proto, f"""
{dev}
__global__ void image_unrolled({kargs}) {{
  int x0 = (blockIdx.x * blockDim.x + threadIdx.x) * 4, y = blockIdx.y;
#pragma unroll
  for (int u = 0; u < 4; ++u) {{
    int x = x0 + u;
    if (x < {out_w}) {{
      {pix}
    }}
  }}
}}""", f"if ({total} > 0) image_unrolled<<<dim3(({out_w} + 255) / 256, {out_h}), 64, 0, stream>>>({call});")
    impls = [("naive", ["naive", "coalesced"], naive, {"baseline": True}), ("grid_stride", ["grid_stride"], grid),
             ("unrolled", ["unrolled"], unrolled)]
    if B.wrong_for(p["name"]):
        impls.append(B.mutant(impls[2], f"if (x < {out_w})", f"if (x < {out_w} - 1)", "off_by_one"))
    o = p["odd"]
    configs = B.configs3({"H": 20 + o, "W": 30 + o}, {"H": 720 + o, "W": 1280 + o}, {"H": 4320 + o, "W": 7680 + o})
    tol = {"atol": 1, "rtol": 0} if u8 else {"atol": 1e-4, "rtol": 1e-4}
    nb = B.DTYPES_BYTES[dt]
    return B.make_task(tid=p["name"], track="c2cuda", entry=entry, source=source, signature=sig,
                       configs=configs, tol=tol, flops=f"{2 * ch * 9}*H*W", min_bytes=f"{2 * ch * nb}*H*W",
                       family="image", impls=impls)
