// What a GPU is: its name and compute capability, for the MFU peak (NOTE [MFU peak]).
//
// NOTE [GPU facts from the driver]: read from the CUDA driver that a CUDA process has loaded
// (libcuda.so.1: cuDeviceGet, cuDeviceGetName, cuDeviceGetAttribute, whose signatures have not
// changed since CUDA 2), looked up by name at run time. So the file needs no CUDA header and
// no CUDA library at build time, and it is the same in every build: where the driver is not
// loaded (a CPU build, a process that has not touched CUDA) the facts are empty.
#pragma once

#include <string>

#include "core/device.h"

namespace vescale {

struct GpuFacts {
  std::string name;  ///< "NVIDIA H100 80GB HBM3", as nvidia-smi names it; "" when unknown
  int major = 0;     ///< compute capability, 0.0 when unknown
  int minor = 0;
};

/// The facts of `device` (a CUDA device of this process), or empty ones when the driver cannot
/// say (or `device` is not CUDA).
GpuFacts gpu_facts(Device device);

}  // namespace vescale
