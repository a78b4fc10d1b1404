#include "core/device.h"

#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/cuda.h>

#include <fmt/ranges.h>

#include <optional>
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

const EnumNames<DeviceSetting>& device_setting_names() {
  static const EnumNames<DeviceSetting> names("training.device", {{DeviceSetting::kAuto, "auto"},
                                                                  {DeviceSetting::kCpu, "cpu"},
                                                                  {DeviceSetting::kCuda, "cuda"}});
  return names;
}

Device resolve_device(const std::string& setting, int local_rank, int gpus) {
  const std::optional<DeviceSetting> known = device_setting_names().find(setting);
  const std::vector<std::string>& valid = device_setting_names().names();
  VS_USER_CHECK(known.has_value(), "training.device = '{}' is not one of {}{}", setting,
                fmt::join(valid, ", "), did_you_mean(setting, valid));
  return resolve_device(*known, local_rank, gpus);
}

Device resolve_device(DeviceSetting setting, int local_rank, int gpus) {
  if (setting == DeviceSetting::kCpu || (setting == DeviceSetting::kAuto && gpus == 0)) return kCpu;
  VS_USER_CHECK(gpus > 0,
                "training.device = 'cuda', but no GPU is visible to this process (a CPU-only "
                "LibTorch, or no CUDA device): use 'cpu' or 'auto'");
  VS_USER_CHECK(local_rank >= 0 && local_rank < gpus,
                "training.device = '{}': local rank {} needs GPU cuda:{}, but this process sees "
                "{} GPU(s): start at most {} processes per node",
                device_setting_names().name(setting), local_rank, local_rank, gpus, gpus);
  return Device(c10::kCUDA, static_cast<c10::DeviceIndex>(local_rank));
}

Device parse_device(DeviceSetting setting, int local_rank) {
  return resolve_device(setting, local_rank, cuda_device_count());
}

Device parse_device(const std::string& setting, int local_rank) {
  return resolve_device(setting, local_rank, cuda_device_count());
}

void bind_device(Device device) {
  // The generic device guard: no CUDA header, so this compiles in the CPU build too.
  if (device.is_cuda()) c10::impl::getDeviceGuardImpl(device.type())->setDevice(device);
}

}  // namespace vescale
