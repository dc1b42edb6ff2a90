// Host side: a kernel launch configuration for cudaLaunchKernelEx, with programmatic stream serialization
// (programmatic dependent launch, PDL) when asked. matvec.cu's handlers use it.
#pragma once
#include <cuda_runtime.h>

// A launch configuration, with programmatic stream serialization (PDL) when pdl; not copyable (cfg points at attr).
struct Launch {
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  Launch(dim3 grid, dim3 block, size_t smem, cudaStream_t stream, bool pdl) {
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = pdl ? 1 : 0;
  }
  Launch(const Launch&) = delete;
  Launch& operator=(const Launch&) = delete;
};
