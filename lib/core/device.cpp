#include "core/device.h"

#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/cuda.h>

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "core/suggest.h"

namespace vescale {

int cuda_device_count() {
  return static_cast<int>(torch::cuda::device_count());
}

std::string cuda_build_version() {
  // A CPU build's hooks throw here; a CUDA build's report the CUDA runtime it was compiled with
  // (major * 1000 + minor * 10), GPU or not.
  try {
    const long version = at::detail::getCUDAHooks().versionCUDART();
    return fmt::format("{}.{}", version / 1000, version % 1000 / 10);
  } catch (const c10::Error&) {
    return "";
  }
}

Device resolve_device(const std::string& setting, int local_rank, int gpus) {
  const std::vector<std::string> valid{"auto", "cpu", "cuda"};
  if (std::find(valid.begin(), valid.end(), setting) == valid.end()) {
    throw UserError(fmt::format("training.device = '{}' is not one of auto, cpu, cuda{}", setting,
                                did_you_mean(setting, valid)));
  }
  if (setting == "cpu" || (setting == "auto" && gpus == 0)) return kCpu;
  VS_USER_CHECK(gpus > 0,
                "training.device = 'cuda', but no GPU is visible to this process (a CPU-only "
                "LibTorch, or no CUDA device): use 'cpu' or 'auto'");
  VS_USER_CHECK(local_rank >= 0 && local_rank < gpus,
                "training.device = '{}': local rank {} needs GPU cuda:{}, but this process sees "
                "{} GPU(s): start at most {} processes per node",
                setting, local_rank, local_rank, gpus, gpus);
  return Device(c10::kCUDA, static_cast<c10::DeviceIndex>(local_rank));
}

Device parse_device(const std::string& setting, int local_rank) {
  return resolve_device(setting, local_rank, cuda_device_count());
}

void bind_device(Device device) {
  // The generic device guard: no CUDA header, so this compiles in the CPU build too.
  if (device.is_cuda()) c10::impl::getDeviceGuardImpl(device.type())->setDevice(device);
}

}  // namespace vescale
