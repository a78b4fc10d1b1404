// The CPU build's stand-in for GPU memory figures (NOTE [GPU memory figures] in gpu_memory.h): it
// has no GPU, so nothing asks for them but by mistake.
#include "core/error.h"
#include "core/gpu_memory.h"

namespace vescale {

bool gpu_memory_built() {
  return false;
}

GpuMemory gpu_memory(Device device) {
  throw Error(fmt::format("[memory] GPU memory of {} asked of a build without CUDA", device.str()));
}

void reset_gpu_memory_peaks(Device device) {
  throw Error(fmt::format("[memory] GPU memory of {} asked of a build without CUDA", device.str()));
}

}  // namespace vescale
