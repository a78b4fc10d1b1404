// GPU memory as LibTorch's CUDA caching allocator counts it: what tensors hold (allocated) and
// what the allocator holds from the driver (reserved), now and at their peaks.
//
// NOTE [GPU memory figures]: the CPU memory meter (core/memory_meter.h) wraps c10's CPU
// allocator; on a GPU the tensors come from the caching allocator, which keeps these counts
// itself. CMakeLists.txt compiles gpu_memory.cpp on CUDA builds and no_gpu_memory.cpp on CPU
// builds (as NOTE [No-NCCL stub]), so the CPU build needs no CUDA header.
#pragma once

#include <cstdint>

#include "core/device.h"

namespace vescale {

struct GpuMemory {
  int64_t allocated = 0;       ///< bytes of live tensors
  int64_t reserved = 0;        ///< bytes the allocator holds (cached blocks included)
  int64_t allocated_peak = 0;  ///< since the last reset_gpu_memory_peaks
  int64_t reserved_peak = 0;
};

/// Whether this build reads GPU memory (a CUDA LibTorch).
bool gpu_memory_built();
/// The caching allocator's figures of `device`, a CUDA device of this process.
GpuMemory gpu_memory(Device device);
/// Starts both peaks of `device` over from the current figures.
void reset_gpu_memory_peaks(Device device);

}  // namespace vescale
