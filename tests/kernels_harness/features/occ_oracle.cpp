// The CUDA occupancy header's own calculation for an sm_90 device (H100/H200 properties), as an
// oracle for kernels_harness/features/occupancy.py. Reads lines "regs static_smem threads dyn_smem
// max_dyn barriers" (max_dyn < 0: the default attribute, 48 KiB minus static) and prints
// "blocks limitingFactors" per line.
#include <cstdio>
#include <cuda_occupancy.h>

int main() {
    cudaOccDeviceProp p;
    p.computeMajor = 9; p.computeMinor = 0; p.maxThreadsPerBlock = 1024;
    p.maxThreadsPerMultiprocessor = 2048; p.regsPerBlock = 65536; p.regsPerMultiprocessor = 65536;
    p.warpSize = 32; p.sharedMemPerBlock = 49152; p.sharedMemPerMultiprocessor = 233472;
    p.numSms = 132; p.sharedMemPerBlockOptin = 232448; p.reservedSharedMemPerBlock = 1024;
    cudaOccDeviceState s;
    long regs, smem, threads, dyn, maxdyn, bars;
    while (scanf("%ld %ld %ld %ld %ld %ld", &regs, &smem, &threads, &dyn, &maxdyn, &bars) == 6) {
        cudaOccFuncAttributes a;
        a.maxThreadsPerBlock = 1024; a.numRegs = (int)regs; a.sharedSizeBytes = smem;
        a.shmemLimitConfig = FUNC_SHMEM_LIMIT_OPTIN;
        a.maxDynamicSharedSizeBytes = maxdyn < 0 ? 49152 - smem : maxdyn;
        a.numBlockBarriers = (int)bars;
        cudaOccResult r;
        cudaOccError e = cudaOccMaxActiveBlocksPerMultiprocessor(&r, &p, &a, &s, (int)threads, dyn);
        if (e != CUDA_OCC_SUCCESS) printf("-1 0\n");
        else printf("%d %u\n", r.activeBlocksPerMultiprocessor, r.limitingFactors);
    }
    return 0;
}
