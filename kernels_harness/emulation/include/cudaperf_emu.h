// cudaperf CPU emulation backend: the header force-included (g++ -include) before a CUDA translation
// unit that the source rewriter (kernels_harness/emulation/rewrite.py) has prepared. Together with the
// runtime (cudaperf_emu_runtime.h, linked into every solution library) it runs CUDA C++ on the CPU:
// blocks on a pool of OS threads, the threads of a block as fibers when the kernel uses barriers or warp
// collectives, otherwise as a plain loop.
#pragma once
#ifndef CUDAPERF_EMU_H
#define CUDAPERF_EMU_H
#ifndef __CUDACC__
#define __CUDACC__ 1
#endif
#define __CUDAPERF_EMULATION__ 1
#define __CUDACC_VER_MAJOR__ 13
#define __CUDACC_VER_MINOR__ 0

#include <cfloat>
#include <climits>
#include <cmath>
#include <math.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

// Function and variable qualifiers. __shared__, extern __shared__, __noinline__ and launches are
// rewritten by the source rewriter; the macro below is a fallback for __shared__ inside other macros.
#define __global__
#define __device__
#define __host__
#define __constant__
#define __managed__
#define __forceinline__
#define __inline_hint__
#define __grid_constant__
#define __launch_bounds__(...)
#define __maxnreg__(n)
#define __cluster_dims__(...)
#define __shared__ static thread_local

#include "cudaperf_emu_types.h"
#include "cudaperf_emu_half.h"
#include "cudaperf_emu_device.h"
#include "cudaperf_emu_volatile.h"
#include "cudaperf_emu_api.h"
#include "math_constants.h"
#endif  // CUDAPERF_EMU_H
