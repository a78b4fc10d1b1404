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

Device resolve_device(const std::string& setting, int local_rank, int gpus, int local_ranks) {
  const std::optional<DeviceSetting> known = device_setting_names().find(setting);
  const std::vector<std::string>& valid = device_setting_names().names();
  VS_USER_CHECK(known.has_value(), "training.device = '{}' is not one of {}{}", setting,
                fmt::join(valid, ", "), did_you_mean(setting, valid));
  return resolve_device(*known, local_rank, gpus, local_ranks);
}

// NOTE [Ranks sharing a GPU]
// A node may start more ranks than it has GPUs: several ranks on one GPU run every multi-rank
// layout with CUDA tensors on a machine with one GPU (issue [35]), where the bugs multi-GPU jobs
// meet first show (a tensor left on the host in a collective, a copy on the wrong stream). Local
// rank r then computes on cuda:(r mod GPUs), and the node's local rank 0 says so in one warning
// line. NCCL takes one rank a GPU (it refuses two ranks on one device), so such a job runs over
// Gloo: comm.backend = "auto" picks it, and "nccl" is refused before any rank starts
// (comm::resolve_backend). Gloo moves CUDA tensors through host memory (NOTE [Gloo with CUDA
// tensors], comm/group_impl.h). Each rank is its own process with its own CUDA context, so the
// ranks on a GPU share its memory and its time: a layout check, not a way to go faster.
Device resolve_device(DeviceSetting setting, int local_rank, int gpus, int local_ranks) {
  if (setting == DeviceSetting::kCpu || (setting == DeviceSetting::kAuto && gpus == 0)) return kCpu;
  VS_USER_CHECK(gpus > 0,
                "training.device = 'cuda', but no GPU is visible to this process (a CPU-only "
                "LibTorch, or no CUDA device): use 'cpu' or 'auto'");
  VS_USER_CHECK(local_rank >= 0, "training.device = '{}': local rank {} is negative",
                device_setting_names().name(setting), local_rank);
  VS_USER_CHECK(local_rank < gpus || local_ranks > gpus,
                "training.device = '{}': local rank {} needs GPU cuda:{}, but this process sees {} "
                "GPU(s) and its launcher says the node runs {} rank(s) (LOCAL_WORLD_SIZE, "
                "SLURM_NTASKS_PER_NODE, OMPI_COMM_WORLD_LOCAL_SIZE): start at most {} processes "
                "per node, or tell the launcher the node's rank count to share its GPUs",
                device_setting_names().name(setting), local_rank, local_rank, gpus, local_ranks,
                gpus);
  return Device(c10::kCUDA, static_cast<c10::DeviceIndex>(local_rank % gpus));
}

bool shares_gpus(DeviceSetting setting, int local_ranks, int gpus) {
  const bool cuda =
      setting == DeviceSetting::kCuda || (setting == DeviceSetting::kAuto && gpus > 0);
  return cuda && gpus > 0 && local_ranks > gpus;
}

std::string gpu_sharing_warning(int local_ranks, int gpus) {
  return fmt::format(
      "[device] {} local ranks share {} GPU{}: local rank r computes on cuda:(r mod {}), {} "
      "ranks a GPU at most, over Gloo (NCCL takes one rank a GPU); a layout check, not a speed-up "
      "(NOTE [Ranks sharing a GPU])",
      local_ranks, gpus, gpus == 1 ? "" : "s", gpus, (local_ranks + gpus - 1) / gpus);
}

Device parse_device(DeviceSetting setting, int local_rank, int local_ranks) {
  return resolve_device(setting, local_rank, cuda_device_count(), local_ranks);
}

Device parse_device(const std::string& setting, int local_rank, int local_ranks) {
  return resolve_device(setting, local_rank, cuda_device_count(), local_ranks);
}

void bind_device(Device device) {
  // The generic device guard: no CUDA header, so this compiles in the CPU build too.
  if (device.is_cuda()) c10::impl::getDeviceGuardImpl(device.type())->setDevice(device);
}

}  // namespace vescale
