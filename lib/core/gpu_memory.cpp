// The CUDA build's GPU memory figures (NOTE [GPU memory figures] in gpu_memory.h).
#include "core/gpu_memory.h"

#include <c10/cuda/CUDACachingAllocator.h>

#include "core/error.h"

namespace vescale {
namespace {

// StatType::AGGREGATE: every pool together. The enum moved between namespaces across LibTorch
// versions (c10::cuda::CUDACachingAllocator, then c10::CachingAllocator); its first value did not.
constexpr size_t kAggregate = 0;

c10::DeviceIndex index_of(Device device) {
  VS_CHECK(device.is_cuda(), "[memory] {} is not a CUDA device", device.str());
  return device.index();
}

}  // namespace

bool gpu_memory_built() {
  return true;
}

GpuMemory gpu_memory(Device device) {
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(index_of(device));
  GpuMemory m;
  m.allocated = stats.allocated_bytes[kAggregate].current;
  m.reserved = stats.reserved_bytes[kAggregate].current;
  m.allocated_peak = stats.allocated_bytes[kAggregate].peak;
  m.reserved_peak = stats.reserved_bytes[kAggregate].peak;
  return m;
}

void reset_gpu_memory_peaks(Device device) {
  c10::cuda::CUDACachingAllocator::resetPeakStats(index_of(device));
}

}  // namespace vescale
