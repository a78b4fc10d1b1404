// The device a rank computes on: the CPU, or the GPU cuda:LOCAL_RANK (docs/design.md §16). It flows
// from the job to every tensor factory in comm/, dtensor/, models/ and data/.
#pragma once

#include <c10/core/Device.h>

#include <string>

#include "core/enum_names.h"

namespace vescale {

using Device = c10::Device;

/// The CPU: the default wherever a Device may be left out.
inline const Device kCpu{c10::kCPU};

/// GPUs this process sees: 0 when LibTorch has no CUDA or the machine has no GPU.
int cuda_device_count();
/// The CUDA runtime version LibTorch was built with ("12.4"), or "" for a CPU build.
std::string cuda_build_version();

/// Where a rank computes, as training.device and --device flags name it.
enum class DeviceSetting { kAuto, kCpu, kCuda };
/// DeviceSetting <-> "auto", "cpu", "cuda".
const EnumNames<DeviceSetting>& device_setting_names();

/// Resolves training.device for the rank with `local_rank`, given `gpus` visible GPUs: kCpu;
/// kCuda (cuda:local_rank); kAuto (cuda:local_rank when there is a GPU, else cpu). Throws
/// UserError for kCuda (or kAuto with GPUs) without a GPU for the rank.
Device resolve_device(DeviceSetting setting, int local_rank, int gpus);
/// The same for a setting's name; UserError naming the settings for another name.
Device resolve_device(const std::string& setting, int local_rank, int gpus);
/// resolve_device with the GPUs this process sees.
Device parse_device(DeviceSetting setting, int local_rank);
Device parse_device(const std::string& setting, int local_rank);
/// Makes `device` the current CUDA device of the calling thread (libraries that allocate on "the
/// current device", NCCL's barrier among them, then use the rank's GPU). Nothing for the CPU.
void bind_device(Device device);

}  // namespace vescale
