// cudaperf CPU emulation: stands in for CUDA's cooperative_groups.h (block and warp groups only).
#pragma once
#include "cudaperf_emu_cg.h"
