// cudaperf CPU emulation: stands in for the CUDA header of this name.
#pragma once
#include "cudaperf_emu.h"
