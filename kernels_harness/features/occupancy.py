"""Theoretical occupancy of one launch on sm_90 (H100/H200), the rules of the CUDA occupancy calculator.

The arithmetic is a transcription of `cudaOccMaxActiveBlocksPerMultiprocessor` in CUDA 13.0's
`include/cuda_occupancy.h` (the header the runtime's occupancy API is specified by), restricted to
compute capability 9.0 with the default shared-memory carveout. Every constant is from that header
(function named beside it) or from the CUDA C++ Programming Guide, "Compute Capabilities", table
"Technical Specifications per Compute Capability" (column 9.0), which agree:

    warps per SM 64 (2048 threads / 32)                      guide; cudaOccMaxBlocksPerSMWarpsLimit
    blocks per SM 32                                         cudaOccMaxBlocksPerMultiprocessor, case 9
    registers per SM and per block 65536                     guide
    register allocation unit 256 per warp                    cudaOccRegAllocationGranularity
    4 sub-partitions, registers split evenly between them    cudaOccSubPartitionsPerMultiprocessor
    255 registers per thread (ptxas never assigns more)      guide (the header's check is 256)
    shared memory per SM 228 KiB (233472 B)                  guide; default carveout = all of it
    shared memory per block 48 KiB, 227 KiB by opt-in        guide (cudaFuncAttributeMaxDynamicSharedMemorySize)
    1 KiB reserved by the driver per block                   cudaDeviceProp.reservedSharedMemPerBlock
    shared memory allocation unit 128 B                      cudaOccSMemAllocationGranularity
    carveout sizes 0,8,16,32,64,100,132,164,196,228 KiB      cudaOccAlignUpShmemSizeVoltaPlus, case 9
    named barriers: 2 per block slot (64 per SM)             cudaOccMaxBlocksPerSMBlockBarrierLimit

The results are checked against the header itself on the CPU (tests compile it with g++) and
against `cudaOccupancyMaxActiveBlocksPerMultiprocessor` on an H200 (benchmarks/features_validation.py).
"""
from __future__ import annotations

import dataclasses

WARP = 32
MAX_THREADS_PER_BLOCK = 1024
MAX_WARPS_PER_SM = 64
MAX_BLOCKS_PER_SM = 32
REGS_PER_SM = 65536
REGS_PER_BLOCK = 65536
REG_ALLOC_UNIT = 256
SUB_PARTITIONS = 4
MAX_REGS_PER_THREAD = 255
SMEM_PER_SM = 228 * 1024
SMEM_PER_BLOCK_DEFAULT = 48 * 1024
SMEM_PER_BLOCK_OPTIN = 227 * 1024
SMEM_RESERVED_PER_BLOCK = 1024
SMEM_ALLOC_UNIT = 128
CARVEOUTS_KIB = (0, 8, 16, 32, 64, 100, 132, 164, 196, 228)
BARRIERS_PER_BLOCK_SLOT = 2
NUM_SMS = 132                      # H100 SXM and H200 SXM (cudaDeviceProp.multiProcessorCount)

LIMITS = ("warps", "registers", "shared_memory", "blocks", "barriers")


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def _align_carveout(size: int) -> int:
    """The smallest sm_90 carveout (bytes) holding `size` bytes (cudaOccAlignUpShmemSizeVoltaPlus)."""
    for kib in CARVEOUTS_KIB:
        if size <= kib * 1024:
            return kib * 1024
    raise ValueError(f"{size} bytes of shared memory exceed the 228 KiB of an sm_90 SM")


@dataclasses.dataclass(frozen=True)
class Occupancy:
    """Blocks and warps per SM of one launch shape, and what limits them."""
    blocks_per_sm: int
    warps_per_sm: int
    occupancy: float                 # warps_per_sm / 64, in [0, 1]
    limiting: tuple                  # the names in LIMITS that attain the minimum ("launch" when 0)
    limits: dict                     # name -> blocks per SM allowed by that resource alone
    registers_per_block: int         # allocated (granular)
    smem_per_block: int              # allocated, with the 1 KiB reservation, rounded to 128 B
    note: str = ""                   # why blocks_per_sm is 0, if it is

    def to_dict(self) -> dict:
        return dataclasses.asdict(self) | {"limiting": list(self.limiting)}


def theoretical(registers: int, smem_per_block: int, threads_per_block: int, dynamic_smem: int = 0,
                barriers: int = 0, max_dynamic_smem: int | None = None) -> Occupancy:
    """Theoretical occupancy of a kernel launch on one sm_90 SM.

    registers: registers per thread (ptxas "Used N registers"); smem_per_block: static shared memory
    in bytes (ptxas "N bytes smem"); threads_per_block: blockDim.x*y*z; dynamic_smem: the launch's
    dynamic shared memory in bytes; barriers: named barriers used (ptxas "used N barriers"; 0 or 1 for
    plain __syncthreads, which is never limiting); max_dynamic_smem: the kernel's
    cudaFuncAttributeMaxDynamicSharedMemorySize if the program raised it (opt-in above 48 KiB).
    """
    if threads_per_block <= 0:
        raise ValueError("threads_per_block must be positive")
    limits: dict[str, int] = {}
    note = ""
    warps_per_block = -(-threads_per_block // WARP)
    # warps
    limits["warps"] = 0 if threads_per_block > MAX_THREADS_PER_BLOCK else MAX_WARPS_PER_SM // warps_per_block
    if threads_per_block > MAX_THREADS_PER_BLOCK:
        note = f"{threads_per_block} threads per block exceed the limit of {MAX_THREADS_PER_BLOCK}"
    # registers (cudaOccMaxBlocksPerSMRegsLimit)
    regs_per_warp = _round_up(registers * WARP, REG_ALLOC_UNIT)
    regs_per_block = regs_per_warp * warps_per_block
    regs_assumed = regs_per_warp * _round_up(warps_per_block, SUB_PARTITIONS)
    if regs_assumed > REGS_PER_BLOCK or regs_per_block > REGS_PER_BLOCK or registers > MAX_REGS_PER_THREAD:
        limits["registers"] = 0
        note = note or f"{registers} registers x {threads_per_block} threads exceed the 64K registers of a block"
    elif regs_per_warp == 0:
        limits["registers"] = 1 << 30
    else:
        warps_per_sub = (REGS_PER_SM // SUB_PARTITIONS) // regs_per_warp
        limits["registers"] = warps_per_sub * SUB_PARTITIONS // warps_per_block
    limits["blocks"] = MAX_BLOCKS_PER_SM
    # shared memory (cudaOccMaxBlocksPerSMSmemLimit, default carveout preference = the whole SM)
    static = smem_per_block + SMEM_RESERVED_PER_BLOCK
    smem_alloc = _round_up(static + dynamic_smem, SMEM_ALLOC_UNIT)
    max_dyn = SMEM_PER_BLOCK_DEFAULT - smem_per_block if max_dynamic_smem is None else max_dynamic_smem
    # as the runtime converts cudaFuncAttributes: the opt-in limit applies once static + reserved +
    # the kernel's maximum dynamic size passes the 48 KiB default
    optin = static + max_dyn > SMEM_PER_BLOCK_DEFAULT
    per_block_limit = (SMEM_PER_BLOCK_OPTIN if optin else SMEM_PER_BLOCK_DEFAULT) + SMEM_RESERVED_PER_BLOCK
    if dynamic_smem > max_dyn:
        limits["shared_memory"] = 0
        note = note or (f"{dynamic_smem} bytes of dynamic shared memory exceed the kernel's limit of {max_dyn}; "
                        "raise it with cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, n)")
    elif smem_alloc > per_block_limit:
        limits["shared_memory"] = 0
        note = note or (f"{smem_alloc - SMEM_RESERVED_PER_BLOCK} bytes of shared memory per block exceed the "
                        f"{per_block_limit - SMEM_RESERVED_PER_BLOCK} bytes an sm_90 block may use")
    else:
        per_sm = SMEM_PER_SM if SMEM_PER_SM >= smem_alloc else _align_carveout(smem_alloc)
        limits["shared_memory"] = per_sm // smem_alloc if smem_alloc else 1 << 30
    blocks = min(limits.values())
    if barriers > 0:
        limits["barriers"] = MAX_BLOCKS_PER_SM * BARRIERS_PER_BLOCK_SLOT // barriers
        blocks = min(blocks, limits["barriers"])
    limiting = tuple(k for k in LIMITS if k in limits and limits[k] == blocks)
    warps = blocks * warps_per_block
    return Occupancy(blocks_per_sm=blocks, warps_per_sm=warps, occupancy=warps / MAX_WARPS_PER_SM,
                     limiting=limiting, limits={k: min(v, 1 << 30) for k, v in limits.items()},
                     registers_per_block=regs_per_block, smem_per_block=smem_alloc, note=note)
