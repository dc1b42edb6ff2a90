"""occupancy.theoretical against the CUDA occupancy header (compiled with g++) and hand-worked cases."""
import itertools
import shutil
import subprocess
from pathlib import Path

import pytest

from kernels_harness.features import occupancy

HEADER_DIRS = [Path("/usr/local/cuda/include"), Path("/usr/local/cuda-13.0/include")]
FLAGS = {"warps": 1, "registers": 2, "shared_memory": 4, "blocks": 8, "barriers": 16}


def test_hand_worked_cases():
    # 256 threads, 32 regs: 8 warps/block; regs allow 64 warps -> 8 blocks; warps allow 8 -> 100 %.
    o = occupancy.theoretical(32, 0, 256)
    assert (o.blocks_per_sm, o.occupancy) == (8, 1.0)
    assert set(o.limiting) == {"warps", "registers"}
    # 64 regs x 32 lanes = 2048 per warp; 16384 per sub-partition -> 8 warps each, 32 per SM.
    o = occupancy.theoretical(64, 0, 256)
    assert (o.blocks_per_sm, o.warps_per_sm, o.limiting) == (4, 32, ("registers",))
    # 33 regs round up to 1280 per warp (unit 256) -> 12 warps per sub-partition -> 48 per SM -> 6 blocks.
    o = occupancy.theoretical(33, 0, 256)
    assert (o.blocks_per_sm, o.occupancy) == (6, 0.75)
    # 32 threads per block: the 32-block limit caps warps at 32 of 64.
    o = occupancy.theoretical(16, 0, 32)
    assert (o.blocks_per_sm, o.occupancy, o.limiting) == (32, 0.5, ("blocks",))
    # 40 KiB static smem + 1 KiB reserved = 41 KiB -> floor(228/41) = 5 blocks.
    o = occupancy.theoretical(32, 40 * 1024, 128)
    assert (o.blocks_per_sm, o.limiting, o.smem_per_block) == (5, ("shared_memory",), 41 * 1024)
    # dynamic smem above 48 KiB without the opt-in attribute cannot launch.
    o = occupancy.theoretical(32, 0, 128, dynamic_smem=64 * 1024)
    assert o.blocks_per_sm == 0 and "cudaFuncSetAttribute" in o.note
    o = occupancy.theoretical(32, 0, 128, dynamic_smem=64 * 1024, max_dynamic_smem=100 * 1024)
    assert o.blocks_per_sm == 3  # 65 KiB per block in 228 KiB
    assert occupancy.theoretical(32, 0, 2048).blocks_per_sm == 0


def _grid():
    regs = [0, 8, 16, 24, 31, 32, 33, 40, 48, 56, 64, 72, 80, 96, 128, 168, 200, 255]
    smem = [0, 1, 1000, 4096, 7000, 10576, 12 * 1024, 16400, 23000, 33 * 1024, 48 * 1024]
    threads = [1, 32, 33, 64, 96, 128, 192, 256, 320, 384, 512, 640, 768, 1024, 1025]
    dyn = [(0, -1), (3000, -1), (2500, -1), (9100, -1), (20 * 1024, -1), (60 * 1024, -1), (60 * 1024, 100 * 1024),
           (150 * 1024, 180 * 1024), (200 * 1024, 227 * 1024)]
    for r, s, t, (d, m), b in itertools.product(regs, smem, threads, dyn, (0, 1)):
        if m >= 0 and s + m > 227 * 1024:
            continue
        yield r, s, t, d, m, b


def test_agrees_with_cuda_occupancy_header(tmp_path):
    header = next((d for d in HEADER_DIRS if (d / "cuda_occupancy.h").is_file()), None)
    if header is None or shutil.which("g++") is None:
        pytest.skip("needs g++ and the CUDA toolkit's cuda_occupancy.h")
    exe = tmp_path / "occ_oracle"
    src = Path(__file__).with_name("occ_oracle.cpp")
    subprocess.run(["g++", "-O1", f"-I{header}", "-o", str(exe), str(src)], check=True, timeout=120)
    cases = list(_grid())
    assert len(cases) > 20000
    out = subprocess.run([str(exe)], input="\n".join(" ".join(map(str, c)) for c in cases), text=True,
                         capture_output=True, check=True, timeout=120).stdout.split("\n")
    mismatches = []
    for case, line in zip(cases, out):
        blocks, flags = map(int, line.split())
        r, s, t, d, m, b = case
        o = occupancy.theoretical(r, s, t, dynamic_smem=d, barriers=b, max_dynamic_smem=None if m < 0 else m)
        mine = sum(FLAGS[k] for k in o.limiting)
        if blocks < 0:
            blocks = 0  # the header reports an input error (block > 1024): no block fits
            flags = mine
        if o.blocks_per_sm != blocks or (blocks > 0 and mine != flags):
            mismatches.append((case, blocks, flags, o.blocks_per_sm, o.limiting))
    assert not mismatches, mismatches[:10]
