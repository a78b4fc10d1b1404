// The CPU build has no GPU activity to record (NOTE [GPU activity] in gpu_activity.h).
#include "core/error.h"
#include "train/gpu_activity.h"

namespace vescale {

bool GpuActivity::built() {
  return false;
}

void GpuActivity::start(const std::function<double()>&) {
  throw Error("[profile] GPU activity asked of a build without CUDA");
}

std::vector<GpuActivityEvent> GpuActivity::stop() {
  return {};
}

}  // namespace vescale
